package biencoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/index/ann"
	"github.com/ragtrain/ragtrain/index/shard"
)

// clustered returns n normalised dim-dimensional vectors around 20 Gaussian centres, with ids
// "p0".."p<n-1>".
func clustered(n, dim int, seed uint64) ([]string, []float32) {
	r := rand.New(rand.NewPCG(seed, 3))
	centres := make([]float32, 20*dim)
	for i := range centres {
		centres[i] = float32(r.NormFloat64())
	}
	ids := make([]string, n)
	vecs := make([]float32, n*dim)
	for i := range n {
		ids[i] = fmt.Sprintf("p%d", i)
		c := r.IntN(20)
		for j := range dim {
			vecs[i*dim+j] = centres[c*dim+j] + 0.5*float32(r.NormFloat64())
		}
	}
	NormalizeRows(vecs, dim)
	return ids, vecs
}

// writeShards writes ids and vecs as shards of size passages (the last one shorter) of dtype
// dt into a temporary directory, commits them and opens the version.
func writeShards(t *testing.T, ids []string, vecs []float32, dim, size int, dt shard.DType) *shard.Reader {
	t.Helper()
	dir := t.TempDir()
	meta := shard.Meta{ModelHash: "test", Version: "1", Dim: dim, DType: dt}
	k := 0
	for lo := 0; lo < len(ids); lo += size {
		hi := min(lo+size, len(ids))
		if _, err := shard.WriteShard(dir, meta, k, ids[lo:hi], vecs[lo*dim:hi*dim]); err != nil {
			t.Fatal(err)
		}
		k++
	}
	if _, err := shard.CommitManifest(dir, meta, k); err != nil {
		t.Fatal(err)
	}
	r, err := shard.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func sameHits(a, b [][]index.Hit) bool {
	return slices.EqualFunc(a, b, func(x, y []index.Hit) bool {
		return slices.EqualFunc(x, y, func(h, g index.Hit) bool {
			return h.DocID == g.DocID && math.Float64bits(h.Score) == math.Float64bits(g.Score)
		})
	})
}

// LoadShards over three float32 shards (400, 400, 200 passages) gives back the ids in order
// and the vectors bit for bit, so the HNSW graph built from them ranks exactly as ann.New over
// the vectors loaded directly: the same hits and scores to the bit at depths 10 and 100, with 1
// worker or 2 (the graph does not depend on them). Over float16 shards the vectors are those
// the shard search decodes: index.Flat over them gives the shard search's hits.
func TestLoadShardsHNSW(t *testing.T) {
	const n, dim = 1000, 16
	ids, vecs := clustered(n, dim, 7)
	r := writeShards(t, ids, vecs, dim, 400, shard.Float32)
	gotIDs, got, err := LoadShards(r)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gotIDs, ids) || !slices.EqualFunc(got, vecs, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
		t.Fatal("LoadShards: ids or vectors differ from those written")
	}
	p := ann.Params{M: 8, EfConstruction: 40, EfSearch: 16, Seed: 42, Workers: 1}
	direct, err := ann.New(ids, vecs, dim, 1, p)
	if err != nil {
		t.Fatal(err)
	}
	p.Workers = 2
	fromShards, err := newIndex(gotIDs, got, dim, SearchOptions{ANNThreshold: n, ANN: p})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fromShards.(*ann.HNSW); !ok {
		t.Fatalf("ANNThreshold %d over %d passages built %T, want *ann.HNSW", n, n, fromShards)
	}
	qs := vecs[:50*dim]
	for _, k := range []int{10, 100} {
		a, b := direct.SearchBatch(qs, k), fromShards.SearchBatch(qs, k)
		if !sameHits(a, b) {
			t.Errorf("depth %d: the HNSW graph from the shards ranks differently from ann.New over the vectors", k)
		}
		if len(a) != 50 || len(a[0]) != k {
			t.Fatalf("depth %d: %d rankings of %d hits", k, len(a), len(a[0]))
		}
	}

	r16 := writeShards(t, ids, vecs, dim, 400, shard.Float16)
	ids16, v16, err := LoadShards(r16)
	if err != nil {
		t.Fatal(err)
	}
	maxErr := 0.0
	for i := range vecs {
		maxErr = max(maxErr, math.Abs(float64(v16[i]-vecs[i])))
	}
	if !slices.Equal(ids16, ids) || maxErr == 0 || maxErr > 1.0/1024 {
		t.Fatalf("float16 shards: ids equal %v, largest difference from float32 %g (want in (0, 2^-10])", slices.Equal(ids16, ids), maxErr)
	}
	flat, err := index.NewFlat(ids16, v16, dim)
	if err != nil {
		t.Fatal(err)
	}
	want, err := r16.SearchBatch(qs, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !sameHits(flat.SearchBatch(qs, 10), want) {
		t.Error("float16: index.Flat over LoadShards' vectors ranks differently from the shard search")
	}
}

// NewShardSearcher with ANNThreshold at or below the store's 300 Cranfield passages builds
// its HNSW graph from the 3 shards it wrote and ranks exactly as NewSearcher with the same
// options over the texts (fixed padding: the same vectors, so the same graph), and says so in
// Describe; above 300 it stays exact shard by shard.
func TestShardSearcherHNSW(t *testing.T) {
	tok := bertTokenizer(t)
	store, ids, texts, m := cranfieldStore(t, tok, 300)
	opt := SearchOptions{Len: Lengths{Query: 32, Passage: 128}, Cosine: true, ANNThreshold: 300,
		ANN: ann.Params{M: 8, EfConstruction: 40, EfSearch: 16, Seed: 3}}
	loaded, err := NewSearcher(m, tok, opt, ids, texts)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	meta := shard.Meta{ModelHash: "test", Version: "1", DType: shard.Float32}
	sharded, err := NewShardSearcher(m, tok, opt, store, t.TempDir(), meta, 128)
	if err != nil {
		t.Fatal(err)
	}
	defer sharded.Close()
	if loaded.HNSW() == nil || sharded.HNSW() == nil {
		t.Fatal("ANNThreshold 300 over 300 passages: no HNSW graph")
	}
	if d := sharded.Describe(); !strings.HasPrefix(d, "HNSW over 300 passages (M 8, efConstruction 40, efSearch 16) from 3 shards, built in ") || !strings.HasSuffix(d, " MiB") {
		t.Errorf("Describe() = %q", d)
	}
	queries := texts[:40]
	for _, k := range []int{10, 100} {
		a, err := loaded.Search(queries, k)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sharded.Search(queries, k)
		if err != nil {
			t.Fatal(err)
		}
		if !sameHits(a, b) || len(b[0]) != k {
			t.Errorf("depth %d: the shard searcher's HNSW ranks differently from NewSearcher's", k)
		}
	}

	opt.ANNThreshold = 301
	exact, err := NewShardSearcher(m, tok, opt, store, t.TempDir(), meta, 128)
	if err != nil {
		t.Fatal(err)
	}
	defer exact.Close()
	if exact.HNSW() != nil || exact.Describe() != "exact search over 300 passages in shards" {
		t.Errorf("ANNThreshold 301 over 300 passages: %s", exact.Describe())
	}
}

// A searcher built in memory writes its vectors as shards (WriteShards) that OpenShardSearcher
// serves with the same hits, exact (Flat's rows) and through an HNSW graph rebuilt from them;
// the manifest holds the N passages of H = 32 in shards of 128; a shard searcher refuses.
func TestWriteShardsServesTheSameHits(t *testing.T) {
	tok := bertTokenizer(t)
	store, ids, texts, m := cranfieldStore(t, tok, 300)
	for _, threshold := range []int{0, 300} {
		opt := SearchOptions{Len: Lengths{Query: 32, Passage: 128}, Cosine: true, ANNThreshold: threshold,
			ANN: ann.Params{M: 8, EfConstruction: 40, EfSearch: 16, Seed: 3}}
		loaded, err := NewSearcher(m, tok, opt, ids, texts)
		if err != nil {
			t.Fatal(err)
		}
		defer loaded.Close()
		dir := t.TempDir()
		man, err := loaded.WriteShards(dir, shard.Meta{ModelHash: "test", Version: "1", DType: shard.Float32}, 128)
		if err != nil {
			t.Fatal(err)
		}
		if man.Count != 300 || man.Dim != 32 || len(man.Shards) != 3 {
			t.Fatalf("threshold %d: manifest of %d passages of %d in %d shards, want 300 of 32 in 3", threshold, man.Count, man.Dim, len(man.Shards))
		}
		served, err := OpenShardSearcher(m, tok, opt, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer served.Close()
		if (served.HNSW() != nil) != (threshold > 0) || (loaded.HNSW() != nil) != (threshold > 0) {
			t.Fatalf("threshold %d: HNSW graphs %v (loaded) and %v (served)", threshold, loaded.HNSW() != nil, served.HNSW() != nil)
		}
		a, err := loaded.Search(texts[:40], 100)
		if err != nil {
			t.Fatal(err)
		}
		b, err := served.Search(texts[:40], 100)
		if err != nil {
			t.Fatal(err)
		}
		if !sameHits(a, b) || len(b[0]) != 100 {
			t.Errorf("threshold %d: the written shards rank differently from the searcher that wrote them", threshold)
		}
	}
	opt := SearchOptions{Len: Lengths{Query: 32, Passage: 128}, Cosine: true}
	sharded, err := NewShardSearcher(m, tok, opt, store, t.TempDir(), shard.Meta{ModelHash: "test", Version: "1", DType: shard.Float32}, 128)
	if err != nil {
		t.Fatal(err)
	}
	defer sharded.Close()
	if _, err := sharded.WriteShards(t.TempDir(), shard.Meta{ModelHash: "test", Version: "1", DType: shard.Float32}, 128); err == nil || !strings.Contains(err.Error(), "in shards already") {
		t.Errorf("WriteShards of a shard searcher: err = %v", err)
	}
}
