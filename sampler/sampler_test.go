package sampler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// toy builds n queries qi, each with one relevant document pi and one mined negative ni; extra
// judgements can be added by the caller.
func toy(n int) (Collection, []Example) {
	c := Collection{Queries: map[string]string{}, Qrels: map[string]map[string]int{}}
	var ex []Example
	for i := range n {
		q, p, neg := fmt.Sprint("q", i), fmt.Sprint("p", i), fmt.Sprint("n", i)
		c.Queries[q] = "query " + q
		c.DocIDs = append(c.DocIDs, p, neg)
		c.DocTexts = append(c.DocTexts, "text "+p, "text "+neg)
		c.Qrels[q] = map[string]int{p: 1}
		ex = append(ex, Example{QueryID: q, PositiveID: p, NegativeIDs: []string{neg}})
	}
	return c, ex
}

// TestEpochsArePermutations: without conflicts, the steps of an epoch deal every example once,
// in the order of PCG(seed, epoch).
func TestEpochsArePermutations(t *testing.T) {
	c, ex := toy(12)
	s, err := New(c, ex, Options{BatchSize: 4, HardNegatives: 1, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	for e := range 3 {
		perm := rand.New(rand.NewPCG(9, uint64(e))).Perm(12)
		var got, want []string
		for step := 3 * e; step < 3*e+3; step++ {
			b, st, err := s.Batch(step)
			if err != nil {
				t.Fatal(err)
			}
			if st != (Stats{Epoch: e, Index: step - 3*e}) || s.Epoch(step) != e {
				t.Fatalf("step %d: stats %+v, epoch %d", step, st, s.Epoch(step))
			}
			got = append(got, b.QueryIDs...)
			// texts resolved and parallel to the ids
			for i, q := range b.QueryIDs {
				k := strings.TrimPrefix(q, "q")
				if b.Queries[i] != "query "+q || b.PositiveIDs[i] != "p"+k || b.Positives[i] != "text p"+k ||
					b.NegativeIDs[i] != "n"+k || b.Negatives[i] != "text n"+k {
					t.Fatalf("step %d row %d: %q %q %q %q %q", step, i, b.Queries[i], b.PositiveIDs[i], b.Positives[i], b.NegativeIDs[i], b.Negatives[i])
				}
			}
		}
		for _, i := range perm {
			want = append(want, ex[i].QueryID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("epoch %d dealt %v, want %v", e, got, want)
		}
	}
}

// TestConflictsAreDeferred: q1's positive p1 is also relevant to q2, so q1 and q2 may never share
// a batch, nor q3 and q4 (q4's negative is relevant to q3); q5 has two examples. An example
// turned away goes to a later batch of the epoch; every example is dealt once per epoch or
// counted as left over.
func TestConflictsAreDeferred(t *testing.T) {
	c, ex := toy(8)
	c.Qrels["q2"]["p1"] = 2
	c.Qrels["q3"]["n4"] = 1
	c.Qrels["q5"]["n0"] = 0 // judged non-relevant: no conflict
	ex = append(ex, Example{QueryID: "q5", PositiveID: "n0", NegativeIDs: []string{"n7"}})
	c.Qrels["q5"]["n0"] = 1
	s, err := New(c, ex, Options{BatchSize: 3, HardNegatives: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s.BatchesPerEpoch() != 3 {
		t.Fatalf("K = %d, want floor(9/3) = 3", s.BatchesPerEpoch())
	}
	var total Stats
	for e := range 100 {
		dealt := map[string]int{}
		var st Stats
		for k := range 3 {
			b, bst, err := s.Batch(3*e + k)
			if err != nil {
				t.Fatal(err)
			}
			if err := ValidateBatch(b, c.Qrels); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(b.QueryIDs, "q1") && slices.Contains(b.QueryIDs, "q2") ||
				slices.Contains(b.QueryIDs, "q3") && slices.Contains(b.QueryIDs, "q4") {
				t.Fatalf("step %d: conflicting queries together: %v", 3*e+k, b.QueryIDs)
			}
			if k == 0 {
				// the epoch's first example always opens its first batch
				perm := rand.New(rand.NewPCG(1, uint64(e))).Perm(9)
				if b.QueryIDs[0] != ex[perm[0]].QueryID || b.PositiveIDs[0] != ex[perm[0]].PositiveID {
					t.Fatalf("epoch %d opens with %s/%s, permutation with %v", e, b.QueryIDs[0], b.PositiveIDs[0], ex[perm[0]])
				}
			}
			for i := range b.QueryIDs {
				dealt[b.QueryIDs[i]+"/"+b.PositiveIDs[i]]++
			}
			st.Repeated += bst.Repeated
			st.LeftOver = bst.LeftOver
			total.DuplicateQueries += bst.DuplicateQueries
			total.FalseNegativesAvoided += bst.FalseNegativesAvoided
		}
		// 9 slots: distinct examples dealt + repeats; distinct + left over = 9 examples
		if len(dealt)+st.Repeated != 9 || len(dealt)+st.LeftOver != 9 {
			t.Fatalf("epoch %d: %d distinct dealt, %d repeated, %d left over", e, len(dealt), st.Repeated, st.LeftOver)
		}
		total.Repeated += st.Repeated
		total.LeftOver += st.LeftOver
	}
	t.Logf("100 epochs: %+v", total)
	if total.DuplicateQueries == 0 || total.FalseNegativesAvoided == 0 {
		t.Fatalf("over 100 epochs: %+v; both kinds of deferral should occur", total)
	}
}

func TestBatchDeterministicFromStep(t *testing.T) {
	c := loadCranfield(t)
	ex, _, err := Mine(c.train, c.ranking, MineOptions{Negatives: 3, Lo: 1, Hi: 30, Strategy: Random, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{BatchSize: 32, HardNegatives: 2, Seed: 42}
	fresh, _ := New(c.collection(), ex, opts)
	b7, st7, err := fresh.Batch(7)
	if err != nil {
		t.Fatal(err)
	}
	used, _ := New(c.collection(), ex, opts)
	for step := range 7 {
		used.Batch(step)
	}
	b7again, st7again, _ := used.Batch(7)
	if !reflect.DeepEqual(b7, b7again) || st7 != st7again {
		t.Fatal("Batch(7) depends on earlier calls")
	}
	if b, _, _ := fresh.Batch(7); !reflect.DeepEqual(b, b7) {
		t.Fatal("Batch(7) differs between two calls")
	}
	other, _ := New(c.collection(), ex, Options{BatchSize: 32, HardNegatives: 2, Seed: 43})
	if b, _, _ := other.Batch(7); reflect.DeepEqual(b.QueryIDs, b7.QueryIDs) {
		t.Fatal("seeds 42 and 43 give the same batch")
	}
	if b6, _, _ := fresh.Batch(6); reflect.DeepEqual(b6.QueryIDs, b7.QueryIDs) {
		t.Fatal("steps 6 and 7 give the same batch")
	}
}

func TestNegativesPerExample(t *testing.T) {
	c, ex := toy(8)
	// example 0 has 4 mined negatives: N = 2 of them are drawn, in mined order
	c.DocIDs = append(c.DocIDs, "x1", "x2", "x3")
	c.DocTexts = append(c.DocTexts, "x1", "x2", "x3")
	ex[0].NegativeIDs = []string{"n0", "x1", "x2", "x3"}
	// relevant to q1: a random fill must never pick it while q1 is in the batch
	c.Qrels["q1"]["x3"] = 1
	s, err := New(c, ex, Options{BatchSize: 4, HardNegatives: 2, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	subsets := map[string]bool{}
	for step := range 200 {
		b, st, err := s.Batch(step)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateBatch(b, c.Qrels); err != nil {
			t.Fatal(err)
		}
		if len(b.NegativeIDs) != 8 || len(b.Negatives) != 8 {
			t.Fatalf("step %d: %d negatives, want B·N = 8", step, len(b.NegativeIDs))
		}
		fills := 0
		for i, q := range b.QueryIDs {
			negs := b.NegativeIDs[2*i : 2*i+2]
			if negs[0] == negs[1] {
				t.Fatalf("step %d: %s has the negative %s twice", step, q, negs[0])
			}
			if q == "q0" {
				if !slices.Contains(ex[0].NegativeIDs, negs[0]) || !slices.Contains(ex[0].NegativeIDs, negs[1]) ||
					slices.Index(ex[0].NegativeIDs, negs[0]) > slices.Index(ex[0].NegativeIDs, negs[1]) {
					t.Fatalf("step %d: q0 negatives %v not 2 of its mined ones in order", step, negs)
				}
				subsets[strings.Join(negs, ",")] = true
				continue
			}
			if negs[0] != "n"+strings.TrimPrefix(q, "q") {
				t.Fatalf("step %d: %s's first negative %s, want its mined one", step, q, negs[0])
			}
			fills++
		}
		if st.RandomNegatives != fills {
			t.Fatalf("step %d: %d random negatives counted, %d filled", step, st.RandomNegatives, fills)
		}
	}
	if len(subsets) != 6 {
		t.Fatalf("q0 used %d of the 6 possible pairs of its 4 negatives", len(subsets))
	}
}

func TestNewErrors(t *testing.T) {
	cases := []struct {
		name   string
		modify func(c *Collection, ex []Example, o *Options)
		want   string
	}{
		{"batch too large", func(c *Collection, ex []Example, o *Options) { o.BatchSize = 5 }, "batch size 5 exceeds the 4 distinct training queries"},
		{"batch 0", func(c *Collection, ex []Example, o *Options) { o.BatchSize = 0 }, "batch size 0"},
		{"negative relevant", func(c *Collection, ex []Example, o *Options) { c.Qrels["q2"]["n2"] = 1 }, `example 2 (query "q2"): negative "n2" is judged relevant`},
		{"positive not relevant", func(c *Collection, ex []Example, o *Options) { c.Qrels["q1"]["p1"] = 0 }, `positive "p1" is not judged relevant`},
		{"unknown doc", func(c *Collection, ex []Example, o *Options) { ex[3].NegativeIDs = []string{"zz"} }, `negative "zz" is not in the corpus`},
		{"unknown query", func(c *Collection, ex []Example, o *Options) { delete(c.Queries, "q0") }, `query "q0" has no text`},
		{"ragged corpus", func(c *Collection, ex []Example, o *Options) { c.DocTexts = c.DocTexts[1:] }, "8 document ids but 7 texts"},
		{"duplicate doc", func(c *Collection, ex []Example, o *Options) { c.DocIDs[1] = "p0" }, `corpus id "p0" appears twice`},
	}
	for _, tc := range cases {
		c, ex := toy(4)
		o := Options{BatchSize: 2, HardNegatives: 1}
		tc.modify(&c, ex, &o)
		if _, err := New(c, ex, o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestValidateBatchCatches(t *testing.T) {
	qrels := map[string]map[string]int{"a": {"pa": 1, "x": 0}, "b": {"pb": 2, "pa": 1}, "c": {"pc": 1}}
	good := Batch{N: 1, QueryIDs: []string{"a", "c"}, PositiveIDs: []string{"pa", "pc"}, NegativeIDs: []string{"x", "pb"}}
	if err := ValidateBatch(good, qrels); err != nil {
		t.Fatalf("good batch: %v", err)
	}
	cases := []struct {
		name string
		b    Batch
		want string
	}{
		{"duplicate query", Batch{N: 0, QueryIDs: []string{"a", "a"}, PositiveIDs: []string{"pa", "pa"}}, `query "a" at rows 0 and 1`},
		{"positive not relevant", Batch{N: 0, QueryIDs: []string{"a"}, PositiveIDs: []string{"x"}}, `positive "x" of query "a" is not judged relevant`},
		{"other positive relevant", Batch{N: 0, QueryIDs: []string{"a", "b"}, PositiveIDs: []string{"pa", "pb"}}, `positive "pa" of query "a" is judged relevant to query "b"`},
		{"other negative relevant", Batch{N: 1, QueryIDs: []string{"b", "c"}, PositiveIDs: []string{"pb", "pc"}, NegativeIDs: []string{"x", "pa"}}, `hard negative "pa" of query "c" is judged relevant to query "b"`},
		{"own negative relevant", Batch{N: 1, QueryIDs: []string{"a"}, PositiveIDs: []string{"pa"}, NegativeIDs: []string{"pa"}}, `hard negative "pa" of query "a" is judged relevant to query "a"`},
		{"ragged", Batch{N: 2, QueryIDs: []string{"a"}, PositiveIDs: []string{"pa"}, NegativeIDs: []string{"x"}}, "1 negatives, want B·N = 1·2"},
		{"empty", Batch{}, "no queries"},
	}
	for _, c := range cases {
		if err := ValidateBatch(c.b, qrels); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}

	// masked: a and b together, pa (a's positive) is relevant to b; candidates are [pa pb x y]
	masked := Batch{N: 1, QueryIDs: []string{"a", "b"}, PositiveIDs: []string{"pa", "pb"}, NegativeIDs: []string{"x", "pa"}}
	want := []float32{
		1, 1, 1, 0, // a: column 3 is pa again (b's hard negative), relevant to a and not its own slot
		0, 1, 1, 0, // b: pa in columns 0 and 3 is judged relevant to b
	}
	if got := FalseNegativeMask(masked, qrels); !slices.Equal(got, want) {
		t.Fatalf("mask %v, want %v", got, want)
	}
	masked.Mask = want
	if err := ValidateBatch(masked, qrels); err != nil {
		t.Fatalf("correctly masked batch: %v", err)
	}
	masked.Mask = []float32{1, 1, 1, 1, 1, 1, 1, 1}
	if err := ValidateBatch(masked, qrels); err == nil || !strings.Contains(err.Error(), "mask[0][3] = 1, want 0") {
		t.Fatalf("all-ones mask over false negatives: %v", err)
	}
}

// TestCISIOverlap: CISI's 37 training queries judge ~45 documents each with much overlap, so
// batches of 32 without false negatives cannot be packed. New says so and names the largest
// batch size that packs; with MaskFalseNegatives the same batches are dealt and the false
// negatives masked.
func TestCISIOverlap(t *testing.T) {
	c, err := readCollection("../datasets/cisi/")
	if err != nil {
		t.Fatal(err)
	}
	ex, _, err := Mine(c.train, c.ranking, MineOptions{Negatives: 1, Lo: 1, Hi: 30, Strategy: Random, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(c.collection(), ex, Options{BatchSize: 16, HardNegatives: 1, Seed: 42})
	if err == nil || !strings.Contains(err.Error(), "the largest batch size that packs epoch 0 is 14;") {
		t.Fatalf("B = 16: %v", err)
	}
	s, err := New(c.collection(), ex, Options{BatchSize: 32, HardNegatives: 1, Seed: 42, MaskFalseNegatives: true})
	if err != nil {
		t.Fatal(err)
	}
	masked := 0
	for step := range 100 {
		b, st, err := s.Batch(step)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateBatch(b, c.train); err != nil {
			t.Fatal(err)
		}
		for i := range b.QueryIDs {
			if b.Mask[i*(32+32)+i] != 1 {
				t.Fatalf("step %d: own positive of row %d masked", step, i)
			}
		}
		if st.FalseNegativesAvoided != 0 {
			t.Fatalf("step %d: %d examples deferred for false negatives in mask mode", step, st.FalseNegativesAvoided)
		}
		masked += st.MaskedFalseNegatives
	}
	t.Logf("CISI, B = 32, 100 batches: %d masked false negatives (of %d candidates)", masked, 100*32*64)
	if masked == 0 {
		t.Fatal("no false negative masked on CISI")
	}
}

// TestCranfield1000Batches deals 1000 batches of the recipe's shape from the real training qrels:
// every one passes ValidateBatch, while plain consecutive windows of the same stream would not.
func TestCranfield1000Batches(t *testing.T) {
	c := loadCranfield(t)
	ex, _, err := Mine(c.train, c.ranking, MineOptions{Negatives: 1, Lo: 1, Hi: 30, Strategy: Random, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	const B = 32
	s, err := New(c.collection(), ex, Options{BatchSize: B, HardNegatives: 1, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	var total Stats
	seen := map[int]bool{}
	K := s.BatchesPerEpoch()
	epochDealt, epochRepeated := map[string]bool{}, 0
	for step := range 1000 {
		b, st, err := s.Batch(step)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateBatch(b, c.train); err != nil {
			t.Fatal(err)
		}
		// per epoch: K·B slots = distinct examples dealt + repeats; E = distinct + left over
		for i := range b.QueryIDs {
			epochDealt[b.QueryIDs[i]+"/"+b.PositiveIDs[i]] = true
		}
		epochRepeated += st.Repeated
		if st.Index == K-1 {
			if len(epochDealt)+epochRepeated != K*B || len(epochDealt)+st.LeftOver != len(ex) {
				t.Fatalf("epoch %d: %d distinct, %d repeated, %d left over; K·B = %d, E = %d", st.Epoch, len(epochDealt), epochRepeated, st.LeftOver, K*B, len(ex))
			}
			epochDealt, epochRepeated = map[string]bool{}, 0
		}
		total.Repeated += st.Repeated
		if st.Index == 0 {
			total.LeftOver += st.LeftOver
		}
		total.DuplicateQueries += st.DuplicateQueries
		total.FalseNegativesAvoided += st.FalseNegativesAvoided
		total.RandomNegatives += st.RandomNegatives
		for i := range b.QueryIDs {
			seen[slices.IndexFunc(ex, func(e Example) bool { return e.QueryID == b.QueryIDs[i] && e.PositiveID == b.PositiveIDs[i] })] = true
		}
	}
	// naive windows: 32 consecutive examples of the epoch permutation, unfiltered
	naiveBad := 0
	for step := range 1000 {
		e := step * B / len(ex)
		perm := rand.New(rand.NewPCG(42, uint64(e))).Perm(len(ex))
		start := step * B % len(ex)
		if start+B > len(ex) {
			continue
		}
		var nb Batch
		nb.N = 1
		for _, i := range perm[start : start+B] {
			nb.QueryIDs = append(nb.QueryIDs, ex[i].QueryID)
			nb.PositiveIDs = append(nb.PositiveIDs, ex[i].PositiveID)
			nb.NegativeIDs = append(nb.NegativeIDs, ex[i].NegativeIDs...)
		}
		if ValidateBatch(nb, c.train) != nil {
			naiveBad++
		}
	}
	t.Logf("1000 batches (%d epochs of %d): %d repeated, %d left over; turned away %d duplicate queries, %d false negatives; %d random fills; %d of %d examples dealt; naive windows failing validation: %d",
		1000/s.BatchesPerEpoch(), s.BatchesPerEpoch(), total.Repeated, total.LeftOver, total.DuplicateQueries, total.FalseNegativesAvoided, total.RandomNegatives, len(seen), len(ex), naiveBad)
	if naiveBad < 900 || total.FalseNegativesAvoided == 0 || total.DuplicateQueries == 0 {
		t.Fatalf("naive windows failing: %d; skips %+v: the filtering went untested", naiveBad, total)
	}
	if total.RandomNegatives != 0 {
		t.Fatalf("%d random fills with no shortfall", total.RandomNegatives)
	}
	if len(seen) < len(ex)*9/10 {
		t.Fatalf("only %d of %d examples dealt in 1000 batches (~39 epochs)", len(seen), len(ex))
	}
}

// A collection whose texts are read through DocText deals the batches of the same texts held
// in DocTexts, random fills included; with neither, New refuses it.
func TestDocTextDealsTheSameBatches(t *testing.T) {
	c := loadCranfield(t)
	ex, _, err := Mine(c.train, c.ranking, MineOptions{Negatives: 1, Lo: 1, Hi: 30, Strategy: Random, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{BatchSize: 32, HardNegatives: 3, Seed: 42} // 3 > the 1 mined: random fills
	held, err := New(c.collection(), ex, opts)
	if err != nil {
		t.Fatal(err)
	}
	onDisk := c.collection()
	texts := onDisk.DocTexts
	reads := 0
	onDisk.DocTexts, onDisk.DocText = nil, func(i int) string { reads++; return texts[i] }
	read, err := New(onDisk, ex, opts)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 20 {
		a, sa, err := held.Batch(step)
		if err != nil {
			t.Fatal(err)
		}
		b, sb, err := read.Batch(step)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) || sa != sb || sa.RandomNegatives == 0 {
			t.Fatalf("step %d: DocText batch differs (random fills %d)", step, sa.RandomNegatives)
		}
	}
	if reads != 20*32*4 {
		t.Errorf("DocText read %d texts, want %d (B·(1+N) a step)", reads, 20*32*4)
	}
	onDisk.DocText = nil
	if _, err := New(onDisk, ex, opts); err == nil || !strings.Contains(err.Error(), "texts") {
		t.Errorf("New without DocTexts and DocText: %v", err)
	}
}
