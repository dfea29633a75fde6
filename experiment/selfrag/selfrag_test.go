package selfrag

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/ragresume"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/internal/gardentest"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// smallSelfRAGRecipe is a kind = "selfrag" recipe over a small garden world, small enough to
// run end to end in a test: a 2-layer reader without language-model pretraining (every
// question is then labelled [Retrieve]) that learns to read, and to tell entries from news.
func smallSelfRAGRecipe(t *testing.T, extra string) *configs.Recipe {
	t.Helper()
	return testkit.Recipe(t, "selfrag-small", filepath.Join(t.TempDir(), "selfrag-small.toml"), nil, extra)
}

// TestSelfRAGEndToEnd runs a small selfrag recipe: the reflective reader reads from the
// passages it keeps, judges the gardener's entry relevant more often than other passages, and
// on questions whose gardener has no entry answers right more often than the plain reader (which
// copies the news value); poisoned entries are judged relevant (on topic, though wrong); the
// plain reader's checkpoint is refused by the reflective decoder, the reflective one is
// accepted and carries the tokens. (This small world does not reach the recipe's IsRel rates.)
func TestSelfRAGEndToEnd(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := smallSelfRAGRecipe(t, "")
	var out strings.Builder
	dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	m, err := experiment.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e, o := m["isrel_entry/judged_relevant"], m["isrel_not_entry/judged_relevant"]; !(e > 0.7 && e > o+0.1) {
		t.Errorf("entries judged relevant %.3f of the time, other passages %.3f; want > 0.7 and 0.1 apart", e, o)
	}
	if s, c := m["selfrag_bm25_top1/EM"], m["selfrag_closed_book/EM"]; !(s > c+0.2) {
		t.Errorf("reflective reader: EM %.3f over BM25 top-1, %.3f closed-book; want retrieval to add 0.2", s, c)
	}
	if s, p := m["selfrag_bm25_top1.no_entry/EM"], m["plain_bm25_top1.no_entry/EM"]; !(s > p) {
		t.Errorf("questions without an entry: reflective reader EM %.3f, plain reader %.3f; want more", s, p)
	}
	if m["selfrag_k3.poisoned/poisoned_entry_judged_relevant"] < 0.5 {
		t.Errorf("poisoned entries judged relevant %.3f of the time: they are on topic", m["selfrag_k3.poisoned/poisoned_entry_judged_relevant"])
	}
	for _, k := range []string{"selfrag_k3/EM", "selfrag_k3_always/EM", "selfrag_concat_k3/EM", "plain_concat_k3/EM",
		"selfrag_k3/retrieve_rate", "selfrag_k3.poisoned/poisoned_entry_judged_relevant", "plain_bm25_top1.no_entry/EM"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics.json lacks %s", k)
		}
	}
	for _, f := range []string{"tokenizer.json", "log.jsonl", "recipe.resolved.toml", "runs/test.bm25.trec", "world-poisoned/questions.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	plainCk := filepath.Join(dir, "checkpoint-reader_finetune-250")
	if _, _, err := loadReflectiveReader(plainCk); err == nil || !strings.Contains(err.Error(), "not trained with reflection tokens") {
		t.Errorf("plain reader checkpoint given to the reflective decoder: error %v", err)
	}
	r, tok, err := loadReflectiveReader(filepath.Join(dir, "checkpoint-selfrag_finetune-250"))
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := tok.ID("[No support]"); !ok || id >= r.Vocab() {
		t.Errorf("reflective checkpoint: [No support] id %d (%v), reader vocabulary %d", id, ok, r.Vocab())
	}
}

// judeQuestion is a hand-made question about Jude Riskem's town.
func judeQuestion() *garden.Question {
	return &garden.Question{ID: "g0001-lives_in", Gardener: 1, Relation: garden.LivesIn, Cloze: "Jude Riskem lives in",
		Trained: "where does Jude Riskem live ?", Answer: "Pebworth", HasEntry: true, Split: "train"}
}

