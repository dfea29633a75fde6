//go:build !noasm

package model

import "golang.org/x/sys/cpu"

// haveAVX2FMA reports whether the assembly kernels can run.
var haveAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// sgemmKernel6x16 adds (add) or writes the product of a packed 6 x k panel
// a and a packed k x 16 panel b to the 6 x 16 block of c at c (row stride
// ldc), k >= 1. When writing, it adds bias[0..15] (if not nil) to each row.
//
//go:noescape
func sgemmKernel6x16(k int, a, b, c *float32, ldc int, bias *float32, add bool)
