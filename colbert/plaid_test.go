package colbert

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCentroidCount(t *testing.T) {
	// 2^floor(log2(16 sqrt(n))): n = 100 -> 160 -> 128 (capped at n = 100); 900k -> 15179 -> 8192
	for _, c := range [][2]int{{0, 1}, {1, 1}, {4, 4}, {100, 100}, {1000, 256}, {900000, 8192}, {1 << 20, 16384}} {
		if got := CentroidCount(c[0]); got != c[1] {
			t.Errorf("CentroidCount(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

// unitTokens returns n random unit vectors of width d per passage, counts[i] for passage i.
func unitTokens(counts []int, d int, seed uint64) *Tokens {
	r := rand.New(rand.NewPCG(seed, 1))
	tk := &Tokens{Dim: d, Offs: []int{0}}
	for _, c := range counts {
		for range c {
			v := make([]float32, d)
			for j := range v {
				v[j] = float32(r.NormFloat64())
			}
			normalize(v)
			tk.Vecs = append(tk.Vecs, v...)
		}
		tk.Offs = append(tk.Offs, tk.Offs[len(tk.Offs)-1]+c)
	}
	return tk
}

// A hand-built index: two centroids on the axes, 2-bit buckets; every stored piece is the
// computed one.
func TestPlaidHandCase(t *testing.T) {
	s := float32(1 / math.Sqrt(2))
	docs := &Tokens{Dim: 4, Offs: []int{0, 2, 3}, Vecs: []float32{
		1, 0, 0, 0, // p0 t0: centroid e1
		s, s, 0, 0, // p0 t1: nearer e1 (tie in dot product -> lower id) ... kmeans decides
		0, 1, 0, 0, // p1 t0: centroid e2
	}}
	p := &Plaid{IDs: []string{"a", "b"}, Dim: 4, NBits: 2, Offs: docs.Offs, Centroids: []float32{1, 0, 0, 0, 0, 1, 0, 0}}
	p.Codes = assign(docs.Vecs, p.Centroids, 4, false)
	if !slices.Equal(p.Codes, []uint32{0, 0, 1}) { // (s, s) scores s with both: the lower id
		t.Fatalf("codes %v", p.Codes)
	}
	p.Cutoffs = []float32{-0.1, 0, 0.1}
	p.Weights = []float32{-0.3, -0.05, 0.05, 0.3}
	if got := []int{p.bucket(-0.2), p.bucket(-0.1), p.bucket(-0.05), p.bucket(0), p.bucket(0.05), p.bucket(0.1), p.bucket(0.7)}; !slices.Equal(got, []int{0, 0, 1, 1, 2, 2, 3}) {
		t.Fatalf("buckets %v (torch.bucketize: the cut-offs strictly below)", got)
	}
	res := make([]byte, 1)
	// residual of t1: (s-1, s, 0, 0) = (-0.29, 0.71, 0, 0): buckets 0, 3, 1, 1 -> 00 11 01 01
	p.pack([]float32{s - 1, s, 0, 0}, res)
	if res[0] != 0b00110101 {
		t.Fatalf("packed %08b, want 00110101", res[0])
	}
	p.Residuals = append([]byte{0b01010101}, res[0], 0b01010101)
	v := make([]float32, 4)
	p.Decompress(1, v)
	want := []float64{1 - 0.3, 0.3, -0.05, -0.05}
	n := math.Sqrt(want[0]*want[0] + want[1]*want[1] + 2*0.05*0.05)
	for j := range v {
		if math.Abs(float64(v[j])-want[j]/n) > 1e-6 {
			t.Fatalf("decompressed %v, want %v / %v", v, want, n)
		}
	}
	p.buildIVF()
	if !slices.Equal(p.IVFOffs, []int{0, 1, 2}) || !slices.Equal(p.IVF, []int32{0, 1}) {
		t.Fatalf("inverted lists %v %v", p.IVFOffs, p.IVF)
	}
	// a query on e2: ncells 1 probes centroid 1 only -> passage b alone
	hits := p.Search([]float32{0, 1, 0, 0}, 10, SearchParams{NCells: 1, CentroidScoreThreshold: 0.5, NDocs: 8})
	if len(hits) != 1 || hits[0].DocID != "b" {
		t.Fatalf("hits %v, want b only", hits)
	}
	// ncells 2 reaches both; b's decompressed token is e2 + buckets 1 everywhere
	hits = p.Search([]float32{0, 1, 0, 0}, 10, SearchParams{NCells: 2, CentroidScoreThreshold: 0.5, NDocs: 8})
	if len(hits) != 2 || hits[0].DocID != "b" || hits[1].DocID != "a" {
		t.Fatalf("hits %v, want b then a", hits)
	}
	d := make([]float32, 4)
	p.Decompress(2, d)
	if math.Abs(hits[0].Score-float64(d[1])) > 1e-6 {
		t.Fatalf("b's score %v, want its decompressed token's %v", hits[0].Score, d[1])
	}
}

// Built from random unit tokens: deterministic (two builds are equal), every token's code is
// its nearest centroid, buckets are quantiles (each holds about a quarter of the residual
// values), decompression is close to the original, the search with every cell probed and no
// pruning equals exact MaxSim over the decompressed vectors, and Save/OpenPlaid round-trips
// and refuses a changed byte.
func TestPlaidBuild(t *testing.T) {
	counts := make([]int, 60)
	r := rand.New(rand.NewPCG(9, 9))
	for i := range counts {
		counts[i] = 3 + r.IntN(10)
	}
	docs := unitTokens(counts, 16, 4)
	ids := make([]string, len(counts))
	for i := range ids {
		ids[i] = string(rune('A'+i%26)) + string(rune('a'+i/26))
	}
	// 8 centroids (not CentroidCount's 256 for these ~450 tokens, most of them then alone in
	// their cell with a zero residual) so that the buckets' quantiles are over real residuals
	o := PlaidOptions{NBits: 2, KMeansIters: 4, Seed: 3, Centroids: 8}
	p, err := BuildPlaid(ids, docs, o)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := BuildPlaid(ids, docs, o)
	if !slices.Equal(p.Centroids, p2.Centroids) || !slices.Equal(p.Residuals, p2.Residuals) || !slices.Equal(p.Codes, p2.Codes) {
		t.Fatal("two builds differ")
	}
	n := len(docs.Vecs) / 16
	if p.C() != 8 {
		t.Fatalf("%d centroids for %d tokens", p.C(), n)
	}
	var counts4 [4]int
	dec := make([]float32, 16)
	var cosSum float64
	for tk := range n {
		x := docs.Vecs[tk*16 : (tk+1)*16]
		best, bi := float32(math.Inf(-1)), 0
		for k := range p.C() {
			if v := dotf(x, p.Centroids[k*16:(k+1)*16]); v > best {
				best, bi = v, k
			}
		}
		if int(p.Codes[tk]) != bi {
			t.Fatalf("token %d coded %d, nearest centroid %d", tk, p.Codes[tk], bi)
		}
		for j := range 16 {
			counts4[p.bucket(x[j]-p.Centroids[bi*16+j])]++
		}
		p.Decompress(tk, dec)
		cosSum += float64(dotf(x, dec))
	}
	for b, c := range counts4 {
		if f := float64(c) / float64(n*16); f < 0.2 || f > 0.3 {
			t.Errorf("bucket %d holds %.3f of the residual values, want about 1/4", b, f)
		}
	}
	if m := cosSum / float64(n); m < 0.9 {
		t.Errorf("mean cosine of decompressed and original tokens %.3f, want >= 0.9", m)
	}
	q := unitTokens([]int{8}, 16, 77).Vecs
	all := p.Search(q, 100, SearchParams{NCells: p.C(), CentroidScoreThreshold: math.Inf(-1), NDocs: 4 * len(ids)})
	decoded := &Tokens{Dim: 16, Offs: p.Offs, Vecs: make([]float32, len(docs.Vecs))}
	for tk := range n {
		p.Decompress(tk, decoded.Vecs[tk*16:(tk+1)*16])
	}
	x, _ := NewExact(ids, decoded)
	want := x.Search(q, 100)
	if len(all) != len(want) {
		t.Fatalf("%d hits, exact over the decompressed vectors %d", len(all), len(want))
	}
	for i := range all {
		if all[i].DocID != want[i].DocID || math.Abs(all[i].Score-want[i].Score) > 1e-5 {
			t.Fatalf("hit %d: %v, exact over the decompressed vectors %v", i, all[i], want[i])
		}
	}
	dir := t.TempDir()
	if err := p.Save(dir, "model-x"); err != nil {
		t.Fatal(err)
	}
	back, man, err := OpenPlaid(dir)
	if err != nil {
		t.Fatal(err)
	}
	if man.ModelHash != "model-x" || man.Passages != 60 || man.Tokens != n || man.Bytes != p.Stats().TotalBytes {
		t.Fatalf("manifest %+v", man)
	}
	if !slices.Equal(back.IDs, p.IDs) || !slices.Equal(back.Residuals, p.Residuals) || !slices.Equal(back.IVF, p.IVF) || !slices.Equal(back.Offs, p.Offs) {
		t.Fatal("the index read back differs")
	}
	if got := back.Search(q, 10, SearchParams{NCells: 2, CentroidScoreThreshold: 0.3, NDocs: 16}); !slices.Equal(got, p.Search(q, 10, SearchParams{NCells: 2, CentroidScoreThreshold: 0.3, NDocs: 16})) {
		t.Fatal("the index read back searches differently")
	}
	path := filepath.Join(dir, PlaidFile)
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 1
	os.WriteFile(path, b, 0o644)
	if _, _, err := OpenPlaid(dir); err == nil {
		t.Fatal("a changed byte was not noticed")
	}
	// bytes per passage: 4 + 16*2/8 = 8 per token, 4 per passage
	if st := p.Stats(); math.Abs(st.BytesPerPassage-float64(n*8+60*4)/60) > 1e-9 {
		t.Fatalf("bytes per passage %v", st.BytesPerPassage)
	}
}

func dotf(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
