//go:build !amd64 || noasm

package model

func packA6Vec(dst, a []float32, lda, kb int, alpha float32) int { return 0 }
