package model

import (
	"math"
	"slices"
	"testing"

	"gorgonia.org/gorgonia"
)

// tokenStates runs the reader's inference graph on one batch and returns the [B*L,H] states.
func tokenStates(t *testing.T, r *Reader, ids []int, mask []float32, B, L int) []float32 {
	t.Helper()
	g := gorgonia.NewGraph()
	in := NewInputs(g, B, L, "x")
	out, err := r.Tower.BuildTokens(NewBinder(g), in, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Let(ids, mask, nil); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(out.Value().Data().([]float32))
}

// TestGrowVocab: growing a reader's vocabulary from 11 to 14 ids keeps every old embedding
// row and every other parameter, sets the new rows to the mean of the old ones, and leaves the
// token states unchanged; next-token log-probabilities of old tokens all shift by the same
// amount at a position, and each new token's log-probability is that of an old token a plus
// mean_j log p_old(j) - log p_old(a) (its logit is the mean of the old logits). Greedy decoding
// is unchanged.
func TestGrowVocab(t *testing.T) {
	cfg := tinyReaderConfig()
	r, err := NewReader(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	const V, V2, H = 11, 14, 8
	g, err := GrowVocab(r, V2, 5)
	if err != nil {
		t.Fatal(err)
	}
	if g.Vocab() != V2 || r.Vocab() != V {
		t.Fatalf("vocabularies %d (grown) and %d (original), want %d and %d", g.Vocab(), r.Vocab(), V2, V)
	}
	for _, p := range r.Params() {
		q := g.Param(p.Name)
		old, grown := p.Value.Data().([]float32), q.Value.Data().([]float32)
		if !slices.Equal(grown[:len(old)], old) {
			t.Errorf("%s: old values changed", p.Name)
		}
		if p.Name != "reader.embeddings.word" {
			if len(grown) != len(old) {
				t.Errorf("%s: %d values, want %d", p.Name, len(grown), len(old))
			}
			continue
		}
		for j := range H {
			var m float64
			for v := range V {
				m += float64(old[v*H+j])
			}
			m /= V
			for v := V; v < V2; v++ {
				if d := math.Abs(float64(grown[v*H+j]) - m); d > 1e-7 {
					t.Errorf("new row %d, column %d = %g, want the mean %g", v, j, grown[v*H+j], m)
				}
			}
		}
	}

	const B, L = 2, 6
	ids := []int{2, 5, 6, 7, 1, 0, 3, 8, 10, 0, 0, 0}
	mask := []float32{1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0}
	if a, b := tokenStates(t, r, ids, mask, B, L), tokenStates(t, g, ids, mask, B, L); !slices.Equal(a, b) {
		t.Errorf("token states changed by growing the vocabulary")
	}

	prompts := [][]int{{2, 5, 6}, {3, 8, 10}, {4}}
	oldIDs := make([]int, V)
	for i := range oldIDs {
		oldIDs[i] = i
	}
	allIDs := append(slices.Clone(oldIDs), V, V+1, V+2)
	lpOld := nextLogProbs(t, r, prompts, oldIDs)
	lpNew := nextLogProbs(t, g, prompts, allIDs)
	for i := range prompts {
		shift := lpNew[i][0] - lpOld[i][0]
		if shift >= 0 {
			t.Errorf("prompt %d: old log-probabilities shifted by %g, want < 0", i, shift)
		}
		var meanOld, total float64
		for j := range V {
			if d := lpNew[i][j] - lpOld[i][j] - shift; math.Abs(d) > 1e-9 {
				t.Errorf("prompt %d, token %d: shift %g differs from token 0's %g", i, j, lpNew[i][j]-lpOld[i][j], shift)
			}
			meanOld += lpOld[i][j] / V
		}
		for j := range V2 {
			total += math.Exp(lpNew[i][j])
		}
		if math.Abs(total-1) > 1e-9 {
			t.Errorf("prompt %d: grown distribution sums to %g", i, total)
		}
		for k := V; k < V2; k++ {
			want := lpNew[i][4] + meanOld - lpOld[i][4]
			if math.Abs(lpNew[i][k]-want) > 1e-9 {
				t.Errorf("prompt %d: new token %d has log-probability %g, want %g", i, k, lpNew[i][k], want)
			}
		}
	}

	gr := func(rd *Reader) []Generation {
		rr, err := NewReaderRunner(rd, 2, L)
		if err != nil {
			t.Fatal(err)
		}
		defer rr.Close()
		out, err := rr.Greedy(prompts, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := gr(r), gr(g)
	for i := range a {
		if !slices.Equal(a[i].Tokens, b[i].Tokens) {
			t.Errorf("prompt %d: greedy %v after growing, %v before", i, b[i].Tokens, a[i].Tokens)
		}
	}

	if _, err := GrowVocab(r, V-1, 0); err == nil {
		t.Error("shrinking the vocabulary: no error")
	}
}

func nextLogProbs(t *testing.T, r *Reader, prompts [][]int, ids []int) [][]float64 {
	t.Helper()
	n, err := NewNextTokenRunner(r, 2, 6)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	lp, err := n.LogProbs(prompts, ids)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.LogProbs(prompts, []int{r.Vocab()}); err == nil {
		t.Errorf("id %d of a %d-token vocabulary: no error", r.Vocab(), r.Vocab())
	}
	return lp
}
