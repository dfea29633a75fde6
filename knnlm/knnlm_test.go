package knnlm

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ragtrain/ragtrain/index/ann"
)

// Hand-computed: distances 1, 2, 3 with values 5, 7, 5 weigh e^-1, e^-2, e^-3 (T = 1), so
// p(5) = (e^-1 + e^-3) / (e^-1 + e^-2 + e^-3) = 0.755271528945; at T = 2 the weights are
// e^-0.5, e^-1, e^-1.5 and p(5) = 0.692804114282.
func TestKNNProbsHandComputed(t *testing.T) {
	nb := []Neighbor{{Row: 0, Value: 5, Dist: 1}, {Row: 1, Value: 7, Dist: 2}, {Row: 2, Value: 5, Dist: 3}}
	for _, c := range []struct{ T, p5, p7 float64 }{{1, 0.7552715289452023, 0.24472847105479767}, {2, 0.6928041142815016, 0.3071958857184984}} {
		p := KNNProbs(nb, c.T)
		if len(p) != 2 || math.Abs(p[5]-c.p5) > 1e-12 || math.Abs(p[7]-c.p7) > 1e-12 {
			t.Errorf("T = %g: p = %v, want 5: %.12f, 7: %.12f", c.T, p, c.p5, c.p7)
		}
	}
	// Far distances do not underflow: only the differences count.
	far := []Neighbor{{Value: 1, Dist: 10001}, {Value: 2, Dist: 10002}, {Value: 1, Dist: 10003}}
	if p := KNNProbs(far, 1); math.Abs(p[1]-0.7552715289452023) > 1e-9 {
		t.Errorf("distances offset by 10000: p(1) = %v", p[1])
	}
}

// Duplicates of a value sum: three keys at the same distance, two valued 3, give p(3) = 2/3.
func TestKNNProbsDuplicatesSum(t *testing.T) {
	nb := []Neighbor{{Row: 0, Value: 3, Dist: 4}, {Row: 1, Value: 3, Dist: 4}, {Row: 2, Value: 4, Dist: 4}}
	p := KNNProbs(nb, 1)
	if math.Abs(p[3]-2.0/3) > 1e-15 || math.Abs(p[4]-1.0/3) > 1e-15 {
		t.Errorf("p = %v, want 3: 2/3, 4: 1/3", p)
	}
	if p := KNNProbs(nil, 1); len(p) != 0 {
		t.Errorf("no neighbours: %v", p)
	}
}

// Hand-computed: λ = 0.25, p_kNN = 0.5, p_LM = 0.2: 0.25·0.5 + 0.75·0.2 = 0.275; a token no
// neighbour names: 0.75·0.2 = 0.15; λ = 0 is the LM, λ = 1 the kNN.
func TestMixHandComputed(t *testing.T) {
	l := math.Log(0.2)
	for _, c := range []struct{ pk, lambda, want float64 }{
		{0.5, 0.25, math.Log(0.275)}, {0, 0.25, math.Log(0.15)}, {0.5, 0, l}, {0.5, 1, math.Log(0.5)}, {0, 1, math.Inf(-1)},
	} {
		if got := Mix(c.pk, l, c.lambda); math.Abs(got-c.want) > 1e-12 && got != c.want {
			t.Errorf("Mix(%g, log 0.2, %g) = %v, want %v", c.pk, c.lambda, got, c.want)
		}
	}
	if Mix(0.5, l, 0) != l {
		t.Error("λ = 0 must return log p_LM exactly")
	}
}

// The interpolated distribution sums to one over the vocabulary and equals the hand mixture.
func TestInterpolateNormalised(t *testing.T) {
	logits := []float64{1, 2, 0.5, -1, 3}
	lm := make([]float64, len(logits))
	LogSoftmax(lm, logits)
	pk := map[int]float64{1: 0.25, 3: 0.75}
	out := make([]float64, len(lm))
	if err := Interpolate(out, lm, pk, 0.3); err != nil {
		t.Fatal(err)
	}
	var s float64
	for v, x := range out {
		s += math.Exp(x)
		want := 0.3*pk[v] + 0.7*math.Exp(lm[v])
		if math.Abs(math.Exp(x)-want) > 1e-12 {
			t.Errorf("p(%d) = %v, want %v", v, math.Exp(x), want)
		}
	}
	if math.Abs(s-1) > 1e-12 {
		t.Errorf("sum %v", s)
	}
	if err := Interpolate(out, lm, map[int]float64{5: 1}, 0.3); err == nil {
		t.Error("a value outside the vocabulary was accepted")
	}
	if err := Interpolate(out, lm, pk, 1.5); err == nil {
		t.Error("lambda 1.5 was accepted")
	}
}

// Hand-computed: keys (0,0) (1,0) (0,2) (3,3), query (1,1): squared distances 2, 1, 2, 8; the
// three nearest are rows 1, 0, 2 (0 before 2 on the tie).
func TestSearchHandComputed(t *testing.T) {
	for _, prec := range []string{Float32, Float16} {
		s, err := NewStore(2, prec)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range [][]float32{{0, 0}, {1, 0}, {0, 2}, {3, 3}} {
			if err := s.Add(k, 10+i); err != nil {
				t.Fatal(err)
			}
		}
		got := s.Search([]float32{1, 1}, 3)[0]
		want := []Neighbor{{1, 11, 1}, {0, 10, 2}, {2, 12, 2}}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", prec, got, want)
		}
	}
}