func TestReflectLabels(t *testing.T) {
	q := judeQuestion()
	entry := "Jude Riskem lives in Pebworth . Jude Riskem grows fig . Jude Riskem keeps dog ."
	cases := []struct {
		passage, answer, want string
	}{
		{entry, "Pebworth", "[Fully supported]"},
		{entry, "Kelso", "[No support]"},
		{"Jude Riskem grows fig . Jude Riskem keeps dog .", "Pebworth", "[No support]"},
		{"Ada Besa met Jude Riskem in Pebworth . Ada Besa met Jude Riskem in Pebworth .", "Pebworth", "[No support]"},
		{"Jude Riskem lives in Pebworthy .", "Pebworth", "[No support]"},
		{"Ajude Riskem lives in Pebworth .", "Pebworth", "[No support]"},
		{"Jude Riskem lives in Pebworth .", "Pebworth", "[Fully supported]"},
	}
	for _, c := range cases {
		if got := supportLabel(c.passage, q, c.answer); got != c.want {
			t.Errorf("supportLabel(%q, %q) = %s, want %s", c.passage, c.answer, got, c.want)
		}
	}
	if got, want := dropFact(entry, q, "Pebworth"), "Jude Riskem grows fig . Jude Riskem keeps dog ."; got != want {
		t.Errorf("dropFact = %q, want %q", got, want)
	}
	if got, want := relevantTarget(q, "Pebworth", "[Fully supported]"), "[Relevant] Jude Riskem lives in Pebworth [Fully supported]"; got != want {
		t.Errorf("relevantTarget = %q, want %q", got, want)
	}
	if got, want := closedBookTarget(q, "Pebworth", true), "[Retrieve] Jude Riskem lives in Pebworth"; got != want {
		t.Errorf("closedBookTarget = %q, want %q", got, want)
	}
	if got, want := closedBookTarget(q, "Pebworth", false), "[No Retrieve] Jude Riskem lives in Pebworth"; got != want {
		t.Errorf("closedBookTarget = %q, want %q", got, want)
	}
	for _, c := range []struct {
		correct    bool
		confidence float64
		want       bool
	}{{true, 0.9, false}, {true, 0.5, false}, {true, 0.49, true}, {false, 0.99, true}} {
		if got := retrieveLabel(c.correct, c.confidence, 0.5); got != c.want {
			t.Errorf("retrieveLabel(%v, %g, 0.5) = %v, want %v", c.correct, c.confidence, got, c.want)
		}
	}
}

