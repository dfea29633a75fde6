package model

import (
	"bytes"
	"testing"

	"gorgonia.org/tensor"
)

// WriteParams writes "name shape\n" and the little-endian float32 bits of each parameter, in
// order: the bytes the ColBERT model hash and the teacher cache key have always hashed.
func TestWriteParams(t *testing.T) {
	ps := []*Param{
		{Name: "b", Value: tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, -2}))},
		{Name: "a.w", Value: tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]float32{0.5}))},
	}
	var got bytes.Buffer
	WriteParams(&got, ps)
	want := append([]byte("b (2)\n"), 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0)
	want = append(append(want, "a.w (1, 1)\n"...), 0x00, 0x00, 0x00, 0x3f)
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("WriteParams wrote %q, want %q", got.Bytes(), want)
	}
}
