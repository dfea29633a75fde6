package shard

import (
	"testing"

	"github.com/ragtrain/ragtrain/index"
)

// benchData is 50,000 passages of dim 128 in 5 float32 shards, and 64 queries.
func benchData(b *testing.B, dt DType) (*Reader, *index.Flat, []float32) {
	const n, dim = 50000, 128
	ids, vecs := corpus(11, n, dim, false)
	dir := b.TempDir()
	if _, err := WriteAll(dir, Meta{ModelHash: "m", Version: "1", Dim: dim, DType: dt}, ids, vecs, 10000); err != nil {
		b.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	f, err := index.NewFlat(ids, vecs, dim)
	if err != nil {
		b.Fatal(err)
	}
	_, qs := corpus(12, 64, dim, false)
	return r, f, qs
}

// BenchmarkReaderSearchBatch: 64 queries, k = 100, over the shards (mapped per call).
func BenchmarkReaderSearchBatch(b *testing.B) {
	for _, dt := range []DType{Float32, Float16, Int8PerVector} {
		b.Run(dt.String(), func(b *testing.B) {
			r, _, qs := benchData(b, dt)
			b.ResetTimer()
			for b.Loop() {
				if _, err := r.SearchBatch(qs, 100); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFlatSearchBatch is the same search over index.Flat in memory.
func BenchmarkFlatSearchBatch(b *testing.B) {
	_, f, qs := benchData(b, Float32)
	b.ResetTimer()
	for b.Loop() {
		f.SearchBatch(qs, 100)
	}
}
