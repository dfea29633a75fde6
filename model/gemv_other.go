//go:build !amd64 || noasm

package model

func dot4Vec(out *[4]float32, x, w []float32, ldw int) int { return 0 }

func dot4x2Vec(out *[8]float32, x []float32, ldx, k int, w []float32, ldw int) int { return 0 }
