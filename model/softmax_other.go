//go:build !amd64 || noasm

package model

import "math"

func softmaxExpVec(out, x, m []float32, shift float32) (int, float32) { return 0, 0 }

func maskedMaxVec(x, m []float32) (int, float32) { return 0, float32(math.Inf(-1)) }

func maxVec(x []float32) (int, float32) { return 0, float32(math.Inf(-1)) }

func expShiftVec(out, x []float32, shift float32) (int, float32) { return 0, 0 }
