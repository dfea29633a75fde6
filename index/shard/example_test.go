package shard_test

import (
	"fmt"
	"os"

	"github.com/ragtrain/ragtrain/index/shard"
)

// Two workers write one shard each (in any order, in any process), then one process commits
// the version and a reader searches it.
func Example() {
	dir, _ := os.MkdirTemp("", "shards")
	defer os.RemoveAll(dir)
	meta := shard.Meta{ModelHash: "sha256-of-checkpoint", Version: "step-1200", Dim: 2, DType: shard.Float32}

	// Worker 1, then worker 0.
	shard.WriteShard(dir, meta, 1, []string{"c"}, []float32{0, 1})
	shard.WriteShard(dir, meta, 0, []string{"a", "b"}, []float32{1, 0, 0.6, 0.8})

	m, err := shard.CommitManifest(dir, meta, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Version, m.Count, "passages in", len(m.Shards), "shards")

	r, err := shard.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	hits, _ := r.Search([]float32{0, 1}, 2)
	fmt.Println(hits)
	// Output:
	// step-1200 3 passages in 2 shards
	// [{c 1} {b 0.800000011920929}]
}
