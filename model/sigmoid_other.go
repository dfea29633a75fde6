//go:build !amd64 || noasm

package model

func sigmoid4(s []float64, n int) int { return 0 }