func TestFloat16Keys(t *testing.T) {
	s, _ := NewStore(1, Float16)
	if err := s.Add([]float32{0.1}, 0); err != nil {
		t.Fatal(err)
	}
	k := make([]float32, 1)
	s.Key(0, k)
	if k[0] != 0.0999755859375 { // numpy.float16(0.1)
		t.Errorf("stored key %v", k[0])
	}
	d := s.Search([]float32{0}, 1)[0][0].Dist
	if d != 0.0999755859375*0.0999755859375 {
		t.Errorf("distance %v uses the unrounded key", d)
	}
	f, _ := NewStore(1, Float32)
	_ = f.Add([]float32{0.1}, 0)
	if s.Bytes() != 2+8 || f.Bytes() != 4+8 {
		t.Errorf("bytes %d and %d", s.Bytes(), f.Bytes())
	}
	if err := s.Add([]float32{float32(math.NaN())}, 0); err == nil {
		t.Error("NaN key accepted")
	}
	if err := s.Add([]float32{1, 2}, 0); err == nil {
		t.Error("wrong key length accepted")
	}
	if _, err := NewStore(4, "bf16"); err == nil {
		t.Error("unknown precision accepted")
	}
}

func randomStore(t *testing.T, n, dim int, seed uint64) (*Store, []float32) {
	r := rand.New(rand.NewPCG(seed, 1))
	s, _ := NewStore(dim, Float32)
	all := make([]float32, 0, n*dim)
	for i := 0; i < n; i++ {
		k := make([]float32, dim)
		for j := range k {
			k[j] = float32(r.NormFloat64())
		}
		all = append(all, k...)
		if err := s.Add(k, r.IntN(50)); err != nil {
			t.Fatal(err)
		}
	}
	return s, all
}

// The blocked search (more rows than one block) equals a plain loop over every key.
func TestSearchMatchesBruteForce(t *testing.T) {
	const n, dim, k = 5000, 8, 7
	s, keys := randomStore(t, n, dim, 3)
	q := []float32{0.5, -1, 0.25, 2, 0, 1, -0.5, 0.75, 1, 1, 1, 1, 1, 1, 1, 1}
	res := s.Search(q, k)
	for b := 0; b < 2; b++ {
		var all []Neighbor
		for i := 0; i < n; i++ {
			var d float64
			for j := 0; j < dim; j++ {
				x := float64(q[b*dim+j] - keys[i*dim+j])
				d += x * x
			}
			all = append(all, Neighbor{Row: i, Value: int(s.Values[i]), Dist: float32(d)})
		}
		slices.SortFunc(all, compareNeighbors)
		for j := 0; j < k; j++ {
			if res[b][j].Row != all[j].Row || math.Abs(float64(res[b][j].Dist-all[j].Dist)) > 1e-4 {
				t.Errorf("query %d neighbour %d: %v, want %v", b, j, res[b][j], all[j])
			}
		}
	}
}

// Two stores searched as one give the same neighbours as one store holding both.
func TestConcat(t *testing.T) {
	a, ka := randomStore(t, 300, 4, 5)
	b, kb := randomStore(t, 200, 4, 6)
	both, _ := NewStore(4, Float32)
	for i := 0; i < 300; i++ {
		_ = both.Add(ka[i*4:(i+1)*4], int(a.Values[i]))
	}
	for i := 0; i < 200; i++ {
		_ = both.Add(kb[i*4:(i+1)*4], int(b.Values[i]))
	}
	q := []float32{0.1, 0.2, -0.3, 0.4}
	got, want := Concat{a, b}.Search(q, 9)[0], both.Search(q, 9)[0]
	if !slices.Equal(got, want) {
		t.Errorf("concat %v\nwant %v", got, want)
	}
	if (Concat{a, b}).Len() != 500 || (Concat{a, b}).Bytes() != both.Bytes() {
		t.Error("concat sizes")
	}
}

// The HNSW over augmented keys finds most of the exact neighbours, with their exact distances.
func TestHNSWRecall(t *testing.T) {
	s, _ := randomStore(t, 2000, 8, 7)
	h, err := NewHNSW(s, ann.Params{M: 16, EfConstruction: 100, EfSearch: 64, Seed: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	q := make([]float32, 50*8)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	exact, approx := s.Search(q, 10), h.Search(q, 10)
	found := 0
	for b := range exact {
		dist := map[int]float32{}
		for _, n := range exact[b] {
			dist[n.Row] = n.Dist
		}
		for _, n := range approx[b] {
			if d, ok := dist[n.Row]; ok {
				found++
				if math.Abs(float64(d-n.Dist)) > 1e-3 {
					t.Errorf("row %d: distance %v, exact %v", n.Row, n.Dist, d)
				}
			}
		}
	}
	if recall := float64(found) / 500; recall < 0.9 {
		t.Errorf("HNSW recall@10 %.3f, want >= 0.9", recall)
	} else {
		t.Logf("HNSW recall@10 %.3f", recall)
	}
}