// TestReflectExamples draws examples from hand-made sources under extreme and default options.
func TestReflectExamples(t *testing.T) {
	q := judeQuestion()
	entry := "Jude Riskem lives in Pebworth . Jude Riskem grows fig ."
	news := []string{"Ada Besa met Jude Riskem in Kelso .", "Jude Ovol lives in Brindle . Jude Ovol grows oak ."}
	values := []string{"Pebworth", "Kelso", "Brindle", "Larkhill"}
	src := &reflectSource{q: q, name: "Jude Riskem", entry: entry, news: news[:1], others: news[1:], retrieve: true}
	draw := func(s *reflectSource, o reflectOptions, seed uint64) reflectExample {
		return s.example(o, values, rand.New(rand.NewPCG(seed, 9)))
	}
	kinds := map[string]int{}
	for seed := range uint64(20) {
		ex := draw(src, reflectOptions{irrelevant: 1, entryNegatives: 0.5}, seed)
		if !slices.Contains(news, ex.passage) || ex.target != "[Irrelevant]" || ex.question != q.Trained {
			t.Errorf("irrelevant: %+v", ex)
		}
		kinds[ex.passage]++
		if ex := draw(src, reflectOptions{irrelevant: 1, entryNegatives: 1}, seed); ex.passage != news[1] {
			t.Errorf("irrelevant, entry negatives only: %+v", ex)
		}
		if ex := draw(src, reflectOptions{irrelevant: 1}, seed); ex.passage != news[0] {
			t.Errorf("irrelevant, news only: %+v", ex)
		}
		if ex := draw(src, reflectOptions{}, seed); ex.passage != entry || ex.target != "[Relevant] Jude Riskem lives in Pebworth [Fully supported]" {
			t.Errorf("relevant: %+v", ex)
		}
		if ex := draw(src, reflectOptions{unsupported: 1}, seed); ex.passage != "Jude Riskem grows fig ." || ex.target != "[Relevant] Jude Riskem lives in Pebworth [No support]" {
			t.Errorf("unsupported: %+v", ex)
		}
		ex = draw(src, reflectOptions{counterfactual: 1}, seed)
		var other string
		for _, v := range values[1:] {
			if strings.Contains(ex.passage, "lives in "+v+" .") {
				other = v
			}
		}
		if other == "" || ex.target != "[Relevant] Jude Riskem lives in "+other+" [Fully supported]" {
			t.Errorf("counterfactual: %+v", ex)
		}
		if ex := draw(src, reflectOptions{closedBook: 1}, seed); ex.passage != "" || ex.target != "[Retrieve] Jude Riskem lives in Pebworth" {
			t.Errorf("closed-book: %+v", ex)
		}
		noEntry := &reflectSource{q: q, news: news}
		if ex := draw(noEntry, reflectOptions{}, seed); ex.target != "[Irrelevant]" {
			t.Errorf("no entry, irrelevant = 0: %+v", ex)
		}
		nothing := &reflectSource{q: q}
		if ex := draw(nothing, reflectOptions{}, seed); ex.passage != "" || ex.target != "[No Retrieve] Jude Riskem lives in Pebworth" {
			t.Errorf("no entry and no negatives: %+v", ex)
		}
	}
	if kinds[news[0]] < 5 || kinds[news[1]] < 5 {
		t.Errorf("irrelevant contexts: %v, want both news and the other entry", kinds)
	}
	// Renaming gives the gardener one invented surname throughout; the other entry keeps its
	// own name.
	for seed := range uint64(10) {
		ex := draw(src, reflectOptions{rename: 1}, seed)
		if strings.Contains(ex.passage+ex.question+ex.target, "Riskem") {
			t.Fatalf("renamed example still names Riskem: %+v", ex)
		}
		sur := strings.Fields(ex.question)[3]
		if want := "Jude " + sur + " lives in Pebworth . Jude " + sur + " grows fig ."; ex.passage != want ||
			ex.target != "[Relevant] Jude "+sur+" lives in Pebworth [Fully supported]" {
			t.Errorf("renamed relevant example %+v, want passage %q", ex, want)
		}
		ex = draw(&reflectSource{q: q, name: "Jude Riskem", others: news[1:]}, reflectOptions{rename: 1}, seed)
		f := strings.Fields(ex.passage)
		if strings.Contains(ex.question, "Riskem") || strings.Contains(ex.passage, "Ovol") || f[0] != "Jude" ||
			f[1] == strings.Fields(ex.question)[3] || ex.passage != strings.ReplaceAll(news[1], "Ovol", f[1]) {
			t.Errorf("renamed irrelevant example %+v: want both gardeners renamed, differently", ex)
		}
	}
	// With a surname pool, renamed surnames come from it, never make a taken name (Jude Ovol
	// exists) and differ between the two gardeners.
	pool := reflectOptions{rename: 1, surnames: []string{"Riskem", "Ovol", "Tova", "Zerimo"},
		taken: map[string]bool{"Jude Riskem": true, "Jude Ovol": true}}
	seen := map[string]int{}
	for seed := range uint64(40) {
		ex := draw(&reflectSource{q: q, name: "Jude Riskem", others: news[1:]}, pool, seed)
		sur, otherSur := strings.Fields(ex.question)[3], strings.Fields(ex.passage)[1]
		if sur == otherSur || !slices.Contains(pool.surnames[2:], sur) || !slices.Contains(pool.surnames[2:], otherSur) {
			t.Fatalf("pool rename %+v: surnames %q, %q, want distinct ones of Tova, Zerimo", ex, sur, otherSur)
		}
		seen[sur]++
	}
	if seen["Tova"] < 5 || seen["Zerimo"] < 5 {
		t.Errorf("pool rename draws %v, want both surnames", seen)
	}
	// The irrelevant fraction of the contexts is the option's.
	irr := 0
	const n = 4000
	for seed := range uint64(n) {
		if draw(src, reflectOptions{irrelevant: 0.4, closedBook: 0.5}, seed).target == "[Irrelevant]" {
			irr++
		}
	}
	if f := float64(irr) / n; f < 0.17 || f > 0.23 {
		t.Errorf("irrelevant share %.3f of all examples, want 0.5 * 0.4 = 0.2", f)
	}
}

