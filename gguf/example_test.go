package gguf_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragtrain/ragtrain/gguf"
)

// A Q4_1 block (d = 0.5, m = -1, nibbles 0..15 low and 15..0 high) written,
// opened and dequantized: element j is (j)·0.5 − 1, element j+16 is
// (15−j)·0.5 − 1.
func Example() {
	dir, _ := os.MkdirTemp("", "gguf-example")
	defer os.RemoveAll(dir)
	block := []byte{0x00, 0x38, 0x00, 0xBC} // d = 0.5, m = -1 (float16, little-endian)
	for j := 0; j < 16; j++ {
		block = append(block, byte(j|(15-j)<<4))
	}
	path := filepath.Join(dir, "tiny.gguf")
	err := gguf.Write(path,
		[]gguf.KV{{Key: "general.architecture", Value: "llama"}, {Key: "llama.block_count", Value: uint32(1)}},
		[]gguf.TensorData{{Name: "w", Dims: []uint64{32, 1}, Type: gguf.Q4_1, Data: block}})
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := gguf.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	arch, _ := f.String("general.architecture")
	blocks, _ := f.Uint("llama.block_count")
	x, shape, err := f.Float32("w")
	fmt.Println(arch, blocks, f.Tensors[0].Type, shape, err)
	fmt.Println(x[0], x[1], x[15], x[16], x[31])
	// Output:
	// llama 1 Q4_1 [1 32] <nil>
	// -1 -0.5 6.5 6.5 -1
}
