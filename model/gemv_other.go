//go:build !amd64 || noasm

package model

func dot4Vec(out *[4]float32, x, w []float32, ldw int) int { return 0 }
