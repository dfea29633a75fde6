package gguf

import (
	"fmt"
	"math"
)

// DType is a ggml tensor type (enum ggml_type in ggml.h).
type DType uint32

// The ggml types whose storage sizes this package knows. Float32 dequantizes
// F32, F16, BF16, Q8_0, Q4_0 and Q4_1; the others open (their extents can be
// checked) but are not dequantized.
const (
	F32  DType = 0
	F16  DType = 1
	Q4_0 DType = 2
	Q4_1 DType = 3
	Q5_0 DType = 6
	Q5_1 DType = 7
	Q8_0 DType = 8
	Q2_K DType = 10
	Q3_K DType = 11
	Q4_K DType = 12
	Q5_K DType = 13
	Q6_K DType = 14
	Q8_K DType = 15
	// 16..23, 29, 34, 35, 39..41: i-quants, ternary and FP4 blocks (traits only).
	I8   DType = 24
	I16  DType = 25
	I32  DType = 26
	I64  DType = 27
	F64  DType = 28
	BF16 DType = 30
)

// trait is a type's block: block elements stored in size bytes
// (ggml type_traits blck_size and type_size; the table is gguf-py's
// GGML_QUANT_SIZES, gguf 0.19.0). Q8_1 (9) is left out: it is a
// computation-only type whose size gguf-py and ggml disagree on.
type trait struct {
	name  string
	block uint64
	size  uint64
}

var traits = map[DType]trait{
	F32: {"F32", 1, 4}, F16: {"F16", 1, 2}, BF16: {"BF16", 1, 2}, F64: {"F64", 1, 8},
	I8: {"I8", 1, 1}, I16: {"I16", 1, 2}, I32: {"I32", 1, 4}, I64: {"I64", 1, 8},
	Q4_0: {"Q4_0", 32, 18}, Q4_1: {"Q4_1", 32, 20}, Q5_0: {"Q5_0", 32, 22}, Q5_1: {"Q5_1", 32, 24},
	Q8_0: {"Q8_0", 32, 34},
	Q2_K: {"Q2_K", 256, 84}, Q3_K: {"Q3_K", 256, 110}, Q4_K: {"Q4_K", 256, 144},
	Q5_K: {"Q5_K", 256, 176}, Q6_K: {"Q6_K", 256, 210}, Q8_K: {"Q8_K", 256, 292},
	16: {"IQ2_XXS", 256, 66}, 17: {"IQ2_XS", 256, 74}, 18: {"IQ3_XXS", 256, 98}, 19: {"IQ1_S", 256, 50},
	20: {"IQ4_NL", 32, 18}, 21: {"IQ3_S", 256, 110}, 22: {"IQ2_S", 256, 82}, 23: {"IQ4_XS", 256, 136},
	29: {"IQ1_M", 256, 56}, 34: {"TQ1_0", 256, 54}, 35: {"TQ2_0", 256, 66}, 39: {"MXFP4", 32, 17},
	40: {"NVFP4", 64, 36}, 41: {"Q1_0", 128, 18},
}

func (t DType) String() string {
	if tr, ok := traits[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize returns the elements per block and the bytes per block, and
// false for a type this package does not know.
func (t DType) BlockSize() (elems, bytes uint64, ok bool) {
	tr, ok := traits[t]
	return tr.block, tr.size, ok
}

var dequantizers = map[DType]func(src []byte, dst []float32){
	F32:  dequantF32,
	F16:  dequantF16,
	BF16: dequantBF16,
	Q8_0: dequantQ8_0,
	Q4_0: dequantQ4_0,
	Q4_1: dequantQ4_1,
}

// Dequantize decodes len(dst) elements of type t from src, which must hold
// exactly len(dst)/block blocks. Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1.
func Dequantize(t DType, src []byte, dst []float32) error {
	fn, ok := dequantizers[t]
	if !ok {
		return fmt.Errorf("cannot dequantize type %s", t)
	}
	tr := traits[t]
	if uint64(len(dst))%tr.block != 0 {
		return fmt.Errorf("%s: %d elements is not a multiple of the block size %d", t, len(dst), tr.block)
	}
	if want := uint64(len(dst)) / tr.block * tr.size; uint64(len(src)) != want {
		return fmt.Errorf("%s: %d bytes for %d elements, want %d", t, len(src), len(dst), want)
	}
	fn(src, dst)
	return nil
}

// HalfToFloat converts an IEEE 754 binary16 value to float32 (exactly:
// every half is a float32), subnormals, infinities and NaN included.
func HalfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: man·2^-24.
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

func f16at(b []byte) float32 { return HalfToFloat(uint16(b[0]) | uint16(b[1])<<8) }

func dequantF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(le32(src[4*i:]))
	}
}

func dequantF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = f16at(src[2*i:])
	}
}

// BF16 is the top half of a float32.
func dequantBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(src[2*i])<<16 | uint32(src[2*i+1])<<24)
	}
}

// Q8_0 block (block_q8_0): d f16, qs [32]int8; x = qs·d.
func dequantQ8_0(src []byte, dst []float32) {
	for b := 0; b < len(dst)/32; b++ {
		blk, y := src[34*b:34*b+34], dst[32*b:32*b+32]
		d := f16at(blk)
		for j := 0; j < 32; j++ {
			y[j] = float32(int8(blk[2+j])) * d
		}
	}
}

// Q4_0 block (block_q4_0): d f16, qs [16]byte; element j is the low nibble
// of qs[j], element j+16 the high nibble; x = (q−8)·d.
func dequantQ4_0(src []byte, dst []float32) {
	for b := 0; b < len(dst)/32; b++ {
		blk, y := src[18*b:18*b+18], dst[32*b:32*b+32]
		d := f16at(blk)
		for j := 0; j < 16; j++ {
			q := blk[2+j]
			y[j] = float32(int(q&15)-8) * d
			y[j+16] = float32(int(q>>4)-8) * d
		}
	}
}

// Q4_1 block (block_q4_1): d f16, m f16, qs [16]byte; nibbles as Q4_0;
// x = q·d + m (the product rounded to float32 before the add).
func dequantQ4_1(src []byte, dst []float32) {
	for b := 0; b < len(dst)/32; b++ {
		blk, y := src[20*b:20*b+20], dst[32*b:32*b+32]
		d, m := f16at(blk), f16at(blk[2:])
		for j := 0; j < 16; j++ {
			q := blk[4+j]
			y[j] = float32(float32(q&15)*d) + m
			y[j+16] = float32(float32(q>>4)*d) + m
		}
	}
}
