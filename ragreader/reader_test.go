package ragreader

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/internal/gardentest"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

func TestReaderFormat(t *testing.T) {
	tok := gardentest.Tokenizer(t, CtxOpen, CtxClose)
	f, err := NewFormat(tok, 24)
	if err != nil {
		t.Fatal(err)
	}
	q := "where does Ada Besa live ?"
	entry := "Ada Besa lives in Kelso . Ada Besa grows fig ."
	p, cut, err := f.Prompt(entry, q, 2)
	if err != nil {
		t.Fatal(err)
	}
	qIDs, eIDs := tok.Encode(q), tok.Encode(entry)
	want := append(append(append([]int{tok.CLSID(), f.CtxOpen}, eIDs...), f.CtxEnd), qIDs...)
	if cut || !slices.Equal(p, want) {
		t.Errorf("prompt %v (cut %t), want %v", p, cut, want)
	}
	if got := tok.Decode(p); !strings.Contains(got, "<ctx> ada besa lives in kelso") || !strings.HasSuffix(got, "live?") {
		t.Errorf("decoded prompt %q", got)
	}
	// A long passage is cut from its end so that the question and 4 answer tokens still fit.
	long := strings.Repeat("Ada Besa grows fig . ", 5)
	p, cut, err = f.Prompt(long, q, 4)
	if err != nil || !cut || len(p) != 24-4 || !slices.Equal(p[len(p)-len(qIDs):], qIDs) || p[len(p)-len(qIDs)-1] != f.CtxEnd {
		t.Errorf("long passage: %v cut %t err %v", p, cut, err)
	}
	// Closed book: an empty context.
	p, _, _ = f.Prompt("", q, 2)
	if !slices.Equal(p[:3], []int{tok.CLSID(), f.CtxOpen, f.CtxEnd}) {
		t.Errorf("closed-book prompt starts %v", p[:3])
	}
	if _, _, err := f.Prompt("", strings.Repeat("where does Ada live ? ", 6), 2); err == nil || !strings.Contains(err.Error(), "too long for reader.max_length = 24") {
		t.Errorf("question longer than L: %v", err)
	}
	if a := f.Answer("Kelso"); !slices.Equal(a, append(tok.Encode("kelso"), tok.SEPID())) {
		t.Errorf("answer ids %v", a)
	}
	if _, err := NewFormat(tokenizeWithout(t), 24); err == nil {
		t.Error("a tokenizer without <ctx> accepted")
	}
}

