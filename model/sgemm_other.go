//go:build !amd64 || noasm

package model

const haveSgemmKernel = false

func sgemmKernel6x16(k int, a, b, c *float32, ldc int, add bool) { panic("model: no sgemm kernel on this platform") }
