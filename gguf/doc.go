// Package gguf reads GGUF files, the single-file model format of ggml and
// llama.cpp, and dequantizes their tensors into float32.
//
// Format (ggml docs/gguf.md, versions 2 and 3; all integers little-endian):
//
//	magic "GGUF" | version uint32 | tensor_count uint64 | kv_count uint64
//	kv_count × (key string | value_type uint32 | value)
//	tensor_count × (name string | n_dims uint32 | dims [n_dims]uint64 | type uint32 | offset uint64)
//	padding to general.alignment (default 32) | tensor data
//
// A string is a uint64 byte length and the bytes (UTF-8, no terminator); an
// array value is an element type uint32, a uint64 count and the elements.
// Tensor offsets are relative to the start of the data section and are
// multiples of the alignment. Dims are in ggml order: Dims[0] is the fastest
// varying (the row length), so a ggml tensor with Dims [cols, rows] is the
// row-major (PyTorch) matrix [rows, cols]; Float32 returns that reversed shape.
//
// Metadata values keep their Go types: uint8, int8, uint16, int16, uint32,
// int32, uint64, int64, float32, float64, bool, string; an array of strings
// is a []string, any other array a []any of those types.
//
// Dequantization (File.Float32) covers F32, F16, BF16 and the ggml block
// formats Q8_0, Q4_0 and Q4_1 (ggml src/ggml-common.h, ggml-quants.c), each a
// block of 32 weights:
//
//	Q8_0: d f16, q [32]int8                 x[j] = q[j]·d                  (34 bytes)
//	Q4_0: d f16, qs [16]byte                x[j] = (qs[j]&15 − 8)·d,       (18 bytes)
//	                                        x[j+16] = (qs[j]>>4 − 8)·d
//	Q4_1: d f16, m f16, qs [16]byte         x[j] = (qs[j]&15)·d + m,       (20 bytes)
//	                                        x[j+16] = (qs[j]>>4)·d + m
//
// Each product is rounded to float32 before the add, as ggml's C and the
// Python gguf package's numpy code compute it, so values are bit-identical.
//
// Hostile input: Open checks every count, string length, array length,
// dimension product and offset against the bytes the file really has (and
// against uint64 overflow) before it allocates, so a short file that claims
// 2^40 tensors or a 2^60-byte string fails at once with one error line that
// names the file and the field or tensor. Only regular files are read, and
// never past the size os.Stat reported.
//
// Not for: writing quantized data (Write stores F32, F16, BF16 and raw
// blocks as given), K-quants and i-quants (their sizes are known, so such
// files open, but Float32 refuses them), big-endian files, GGUF v1.
package gguf