// stubScorer answers the policy from fixed tables and records what it was asked.
type stubScorer struct {
	pRet     map[int]float64
	rel      map[qpPair]float64
	support  map[qpPair]float64
	answered []qpPair
}

func (s *stubScorer) RetrieveProb(qs []int) ([]float64, error) {
	out := make([]float64, len(qs))
	for i, q := range qs {
		out[i] = s.pRet[q]
	}
	return out, nil
}

func (s *stubScorer) Relevance(pairs []qpPair) ([]float64, error) {
	out := make([]float64, len(pairs))
	for i, p := range pairs {
		out[i] = s.rel[p]
	}
	return out, nil
}

// Answer returns the passage's length as the answer token, 0 closed-book.
func (s *stubScorer) Answer(pairs []qpPair) ([]reflectAnswer, error) {
	s.answered = append(s.answered, pairs...)
	out := make([]reflectAnswer, len(pairs))
	for i, p := range pairs {
		out[i] = reflectAnswer{tokens: []int{len(p.passage)}, ended: true, support: s.support[p]}
	}
	return out, nil
}

// TestReflectivePolicy checks the decoding policy on a stub scorer with known probabilities.
func TestReflectivePolicy(t *testing.T) {
	s := &stubScorer{
		pRet: map[int]float64{0: 0.2, 1: 0.9, 2: 0.9, 3: 0.5, 4: 0.9, 5: 0.8},
		rel: map[qpPair]float64{
			{1, "a"}: 0.3, {1, "bb"}: 0.8, {1, "ccc"}: 0.7,
			{2, "a"}: 0.49, {2, "bb"}: 0.1,
			{3, "a"}: 0.5,
			{5, "a"}: 0.6, {5, "bb"}: 0.6,
		},
		support: map[qpPair]float64{{1, "bb"}: 0.2, {1, "ccc"}: 0.9, {3, "a"}: 0.1, {5, "a"}: 0.5, {5, "bb"}: 0.5},
	}
	passages := [][]string{{"a"}, {"a", "bb", "ccc"}, {"a", "bb"}, {"a"}, nil, {"a", "bb"}}
	qs := []int{0, 1, 2, 3, 4, 5}
	dec, err := reflectiveDecode(s, qs, passages, reflectPolicy{retrieve: 0.5, relevance: 0.5, supportWeight: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		retrieved bool
		chosen    int
		answer    int
	}{
		{false, -1, 0}, // P(retrieve) 0.2 < 0.5: closed-book
		{true, 2, 3},   // "bb" 0.8 + 0.2 < "ccc" 0.7 + 0.9; "a" fails the threshold
		{true, -1, 0},  // no passage reaches 0.5: closed-book
		{true, 0, 1},   // P(retrieve) = 0.5 and relevance = 0.5 pass (>=)
		{true, -1, 0},  // retrieving without passages: closed-book
		{true, 0, 1},   // a tie goes to the better-ranked passage
	}
	for i, w := range want {
		d := dec[i]
		if d.retrieved != w.retrieved || d.chosen != w.chosen || d.answer.tokens[0] != w.answer {
			t.Errorf("question %d: retrieved %v, chosen %d, answer %v; want %v, %d, %d", i, d.retrieved, d.chosen, d.answer.tokens, w.retrieved, w.chosen, w.answer)
		}
	}
	if dec[0].relevance != nil || !slices.Equal(dec[1].relevance, []float64{0.3, 0.8, 0.7}) {
		t.Errorf("relevances %v and %v", dec[0].relevance, dec[1].relevance)
	}
	for _, p := range s.answered {
		if p.passage != "" && s.rel[p] < 0.5 {
			t.Errorf("answered from %v, relevance %g below the threshold", p, s.rel[p])
		}
	}
	// Without the support score the more relevant passage wins.
	dec, err = reflectiveDecode(s, qs[1:2], passages[1:2], reflectPolicy{retrieve: 0.5, relevance: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if dec[0].chosen != 1 {
		t.Errorf("support weight 0: chose passage %d, want 1", dec[0].chosen)
	}
	// Threshold 0 always retrieves; a relevance threshold above every passage falls back.
	dec, err = reflectiveDecode(s, qs[:1], passages[:1], reflectPolicy{retrieve: 0, relevance: 0.95})
	if err != nil {
		t.Fatal(err)
	}
	if !dec[0].retrieved || dec[0].chosen != -1 {
		t.Errorf("retrieve threshold 0, relevance threshold 0.95: %+v", dec[0])
	}
}

// TestReflectRow: a reflective example becomes "[CLS] <ctx> passage </ctx> question target
// [SEP]" with the loss on the target tokens and [SEP] only; a tokenizer without the reflection
// tokens is refused by the reflective decoder, naming the missing token.
func TestReflectRow(t *testing.T) {
	tok := gardentest.Tokenizer(t, ragreader.CtxOpen, ragreader.CtxClose)
	if _, err := reflectionIDs(tok, tok.VocabSize()); err == nil || !strings.Contains(err.Error(), "no reflection token [Retrieve]") {
		t.Errorf("tokenizer without reflection tokens: error %v", err)
	}
	v := tok.VocabSize()
	if _, err := tok.AddSpecialTokens(tokenize.ReflectionTokens()); err != nil {
		t.Fatal(err)
	}
	if _, err := reflectionIDs(tok, v); err == nil || !strings.Contains(err.Error(), "saved before its vocabulary was grown") {
		t.Errorf("reader of %d ids, tokenizer of %d: error %v", v, tok.VocabSize(), err)
	}
	ids, err := reflectionIDs(tok, tok.VocabSize())
	if err != nil {
		t.Fatal(err)
	}
	f, err := ragreader.NewFormat(tok, 40)
	if err != nil {
		t.Fatal(err)
	}
	ex := reflectExample{passage: "Ada Besa lives in Kelso .", question: "where does Ada Besa live ?",
		target: "[Relevant] Ada Besa lives in Kelso [Fully supported]"}
	row, cut, err := reflectRow(f, ex)
	if err != nil || cut {
		t.Fatal(err, cut)
	}
	prompt := append(append(append([]int{f.Cls, f.CtxOpen}, tok.Encode(ex.passage)...), f.CtxEnd), tok.Encode(ex.question)...)
	target := append(tok.Encode(ex.target), f.Sep)
	if !slices.Equal(row.IDs, append(slices.Clone(prompt), target...)) {
		t.Fatalf("row %v, want prompt %v then target %v", row.IDs, prompt, target)
	}
	if target[0] != ids.relevant || target[len(target)-2] != ids.full {
		t.Errorf("target %v does not start with [Relevant] = %d and end with [Fully supported] = %d, [SEP]", target, ids.relevant, ids.full)
	}
	var predicted []int
	for i, k := range row.Keep {
		if k {
			predicted = append(predicted, row.Target[i])
		}
	}
	if !slices.Equal(predicted, target) {
		t.Errorf("loss on %v, want the target tokens %v", predicted, target)
	}
}

// TestPairNegative: the minimal-pair negative of a relevant example keeps its passage, asks
// about a gardener of the same first name with another surname that is no existing name, and
// is [Irrelevant]; renamed examples pair on their new name; other examples have none.
func TestPairNegative(t *testing.T) {
	q := judeQuestion()
	entry := "Jude Riskem lives in Pebworth . Jude Riskem grows fig ."
	src := &reflectSource{q: q, name: "Jude Riskem", entry: entry, news: []string{"Ada Besa met Jude Riskem in Kelso ."}}
	o := reflectOptions{surnames: []string{"Riskem", "Ovol", "Besa", "Tazu"}, taken: map[string]bool{"Jude Riskem": true, "Jude Ovol": true, "Ada Besa": true}}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		ex := src.example(o, nil, rng)
		neg, ok := o.pairNegative(ex, rng)
		if !ok || neg.passage != entry || neg.target != "[Irrelevant]" {
			t.Fatalf("pair of %+v: %+v (%t)", ex, neg, ok)
		}
		// Only Besa and Tazu make a new name; Besa, Tazu both differ from Riskem.
		if neg.question != "where does Jude Besa live ?" && neg.question != "where does Jude Tazu live ?" {
			t.Errorf("pair question %q", neg.question)
		}
		renamed := o
		renamed.rename = 1
		ex = src.example(renamed, nil, rng)
		neg, ok = renamed.pairNegative(ex, rng)
		first, sur, _ := strings.Cut(ex.name, " ")
		if !ok || first != "Jude" || neg.passage != ex.passage || strings.Contains(neg.question, " "+sur+" ") || !strings.Contains(ex.passage, ex.name) {
			t.Errorf("renamed %+v: pair %+v (%t)", ex, neg, ok)
		}
		irr := src.example(reflectOptions{irrelevant: 1}, nil, rng)
		if _, ok := o.pairNegative(irr, rng); ok {
			t.Errorf("an irrelevant example got a pair: %+v", irr)
		}
		cb := src.example(reflectOptions{closedBook: 1}, nil, rng)
		if _, ok := o.pairNegative(cb, rng); ok {
			t.Errorf("a closed-book example got a pair: %+v", cb)
		}
	}
}

// resumeRecipe is the small selfrag recipe, shorter, with language-model pretraining (one pass,
// 16 steps), a log line every 5 steps and a checkpoint every 10 steps of each phase.
func resumeRecipe(t *testing.T) *configs.Recipe {
	rec := smallSelfRAGRecipe(t, "")
	rec.Reader.PretrainPasses, rec.Reader.PretrainBatchSize = 1, 32
	rec.Reader.FinetuneSteps, Of(rec).FinetuneSteps = 60, 60
	rec.Train.LogEvery, rec.Train.CheckpointEvery = 5, 10
	return rec
}

// sameRun fails t unless the run directory resumed ended as full did: metrics.json (timing keys
// aside), the TREC runs, log.jsonl's (phase, step) lines, tokenizer.json and the Retrieve labels.
func sameRun(t *testing.T, where, full, resumed string) {
	t.Helper()
	testkit.SameRunDir(t, where, full, resumed)
	for _, f := range []string{"tokenizer.json", labelsFile} {
		testkit.SameFile(t, filepath.Join(full, f), filepath.Join(resumed, f))
	}
}

// TestSelfRAGResume interrupts a small selfrag run mid-phase in each of its phases (the
// interruption checkpoints the step after InterruptAt) and resumes it: the resumed run
// continues the phase from that checkpoint, takes the earlier phases' results from the run
// directory (rag.json, retrieve_labels.json, plain/, tokenizer.json), and ends with the
// metrics, TREC runs, log lines, tokenizer and labels of the uninterrupted run. One run is
// stopped twice (in reader_finetune, then, resumed, in selfrag_finetune) and resumed again.
func TestSelfRAGResume(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	rec := resumeRecipe(t)
	var out strings.Builder
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "reader_lm: 16 steps") {
		t.Fatalf("the uninterrupted run does not pretrain for 16 steps:\n%s", out.String())
	}
	m, err := experiment.ReadMetrics(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"lm_cloze/EM", "labels/no_retrieve_rate", "plain_bm25_top1/EM", "selfrag_k3/EM", "selfrag_finetune/contexts_cut"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics.json lacks %s", k)
		}
	}
	type stop struct {
		phase string
		at    int
	}
	for _, c := range []struct {
		name  string
		stops []stop   // the segments' interruptions: the first run's, then each resume's
		says  []string // what the last resumed run prints
	}{
		{"reader_lm", []stop{{"reader_lm", 7}}, []string{"checkpoint-reader_lm-8 at step 8"}},
		{"reader_finetune", []stop{{"reader_finetune", 34}}, []string{"reader_lm: finished in an earlier segment", "checkpoint-reader_finetune-35 at step 35"}},
		{"selfrag_finetune", []stop{{"selfrag_finetune", 27}}, []string{"reader_lm: finished in an earlier segment",
			"reader_finetune: finished in an earlier segment", "resume: the plain reader in", "checkpoint-selfrag_finetune-28 at step 28"}},
		{"twice", []stop{{"reader_finetune", 4}, {"selfrag_finetune", 44}}, []string{"reader_finetune: finished in an earlier segment",
			"checkpoint-selfrag_finetune-45 at step 45"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := ""
			var out strings.Builder
			for i, st := range c.stops {
				out.Reset()
				o := experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: dir, InterruptPhase: st.phase, InterruptAt: st.at}
				d, err := experiment.Run(context.Background(), rec, o)
				if !errors.Is(err, trainer.ErrInterrupted) {
					t.Fatalf("segment %d, stopped in %s at %d: err = %v\n%s", i, st.phase, st.at, err, out.String())
				}
				dir = d
				ck, err := checkpoints.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				if ck.Trainer.Phase != st.phase || ck.Trainer.Step != st.at+1 || ck.Optimizer == nil {
					t.Fatalf("segment %d: latest checkpoint %s step %d (optimizer %t), want %s step %d with the optimizer",
						i, ck.Trainer.Phase, ck.Trainer.Step, ck.Optimizer != nil, st.phase, st.at+1)
				}
			}
			out.Reset()
			resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: dir})
			if err != nil || resumed != dir {
				t.Fatalf("resume: dir %s, err %v\n%s", resumed, err, out.String())
			}
			for _, say := range c.says {
				if !strings.Contains(out.String(), say) {
					t.Errorf("the resumed run does not print %q:\n%s", say, out.String())
				}
			}
			if strings.Contains(out.String(), "first phase") {
				t.Errorf("the resumed run starts again:\n%s", out.String())
			}
			sameRun(t, c.name+": ", full, resumed)
		})
	}
}

