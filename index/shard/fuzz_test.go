package shard

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ragtrain/ragtrain/index"
)

// FuzzShardFile decodes arbitrary bytes as a shard file, as Open and a search do (header,
// ids, scales, every row, scored against a query): a file whose header passes decodes and
// scores every row without panicking, and yields as many ids as its header says.
func FuzzShardFile(f *testing.F) {
	dir := f.TempDir()
	ids, vecs := corpus(1, 5, 3, false)
	for _, dt := range []DType{Float32, Float16, Int8PerVector, Int8PerDim} {
		e, err := WriteShard(dir, Meta{ModelHash: "m", Version: "1", Dim: 3, DType: dt}, 0, ids, vecs)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, e.File))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b, int64(len(b)))
		if err != nil {
			return
		}
		v, err := newView(b, h)
		if err != nil {
			return
		}
		if int64(len(v.ids)) != h.count {
			t.Fatalf("%d ids, header says %d", len(v.ids), h.count)
		}
		if h.dim > 1<<12 {
			return // a valid but wide file: scoring it tests nothing more
		}
		q := make([]float32, h.dim)
		for i := range q {
			q[i] = 1
		}
		tops := []*index.TopK{index.NewTopK(3)}
		searchBlock(v, q, 0, 1, 3, make([]float32, passageBlock*int(h.dim)), tops)
		if got := tops[0].Len(); got != min(3, int(h.count)) {
			t.Fatalf("%d hits from %d rows", got, h.count)
		}
	})
}
