package ragjoint

import (
	"math"
	"slices"
	"testing"

	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/gardentest"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragreader"
)

// TestRAGTaskVariants runs one joint step of every objective, candidate mass and candidate
// source on untrained models: the loss is finite and positive, the query tower gets a
// gradient, and with update_reader = false the reader's parameters are not trained.
func TestRAGTaskVariants(t *testing.T) {
	tok := gardentest.Tokenizer(t, ragreader.CtxOpen, ragreader.CtxClose)
	f, _ := ragreader.NewFormat(tok, 32)
	texts := []string{"Ada Besa lives in Kelso . Ada Besa grows fig . Ada Besa keeps dog .",
		"Kai Ligeku lives in Larkhill . Kai Ligeku grows fig .", "Kai Ligeku walked rabbit with Ada Besa .",
		"Ada Besa lives in Larkhill .", "Kai Ligeku grows fig . Kai Ligeku keeps dog ."}
	ids := []string{"g0", "g1", "n0", "g2", "g3"}
	m, err := model.NewBiEncoder(model.EncoderConfig{Encoder: model.EncoderBow, Vocab: tok.VocabSize(), Hidden: 8}, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := model.NewReader(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 8, Layers: 1,
		Heads: 2, FFN: 16, MaxPosition: 32}, 2)
	if err != nil {
		t.Fatal(err)
	}
	bm25 := index.NewBM25(ids, texts, index.DefaultBM25Params())
	x, err := NewIndex(m, tok, ids, texts, bm25, true, 0.1, 16)
	if err != nil {
		t.Fatal(err)
	}
	qs := []Question{{Query: "where does Ada Besa live ?", Prompt: "where does Ada Besa live ? Ada Besa lives in", Answer: f.Answer("Kelso")},
		{Query: "what does Kai Ligeku grow ?", Prompt: "what does Kai Ligeku grow ? Kai Ligeku grows", Answer: f.Answer("fig")}}
	sim := losses.Cosine
	for _, c := range []struct {
		objective, mass, source string
		update                  bool
	}{
		{"sequence", "renormalize", "dense", true}, {"token", "renormalize", "dense", true},
		{"sequence", "full", "dense", true}, {"sequence", "renormalize", "bm25+dense", false},
	} {
		name := c.objective + "/" + c.mass + "/" + c.source
		o := TaskOptions{B: 2, K: 3, Objective: c.objective, Mass: c.mass, Source: c.source, BM25Depth: 4, Similarity: sim, UpdateReader: c.update}
		task, err := NewTask(m, r, tok, f, x, qs, o, func(int) []int { return []int{0, 1} })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		loss, n, err := task.Step(0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !(loss > 0) || math.IsInf(loss, 0) || n != 2 {
			t.Errorf("%s: loss %g over %d questions", name, loss, n)
		}
		nQuery := len(m.Query.Params())
		if got, want := len(task.Params()), nQuery+len(r.Params()); c.update && got != want || !c.update && got != nQuery {
			t.Errorf("%s: %d trained parameters (update_reader %t)", name, got, c.update)
		}
		var norm float64
		for _, p := range task.Params()[:nQuery] {
			for _, g := range p.Grad {
				norm += float64(g) * float64(g)
			}
		}
		if norm == 0 {
			t.Errorf("%s: the query tower got no gradient", name)
		}
		task.AfterUpdate()
		task.Close()
	}
	if _, err := NewTask(m, r, tok, f, x, qs, TaskOptions{B: 2, K: 3, Objective: "token", Mass: "full", Source: "dense", Similarity: sim}, nil); err == nil {
		t.Error("token objective with full candidate mass accepted")
	}
}

func TestRAGCandidates(t *testing.T) {
	tok := gardentest.Tokenizer(t, ragreader.CtxOpen, ragreader.CtxClose)
	m, _ := model.NewBiEncoder(model.EncoderConfig{Encoder: model.EncoderBow, Vocab: tok.VocabSize(), Hidden: 8}, false, 1)
	texts := []string{"Ada Besa lives in Kelso .", "Kai Ligeku grows fig .", "Ada Besa keeps dog .", "Kai Ligeku keeps dog ."}
	ids := []string{"a", "b", "c", "d"}
	x, err := NewIndex(m, tok, ids, texts, index.NewBM25(ids, texts, index.DefaultBM25Params()), false, 1, 16)
	if err != nil {
		t.Fatal(err)
	}
	q := []string{"Kai Ligeku"}
	qv, _ := x.EncodeQueries(m, tok, q)
	dense := x.candidates(qv, q, 2, "dense", 0)
	want := x.Flat.Search(qv, 2)
	if len(dense[0]) != 2 || ids[dense[0][0]] != want[0].DocID || ids[dense[0][1]] != want[1].DocID {
		t.Errorf("dense candidates %v, flat search %v", dense, want)
	}
	// bm25+dense: BM25's hits (the two Kai Ligeku passages) reordered by the dense score.
	hybrid := x.candidates(qv, q, 2, "bm25+dense", 2)
	got := []string{ids[hybrid[0][0]], ids[hybrid[0][1]]}
	slices.Sort(got)
	if !slices.Equal(got, []string{"b", "d"}) {
		t.Errorf("bm25+dense candidates %v, want b and d", got)
	}
	sb, sd := index.DotInOrder(qv, x.Vecs[1*x.Dim:2*x.Dim]), index.DotInOrder(qv, x.Vecs[3*x.Dim:4*x.Dim])
	if (sb >= sd) != (hybrid[0][0] == 1) {
		t.Errorf("bm25+dense order %v ignores dense scores %g (b), %g (d)", hybrid[0], sb, sd)
	}
	// logZ is the log-sum-exp of every passage's score.
	var sum float64
	for i := range ids {
		sum += math.Exp(float64(index.DotInOrder(qv, x.Vecs[i*x.Dim:(i+1)*x.Dim])))
	}
	if z := x.logZ(qv); math.Abs(z-math.Log(sum)) > 1e-9 {
		t.Errorf("logZ %g, want %g", z, math.Log(sum))
	}
}