// TestSelfRAGResumeWithoutCheckpointStartsAgain: a selfrag run killed before its first checkpoint (simulated by
// removing the checkpoint its interruption wrote), and one whose run directory lacks the
// earlier phases' results (as an earlier version's did: rag.json, plain/, retrieve_labels.json
// removed; tokenizer.json holds the reflection tokens), resume by starting their first phase
// again, and end as the uninterrupted run does.
func TestSelfRAGResumeWithoutCheckpointStartsAgain(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	rec := resumeRecipe(t)
	rec.Reader.FinetuneSteps, Of(rec).FinetuneSteps = 20, 20
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		phase  string
		at     int
		remove func(name string) bool // the files of the run directory removed before resuming
		says   string
	}{
		{"reader_lm", 5, func(name string) bool { return strings.HasPrefix(name, "checkpoint") || name == checkpoints.LatestFile },
			"no checkpoint yet; starting from the first phase"},
		{"selfrag_finetune", 10, func(name string) bool {
			return name == ragresume.ProgressFile || name == plainDir || name == labelsFile
		},
			"holds no record of stage reader_lm in"},
	} {
		broken, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, InterruptPhase: c.phase, InterruptAt: c.at})
		if !errors.Is(err, trainer.ErrInterrupted) {
			t.Fatalf("%s: interrupted run: err = %v", c.phase, err)
		}
		entries, _ := os.ReadDir(broken)
		for _, e := range entries {
			if c.remove(e.Name()) {
				os.RemoveAll(filepath.Join(broken, e.Name()))
			}
		}
		var out strings.Builder
		resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: broken})
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.phase, err, out.String())
		}
		if !strings.Contains(out.String(), c.says) || !strings.Contains(out.String(), "reader_lm: 16 steps") {
			t.Errorf("%s: the resumed run does not say %q and pretrain again:\n%s", c.phase, c.says, out.String())
		}
		sameRun(t, c.phase+": ", full, resumed)
	}
}

// TestPairsTeachSurnameComparison: minimal-pair negatives (selfrag.pair_fraction = 1) are what
// makes the reflective reader reject passages about another gardener; on the small world they
// cut the share of other passages judged relevant by more than 0.3 against the same run
// without them.
func TestPairsTeachSurnameComparison(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	other := map[float64]float64{}
	for _, pf := range []float64{0, 1} {
		rec := smallSelfRAGRecipe(t, "")
		Of(rec).PairFraction = pf
		dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		m, err := experiment.ReadMetrics(dir)
		if err != nil {
			t.Fatal(err)
		}
		other[pf] = m["isrel_not_entry/judged_relevant"]
	}
	if !(other[1] < other[0]-0.3) {
		t.Errorf("other passages judged relevant: %.3f without pairs, %.3f with; want a drop of > 0.3", other[0], other[1])
	}
}
