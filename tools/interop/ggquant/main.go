// Command ggquant is the Go side of the GGUF dequantization check
// (tools/interop/gguf_dequant.py): for every tensor of a GGUF file whose
// type package gguf dequantizes, it prints one JSON line
//
//	{"name": ..., "type": "Q4_1", "shape": [rows, cols], "sha256": ..., "sum": ...}
//
// where sha256 is over the dequantized float32 values, little-endian, in
// row-major order (so equal hashes mean bit-identical values) and sum is
// their float64 sum.
//
//	go run ./tools/interop/ggquant -gguf FILE
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
)

func main() {
	path := flag.String("gguf", "", "GGUF file")
	flag.Parse()
	cli.Check("ggquant", run(*path))
}

func run(path string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for _, t := range f.Tensors {
		x, shape, err := f.Float32(t.Name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ggquant: skipped:", err)
			continue
		}
		sum := 0.0
		for _, v := range x {
			sum += float64(v)
		}
		h := sha256.Sum256(gguf.Float32Bytes(x))
		if err := enc.Encode(map[string]any{
			"name": t.Name, "type": t.Type.String(), "shape": shape, "sha256": hex.EncodeToString(h[:]), "sum": sum,
		}); err != nil {
			return err
		}
	}
	return nil
}