func tokenizeWithout(t *testing.T) *tokenize.Tokenizer {
	tok, err := tokenize.Train([]string{"a b c"}, tokenize.TrainOptions{VocabSize: 50, Lowercase: true})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestPackDocuments(t *testing.T) {
	tok := gardentest.Tokenizer(t, CtxOpen, CtxClose)
	f, _ := NewFormat(tok, 16)
	docs := []string{"Ada Besa grows fig .", "Kai Ligeku lives in Larkhill .", "Ada Besa keeps dog .",
		"Ada Besa lives in Kelso . Ada Besa grows fig . Ada Besa keeps dog ."}
	rows, cut := f.PackDocuments(docs)
	if cut != 1 {
		t.Errorf("%d documents cut, want 1 (the last is longer than L-2 = 14 tokens)", cut)
	}
	var got []string
	for _, r := range rows {
		if len(r) > 16 || r[0] != tok.CLSID() || r[len(r)-1] != tok.SEPID() {
			t.Errorf("row %v", r)
		}
		got = append(got, tok.Decode(r))
	}
	// Whole documents, in order, as many per row as fit.
	// Whole documents in order, as many per row as fit, each closed by [SEP]; the long one cut.
	want := []string{"ada besa grows fig. kai ligeku lives in larkhill.", "ada besa keeps dog.",
		"ada besa lives in kelso. ada besa grows fig. ada besa keeps"}
	if !slices.Equal(got, want) {
		t.Errorf("rows\n%q\nwant\n%q", got, want)
	}
	for i, seps := range []int{2, 1, 1} {
		n := 0
		for _, id := range rows[min(i, len(rows)-1)] {
			if id == tok.SEPID() {
				n++
			}
		}
		if n != seps {
			t.Errorf("row %d holds %d [SEP], want %d", i, n, seps)
		}
	}
}

func TestCycle(t *testing.T) {
	const n, B = 7, 3
	seen := map[int]int{}
	for step := 0; step < 7; step++ { // 21 draws = 3 epochs
		b := Cycle(n, B, step, 5)
		if len(b) != B {
			t.Fatalf("step %d: %v", step, b)
		}
		for _, i := range b {
			seen[i]++
		}
	}
	for i := 0; i < n; i++ {
		if seen[i] != 3 {
			t.Errorf("item %d drawn %d times in 3 epochs, want 3", i, seen[i])
		}
	}
	if !slices.Equal(Cycle(n, B, 4, 5), Cycle(n, B, 4, 5)) || slices.Equal(Cycle(n, B, 0, 5), Cycle(n, B, 0, 6)) {
		t.Error("cycle is not a function of (step, seed)")
	}
}

// TestReaderLossMaskedToAnswer: the fine-tuning loss counts the answer tokens only. Changing the
// target of a context position (passage, question) changes neither the loss nor a gradient;
// changing an answer token's target changes the loss.
func TestReaderLossMaskedToAnswer(t *testing.T) {
	tok := gardentest.Tokenizer(t, CtxOpen, CtxClose)
	f, _ := NewFormat(tok, 24)
	r, err := model.NewReader(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 16, Layers: 1,
		Heads: 2, FFN: 32, MaxPosition: 24}, 3)
	if err != nil {
		t.Fatal(err)
	}
	prompt, _, err := f.Prompt("Ada Besa lives in Kelso .", "where does Ada Besa live ?", 2)
	if err != nil {
		t.Fatal(err)
	}
	base := QARow(prompt, f.Answer("Kelso"))
	for i, k := range base.Keep {
		if want := i >= len(prompt)-1 && i < len(base.IDs)-1; k != want {
			t.Errorf("keep[%d] = %t, want %t (prompt of %d tokens)", i, k, want, len(prompt))
		}
	}
	var rows []LMRow
	task, err := NewTask(r, 2, f.L, f.L-1, 1, 2, func(int) ([]LMRow, error) { return rows, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	replay := TextRow(tok.Encode("ada besa grows fig ."), GroupReplay)
	lossOf := func(row LMRow) (float64, []float32) {
		rows = []LMRow{row, replay}
		loss, n, err := task.Step(0)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%d examples, want 1 (the replay row is not one)", n)
		}
		g := slices.Clone(task.Params()[0].Grad)
		task.AfterUpdate()
		return loss, g
	}
	l0, g0 := lossOf(base)
	ctxRow := base
	ctxRow.Target = slices.Clone(base.Target)
	ctxRow.Target[3] = (ctxRow.Target[3] + 1) % tok.VocabSize() // a passage token's next-token target
	ctxRow.Target[len(prompt)-2] = tok.SEPID()                  // the question's
	l1, g1 := lossOf(ctxRow)
	if l1 != l0 || !slices.Equal(g1, g0) {
		t.Errorf("changing context targets moved the loss %g -> %g (or its gradient)", l0, l1)
	}
	ansRow := base
	ansRow.Target = slices.Clone(base.Target)
	ansRow.Target[len(prompt)-1] = (ansRow.Target[len(prompt)-1] + 1) % tok.VocabSize()
	if l2, _ := lossOf(ansRow); l2 == l0 {
		t.Errorf("changing the answer target left the loss at %g", l0)
	}
	// Without the replay row the loss is the answer's mean negative log-likelihood alone, so
	// it drops by the replay group's share.
	rows = []LMRow{base}
	lAlone, _, err := task.Step(0)
	if err != nil {
		t.Fatal(err)
	}
	task.AfterUpdate()
	if !(lAlone < l0) {
		t.Errorf("loss without the replay row %g, with %g", lAlone, l0)
	}
}

// TestRelevanceLossWeight: with selfrag.relevance_loss_weight w > 0 the IsRel decision (the
// first target of a relevanceFirst row) leaves the answer's mean and gets its own mean NLL
// times w, so the loss is linear in w: L(3) - L(1) = 2 (L(2) - L(1)) > 0. With w = 0 it is an
// ordinary target: the loss equals that of the row without the flag.
func TestRelevanceLossWeight(t *testing.T) {
	tok := gardentest.Tokenizer(t, CtxOpen, CtxClose)
	f, _ := NewFormat(tok, 24)
	r, err := model.NewReader(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 16, Layers: 1,
		Heads: 2, FFN: 32, MaxPosition: 24}, 3)
	if err != nil {
		t.Fatal(err)
	}
	prompt, _, err := f.Prompt("Ada Besa lives in Kelso .", "where does Ada Besa live ?", 2)
	if err != nil {
		t.Fatal(err)
	}
	row := QARow(prompt, append([]int{tok.CLSID()}, f.Answer("Kelso")...)) // [CLS] stands in for [Relevant]
	flagged := row
	flagged.RelevanceFirst = true
	lossAt := func(w float64, rw LMRow) float64 {
		task, err := NewWeightedTask(r, 1, f.L, f.L-1, 1, 2, w, func(int) ([]LMRow, error) { return []LMRow{rw}, nil })
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		loss, _, err := task.Step(0)
		if err != nil {
			t.Fatal(err)
		}
		return loss
	}
	if a, b := lossAt(0, flagged), lossAt(0, row); a != b {
		t.Errorf("weight 0: loss %g with the flag, %g without", a, b)
	}
	l1, l2, l3 := lossAt(1, flagged), lossAt(2, flagged), lossAt(3, flagged)
	if rel := l2 - l1; !(rel > 0) || math.Abs((l3-l1)-2*rel) > 1e-5*l3 {
		t.Errorf("losses at weights 1, 2, 3: %g %g %g, want linear in the weight with a positive slope", l1, l2, l3)
	}
	if l1 == lossAt(0, flagged) {
		t.Errorf("weight 1 left the loss at the unweighted %g", l1)
	}
}
