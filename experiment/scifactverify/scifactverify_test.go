package scifactverify

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/internal/membudget"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// tinyGGUF writes the tiny random LLaMA of testkit.TinyLlamaGGUF (context 256).
func tinyGGUF(t *testing.T, dir string) string { return testkit.TinyLlamaGGUF(t, dir, 256) }

// tinyRecipe is a scifact_verify recipe over the real SciFact data with the tiny LLaMA: 6 steps
// of 2 sequences per reader, the first 4 dev claims, every system (the MiniLM run a TREC file
// ranking each dev claim's cited abstracts first, then two fixed abstracts).
func tinyRecipe(t *testing.T, extra string) *configs.Recipe {
	t.Helper()
	dir, data := t.TempDir(), testkit.SciFactDir(t)
	corpus, err := ReadCorpus(filepath.Join(VerifyDir(data), "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	claims, err := ReadClaims(filepath.Join(VerifyDir(data), "claims_dev.jsonl"), corpus)
	if err != nil {
		t.Fatal(err)
	}
	var trec strings.Builder
	for _, c := range claims {
		docs := append(slices.Clone(c.Cited), corpus.Order[0].ID, corpus.Order[1].ID)
		for r, d := range docs {
			fmt.Fprintf(&trec, "%d Q0 %d %d %g minilm\n", c.ID, d, r+1, 10-float64(r))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "dev.trec"), []byte(trec.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	text := `kind = "scifact_verify"
name = "tiny-verify"
seed = 7
output_dir = "runs"
[data]
dir = "` + data + `"
train_split = "train"
dev_split = "dev"
[train]
steps = 6
batch_size = 2
lr = 0.05
warmup_steps = 2
log_every = 1
checkpoint_every = 2
[scifact_verify]
init_from = "` + tinyGGUF(t, dir) + `"
eval_split = "dev"
max_eval_claims = 4
minilm_run = "{split}.trec"
train_k = 1
top_k = 2
rel_threshold = 0.0
abstract_tokens = 64
max_length = 160
lora_rank = 2
lora_alpha = 4
lora_dropout = 0.1
lora_targets = ["q_proj", "v_proj", "up_proj"]
` + extra
	return testkit.WriteRecipe(t, dir, "tiny.toml", text)
}

// TestResumesExactly: the tiny run interrupted in the selfrag phase at step 3 and resumed ends
// with the uninterrupted run's metrics, prediction files byte for byte, log steps and both
// readers' adapters bit for bit; every system writes one prediction line per claim that the
// official format reader accepts, and its metrics are ScoreSciFact's of that file.
func TestResumesExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	rec := tinyRecipe(t, "")
	full, resumed, out := testkit.Resume(t, rec, SelfRAGPhase, 3)
	if !strings.Contains(out, "checkpoint-selfrag-4 at step 4") {
		t.Errorf("the resumed run does not say where it resumed:\n%s", out)
	}
	testkit.SameMetrics(t, "", full, resumed, testkit.Untimed)
	if w, g := testkit.LogSteps(t, full), testkit.LogSteps(t, resumed); len(w) != 12 || !slices.Equal(w, g) {
		t.Errorf("log steps resumed %v, uninterrupted %v", g, w)
	}
	for _, ph := range []string{PlainPhase, SelfRAGPhase} {
		a := testkit.SameCheckpoint(t, ph+": ", filepath.Join(full, ph), filepath.Join(resumed, ph), 6)
		for _, p := range a.Params {
			if !strings.Contains(p.Name, "lora") {
				t.Errorf("%s: checkpoint tensor %s is not an adapter", ph, p.Name)
			}
		}
	}
	mt, err := experiment.ReadMetrics(full)
	if err != nil {
		t.Fatal(err)
	}
	gold, err := eval.ReadSciFactGold(filepath.Join(VerifyDir(rec.Data.Dir), "claims_dev.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	gold = gold[:4] // the file is in id order
	for _, sys := range allSystems {
		name := "dev." + sys + ".scifact.jsonl"
		testkit.SameFile(t, filepath.Join(full, experiment.RunsDir, name), filepath.Join(resumed, experiment.RunsDir, name))
		preds, err := eval.ReadSciFactPredictions(filepath.Join(full, experiment.RunsDir, name), gold)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := eval.ScoreSciFact(gold, preds)
		if err != nil {
			t.Fatal(err)
		}
		if got := mt["dev/"+sys+"/abstract_label_only/f1"]; got != sc.AbstractLabelOnly.F1 {
			t.Errorf("%s: metrics.json abstract label-only F1 %v, the file scores %v", sys, got, sc.AbstractLabelOnly.F1)
		}
		if got := mt["dev/"+sys+"/sentence_label/recall"]; got != sc.SentenceLabel.Recall {
			t.Errorf("%s: metrics.json sentence label recall %v, the file scores %v", sys, got, sc.SentenceLabel.Recall)
		}
		for _, p := range preds {
			switch {
			case strings.HasPrefix(sys, "closedbook_") && len(p.Evidence) != 1:
				t.Errorf("%s: claim %d: %d abstracts, closed-book attaches one", sys, p.ID, len(p.Evidence))
			case strings.HasPrefix(sys, "plain_") && len(p.Evidence) > 1:
				t.Errorf("%s: claim %d: %d abstracts from the top-1", sys, p.ID, len(p.Evidence))
			case strings.HasPrefix(sys, "selfrag_") && len(p.Evidence) > 2:
				t.Errorf("%s: claim %d: %d abstracts from the top 2", sys, p.ID, len(p.Evidence))
			}
		}
	}
	if mt["dev/claims"] != 4 {
		t.Errorf("dev/claims = %v", mt["dev/claims"])
	}

	// train verify's function on the dev claims' file reproduces the run's selfrag_bm25 lines
	// for the claims it shares with it.
	in := filepath.Join(t.TempDir(), "claims.jsonl")
	lines, err := os.ReadFile(filepath.Join(VerifyDir(rec.Data.Dir), "claims_dev.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitAfterN(string(lines), "\n", 5)
	if err := os.WriteFile(in, []byte(strings.Join(first[:4], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	pred := filepath.Join(t.TempDir(), "pred.jsonl")
	var vout, verr strings.Builder
	if err := Verify(full, in, pred, VerifyOptions{Out: &vout, Progress: &verr}); err != nil {
		t.Fatal(err)
	}
	testkit.SameFile(t, filepath.Join(full, experiment.RunsDir, "dev.selfrag_bm25.scifact.jsonl"), pred)
	// what the layout cut is said on Progress (stderr) and in the summary line
	cutLine := regexp.MustCompile(`truncation: claims cut to 48 tokens \d+ of 4; abstracts over abstract_tokens \d+ of \d+ \(read as \d+ passages, \d+ sentences cut\)`)
	if !cutLine.MatchString(verr.String()) || !cutLine.MatchString(vout.String()) {
		t.Errorf("train verify's truncation counts: progress %q, summary %q", verr.String(), vout.String())
	}

	// A reader's directory exports as a reader_lm run does: merged, and as a peft adapter.
	for _, o := range []export.Options{{}, {Adapter: true}} {
		if err := export.Export(filepath.Join(full, SelfRAGPhase), filepath.Join(t.TempDir(), "x"), o); err != nil {
			t.Errorf("export %+v: %v", o, err)
		}
	}
}

// testFormat is the layout of the tiny LLaMA's tokenizer with abstract_tokens 40 and
// max_length 140.
func testFormat(t *testing.T) (*format, *tokenize.GGUFTokenizer) {
	t.Helper()
	_, tok, err := export.OpenLlamaGGUF(tinyGGUF(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	f, err := newFormat(tok, 40, 140)
	if err != nil {
		t.Fatal(err)
	}
	return f, tok
}

// TestFormat: the training sequences of a SUPPORT, a CONTRADICT and an NEI pair on the real
// tokenizer layout: loss on the retrieval decision and the answer only, the reflection words
// where the table puts them, rationale indices of the shown sentences only.
func TestFormat(t *testing.T) {
	f, tok := testFormat(t)
	d := &Doc{ID: 5, Title: "T", Sents: []string{"Aspirin helps.", "It does.", "A third sentence here that is long enough to be cut off by the budget."}}
	for _, c := range []struct {
		g         gold
		rel, sup  []int
		plainWord string
		rationale string
	}{
		{gold{eval.Support, []int{0, 2}}, f.rt.relevant, f.rt.supported, " SUPPORT", " 0"},
		{gold{eval.Contradict, []int{1}}, f.rt.relevant, f.rt.contradicted, " CONTRADICT", " 1"},
		{gold{}, f.rt.irrelevant, f.rt.unsupported, " NOT ENOUGH INFO", " none"},
	} {
		ws := f.windows(d)
		if !slices.Equal(ws, []window{{0, 2}, {2, 3}}) {
			t.Fatalf("passages %v, want sentences 0-1 and 2 (the third is past the 40-token budget)", ws)
		}
		w := ws[0]
		s, err := f.selfragSeq("Aspirin works.", d, w, c.g.in(w))
		if err != nil {
			t.Fatal(err)
		}
		cl := f.claim("Aspirin works.")
		a := f.passage(d, w)
		var want []int
		for _, p := range [][]int{cl, f.rt.retrieve, a, c.rel, f.rationale, tok.Encode(c.rationale), f.verdict, c.sup, {tok.EOS()}} {
			want = append(want, p...)
		}
		if !slices.Equal(s.ids, want) {
			t.Errorf("%q: selfrag ids %v, want %v", c.g.label, s.ids, want)
		}
		for i, l := range s.loss {
			inPrompt := i < len(cl) || (i >= len(cl)+len(f.rt.retrieve) && i < len(cl)+len(f.rt.retrieve)+len(a))
			if l == inPrompt {
				t.Fatalf("%q: token %d loss %v (claim or abstract: %v)", c.g.label, i, l, inPrompt)
			}
		}
		// the second passage shows sentence 2: the SUPPORT pair's rationale there, the others none
		s2, err := f.selfragSeq("Aspirin works.", d, ws[1], c.g.in(ws[1]))
		if err != nil {
			t.Fatal(err)
		}
		wantRel, wantRat, wantSup := f.rt.irrelevant, " none", f.rt.unsupported
		if c.g.label == eval.Support {
			wantRel, wantRat, wantSup = f.rt.relevant, " 2", f.rt.supported
		}
		a2 := f.passage(d, ws[1])
		want = nil
		for _, p := range [][]int{cl, f.rt.retrieve, a2, wantRel, f.rationale, tok.Encode(wantRat), f.verdict, wantSup, {tok.EOS()}} {
			want = append(want, p...)
		}
		if !slices.Equal(s2.ids, want) {
			t.Errorf("%q: second passage's selfrag ids %v, want %v", c.g.label, s2.ids, want)
		}
		if !strings.Contains(tok.Decode(a2, true), "(2) A third sentence") || strings.Contains(tok.Decode(a2, true), "(0)") {
			t.Errorf("second passage %q", tok.Decode(a2, true))
		}
		p, err := f.plainSeq("Aspirin works.", d, w, c.g.in(w))
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Decode(p.ids[len(cl)+len(a):], true); got != "Rationale:"+c.rationale+"\nLabel:"+c.plainWord {
			t.Errorf("%q: plain answer %q", c.g.label, got)
		}
		for _, r := range slices.Collect(slices.Values(f.rt.retrieve)) {
			if slices.Contains(p.ids[:len(cl)+len(a)], r) && len(f.rt.retrieve) == 1 {
				t.Errorf("plain prompt holds the retrieval token")
			}
		}
	}
	if got := parseRationale(" 3, 1, 3, 12 and 0", window{0, 5}); !slices.Equal(got, []int{3, 1, 0}) {
		t.Errorf("parseRationale = %v", got)
	}
	if got := parseRationale(" 3, 1, 3, 12 and 0", window{1, 4}); !slices.Equal(got, []int{3, 1}) {
		t.Errorf("parseRationale in passage 1-3 = %v", got)
	}
	if g := (gold{eval.Contradict, []int{1, 4, 6}}).in(window{2, 5}); g.label != eval.Contradict || !slices.Equal(g.sents, []int{4}) {
		t.Errorf("gold.in = %+v", g)
	}
	if g := (gold{eval.Support, []int{1}}).in(window{2, 5}); g.label != "" || g.sents != nil {
		t.Errorf("gold.in a passage without rationale = %+v, want NOT ENOUGH INFO", g)
	}
	if g := goldOf(eval.SciFactClaim{Evidence: map[int]eval.SciFactGoldAbstract{5: {Label: eval.Support, Sets: [][]int{{4}, {1, 2}}}}}, 5); g.label != eval.Support || !slices.Equal(g.sents, []int{1, 2, 4}) {
		t.Errorf("goldOf = %+v", g)
	}
	if _, err := newFormat(tok, 40, 60); err != nil {
		t.Fatal(err)
	}
	short, _ := newFormat(tok, 40, 60)
	if _, err := short.selfragSeq("Aspirin works.", d, window{0, 2}, gold{}); err == nil || !strings.Contains(err.Error(), "max_length = 60") {
		t.Errorf("a sequence past max_length: err = %v", err)
	}
}

// TestGroupProbs: the softmax over a group's first tokens, by hand.
func TestGroupProbs(t *testing.T) {
	logits := []float32{0, 1, 2, 3}
	p := groupProbs(logits, []int{1, 0}, []int{3})
	want := 1 / (1 + math.Exp(2))
	if math.Abs(p[0]-want) > 1e-12 || math.Abs(p[0]+p[1]-1) > 1e-12 {
		t.Errorf("groupProbs = %v, want [%v %v]", p, want, 1-want)
	}
}

// TestSelfRAGDecision: on the tiny model, for (claim, abstract) pairs of dev claims, the Self-RAG
// reader with rel_threshold 0 reaches the support group (its three probabilities sum to 1)
// and emits the group's argmax (abstaining on [No support]), with rationale indices of shown
// sentences only; with the threshold above p([Relevant]) it abstains before the support group.
func TestSelfRAGDecision(t *testing.T) {
	m, tok, err := export.OpenLlamaGGUF(tinyGGUF(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	f, err := newFormat(tok, 64, 160)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := model.NewLlamaDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := ReadCorpus(filepath.Join(VerifyDir(filepath.Join("..", "..", "datasets", "scifact")), "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	open := &reader{f: f, dec: dec}
	labels := map[eval.VerifyLabel]int{}
	multi := 0
	for i, d := range corpus.Order[:6] {
		claim := []string{"Aspirin lowers the risk of stroke.", "Vitamin D deficiency causes rickets."}[i%2]
		v, err := open.selfrag(claim, d)
		if err != nil {
			t.Fatal(err)
		}
		if s := v.pSup + v.pCon + v.pNoSupp; math.Abs(s-1) > 1e-9 || !(v.pRel > 0 && v.pRel < 1) {
			t.Fatalf("doc %d: p(rel) %v, support group sums to %v", d.ID, v.pRel, s)
		}
		want := eval.VerifyLabel("")
		switch {
		case v.pSup >= v.pCon && v.pSup >= v.pNoSupp:
			want = eval.Support
		case v.pCon > v.pSup && v.pCon >= v.pNoSupp:
			want = eval.Contradict
		}
		if v.label != want {
			t.Errorf("doc %d: label %q, support group %v %v %v", d.ID, v.label, v.pSup, v.pCon, v.pNoSupp)
		}
		labels[v.label]++
		ws := f.windows(d)
		if v.passages != len(ws) || v.window < 0 || v.window >= len(ws) {
			t.Fatalf("doc %d: passage %d of %d, the abstract has %d", d.ID, v.window, v.passages, len(ws))
		}
		for _, s := range v.sents {
			if !ws[v.window].holds(s) {
				t.Errorf("doc %d: rationale %d outside the judged passage %+v", d.ID, s, ws[v.window])
			}
		}
		// p([Relevant]) is the passages' largest, each read alone, and the judged passage's
		best := -1.0
		for i, w := range ws {
			c, _ := dec.NewCache(200)
			logits, err := open.feed(c, f.selfragPrompt(claim, d, w).ids)
			if err != nil {
				t.Fatal(err)
			}
			p := groupProbs(logits, f.rt.relevant, f.rt.irrelevant)[0]
			if i == v.window && p != v.pRel {
				t.Errorf("doc %d: p(rel) %v, its judged passage's %v", d.ID, v.pRel, p)
			}
			best = max(best, p)
		}
		if best != v.pRel {
			t.Errorf("doc %d: p(rel) %v, the passages' largest %v", d.ID, v.pRel, best)
		}
		multi += min(len(ws)-1, 1)
		closed := &reader{f: f, dec: dec, relThreshold: math.Nextafter(v.pRel, 2)}
		w, err := closed.selfrag(claim, d)
		if err != nil {
			t.Fatal(err)
		}
		if w.label != "" || w.pRel != v.pRel || w.pSup+w.pCon+w.pNoSupp != 0 {
			t.Errorf("doc %d: above the threshold: %+v", d.ID, w)
		}
	}
	if multi == 0 {
		t.Errorf("no abstract of the test was read as several passages")
	}
	t.Logf("labels of the random tiny model: %v; %d of 6 abstracts read as several passages", labels, multi)
}

// TestAbstains: with rel_threshold = 1 the Self-RAG reader never reaches p([Relevant]) = 1 on
// the tiny model, so it abstains on every abstract: no evidence, all metrics zero; the plain
// reader ignores the threshold.
func TestAbstains(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := tinyRecipe(t, "")
	c := Of(rec)
	c.RelThreshold, c.Systems = 1, []string{"selfrag_bm25", "oracle_selfrag"}
	rec.Train.Steps = 1
	dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, sys := range c.Systems {
		b, err := os.ReadFile(filepath.Join(dir, experiment.RunsDir, "dev."+sys+".scifact.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), `"evidence": {}`); n != 4 {
			t.Errorf("%s: %d of 4 claims abstain:\n%s", sys, n, b)
		}
	}
	mt, err := experiment.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := mt["dev/selfrag_bm25/abstract_label_only/precision"]; !ok || v != 0 {
		t.Errorf("abstaining precision %v (%v)", v, ok)
	}
	if _, ok := mt["dev/plain_bm25/abstract_label_only/f1"]; ok {
		t.Errorf("plain_bm25 evaluated though not asked for")
	}
}

// TestSmolLM2ReflectionWords: on SmolLM2's tokenizer (tools/pretrained/get.sh; skipped
// without it) every reflection word is one token, so each reflection token is one softmax entry.
func TestSmolLM2ReflectionWords(t *testing.T) {
	path := filepath.Join("..", "..", "pretrained", "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
	g, err := gguf.Open(path)
	if err != nil {
		t.Skipf("SmolLM2 not fetched: %v", err)
	}
	tok, err := tokenize.LoadGGUFTokenizer(g)
	if err != nil {
		t.Fatal(err)
	}
	f, err := newFormat(tok, 224, 320)
	if err != nil {
		t.Fatal(err)
	}
	for name, ids := range map[string][]int{"retrieve": f.rt.retrieve, "relevant": f.rt.relevant, "irrelevant": f.rt.irrelevant,
		"supported": f.rt.supported, "contradicted": f.rt.contradicted, "unsupported": f.rt.unsupported} {
		if len(ids) != 1 {
			t.Errorf("%s: %v, want one token", name, ids)
		}
	}
}

// TestMemoryRefused: under a cgroup memory.max of 64 KiB the tiny run is refused before any
// weight or data is read, in one line naming the recipe keys behind the estimate, and leaves no
// run directory; the estimate is model.EstimateLlamaTraining at batch_size x max_length.
func TestMemoryRefused(t *testing.T) {
	rec := tinyRecipe(t, "")
	e, keys, err := Memory(rec)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Open(Of(rec).InitFrom)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := model.LlamaConfigGGUF(g)
	if err != nil {
		t.Fatal(err)
	}
	lc := model.LoRAConfig{Rank: 2, Alpha: 4, Dropout: 0.1, Targets: []string{"q_proj", "v_proj", "up_proj"}} // tinyRecipe's
	if want := model.EstimateLlamaTraining(cfg, &lc, 2*160, 160); e != want {
		t.Errorf("Memory = %+v, want %+v", e, want)
	}
	dir := t.TempDir()
	oldMax, oldInfo := membudget.CgroupMax, membudget.MemInfo
	t.Cleanup(func() { membudget.CgroupMax, membudget.MemInfo = oldMax, oldInfo })
	membudget.CgroupMax, membudget.MemInfo = filepath.Join(dir, "memory.max"), filepath.Join(dir, "meminfo")
	if err := os.WriteFile(membudget.CgroupMax, []byte("65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(membudget.MemInfo, []byte("MemAvailable: 128 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec.OutputDir = filepath.Join(dir, "runs")
	_, err = experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), keys) || !strings.Contains(err.Error(), "scifact_verify.max_length = 160") {
		t.Errorf("err = %v", err)
	}
	if entries, _ := os.ReadDir(rec.OutputDir); len(entries) > 0 {
		t.Errorf("%s holds %d entries; err = %v", rec.OutputDir, len(entries), err)
	}
}

// TestRecipeErrors: a bad [scifact_verify] key fails configs.Load naming the key.
func TestRecipeErrors(t *testing.T) {
	for _, c := range []struct{ extra, want string }{
		{`systems = ["selfrag_bm25", "rag_bm25"]`, "scifact_verify.systems"},
		{`lora_targets = ["x_proj"]`, `scifact_verify.lora_targets: model: lora target "x_proj"`},
		{`lora_dropout = 1.0`, "scifact_verify.lora_dropout"},
		{`max_length = 100`, "scifact_verify.max_length: must hold the claim"},
		{`top_k = 0`, "scifact_verify.top_k"},
		{`select_top_k = [1, 0]`, "scifact_verify.select_top_k: each k must be in [1, 100], got 0"},
		{`select_rel_threshold = [0.5, 1.5]`, "scifact_verify.select_rel_threshold"},
		{"select_rel_threshold = [" + strings.Repeat("0.5, ", 101) + "0.5]", "scifact_verify.select_top_k: the dev grid holds at most 100 k and 101 thresholds, got 0 and 102"},
		{"select_top_k = [1, 3]\neval_split = \"dev\"", "scifact_verify.eval_split: select_top_k / select_rel_threshold choose on data.dev_split"},
		{"select_rel_threshold = [0.5]\nsystems = [\"plain_bm25\"]", "scifact_verify.select_top_k: chooses the Self-RAG decoder's settings"},
		{`eval_split = "none"`, `scifact_verify.eval_split: "none" reads only the dev choice: set select_top_k`},
		{"eval_split = \"none\"\nselect_top_k = [1]\nsystems = [\"selfrag_bm25\", \"plain_bm25\"]", `scifact_verify.eval_split: "none" reads only the dev choice, which the Self-RAG systems alone make`},
	} {
		path := filepath.Join(t.TempDir(), "r.toml")
		text := "kind = \"scifact_verify\"\nname = \"x\"\n[data]\ndir = \"../../datasets/scifact\"\n[scifact_verify]\ninit_from = \"" +
			tinyGGUF(t, t.TempDir()) + "\"\n" + c.extra + "\n"
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, "../../datasets", mustAbs(t, "../../datasets"))), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := configs.Load(path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.extra, err, c.want)
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestBadInput: a malformed corpus, claims file or MiniLM run fails with the file, the line and
// what is wrong.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := `{"doc_id": 1, "title": "A", "abstract": ["s0", "s1"]}` + "\n"
	for _, c := range []struct{ text, want string }{
		{good + `{"doc_id": 1, "title": "B", "abstract": ["x"]}`, "corpus.jsonl:2: doc_id 1 repeated"},
		{good + `{"title": "B", "abstract": ["x"]}`, "corpus.jsonl:2: field doc_id missing"},
		{good + `{"doc_id": 2, "title": "B", "abstract": []}`, "corpus.jsonl:2: doc 2 has 0 sentences"},
		{good + `{"doc_id": 2,`, "corpus.jsonl:2: "},
		{"\n", "corpus.jsonl: no abstracts"},
	} {
		if _, err := ReadCorpus(write("corpus.jsonl", c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("corpus %q: err = %v, want %q", c.text, err, c.want)
		}
	}
	corpus, err := ReadCorpus(write("corpus.jsonl", good))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ text, want string }{
		{`{"id": 1, "claim": "x"}` + "\n" + `{"id": 1, "claim": "y"}`, "claims.jsonl:2: claim id 1 repeated"},
		{`{"claim": "x"}`, "claims.jsonl:1: field id missing"},
		{`{"id": 3, "claim": "  "}`, "claims.jsonl:1: field claim empty"},
		{`{"id": 3, "claim": "x", "cited_doc_ids": [9]}`, "claims.jsonl:1: cited_doc_ids: doc 9 is not in the corpus"},
	} {
		if _, err := ReadClaims(write("claims.jsonl", c.text), corpus); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("claims %q: err = %v, want %q", c.text, err, c.want)
		}
	}
	claims, err := ReadClaims(write("claims.jsonl", `{"id": 3, "claim": "x"}`+"\n"+`{"id": 4, "claim": "y"}`), corpus)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fromRun(write("run.trec", "3 Q0 1 1 2.0 m\n"), claims, 2, corpus); err == nil || !strings.Contains(err.Error(), "run.trec: claim 4 has no ranking") {
		t.Errorf("a claim missing from the run: %v", err)
	}
	if _, err := fromRun(write("run.trec", "3 Q0 1 1 2.0 m\n4 Q0 7 1 2.0 m\n"), claims, 2, corpus); err == nil || !strings.Contains(err.Error(), `claim 4: doc "7" is not in the corpus`) {
		t.Errorf("a doc missing from the corpus: %v", err)
	}
	got, err := fromRun(write("run.trec", "3 Q0 1 1 2.0 m\n4 Q0 1 1 2.0 m\n"), claims, 2, corpus)
	if err != nil || !slices.Equal(got[3], []int{1}) || !slices.Equal(got[4], []int{1}) {
		t.Errorf("fromRun = %v, %v", got, err)
	}
}

// TestTruncationCounted: the claims cut to claimTokens and the abstracts over abstract_tokens
// are counted once each (a claim or abstract read again counts once), with the sentences left
// out and the first sentence cut, and the report starts the count anew.
func TestTruncationCounted(t *testing.T) {
	f, tok := testFormat(t)
	long := strings.Repeat("aspirin reduces the risk of heart attacks ", 12)
	if n := len(tok.Encode("Claim: " + long)); n <= claimTokens {
		t.Fatalf("the long claim is %d tokens", n)
	}
	fits := &Doc{ID: 1, Title: "T", Sents: []string{"Aspirin helps."}}
	twoPassages := &Doc{ID: 5, Title: "T", Sents: []string{"Aspirin helps.", "It does.", "A third sentence here that is long enough to be cut off by the budget."}}
	firstCut := &Doc{ID: 7, Title: "T", Sents: []string{strings.Repeat("a very long first sentence ", 20), "second"}}
	for _, c := range []struct {
		claim string
		d     *Doc
	}{{"Aspirin works.", fits}, {long, twoPassages}, {long, twoPassages}, {"Aspirin works.", firstCut}} {
		for _, w := range f.windows(c.d) {
			if _, err := f.plainSeq(c.claim, c.d, w, gold{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var out strings.Builder
	line := f.cut.report(&out, "verify")
	want := "truncation: claims cut to 48 tokens 1 of 2; abstracts over abstract_tokens 2 of 3 (read as 4 passages, 1 sentences cut)"
	if line != want || out.String() != "verify: "+want+"\n" {
		t.Errorf("report %q, printed %q, want %q", line, out.String(), want)
	}
	if again := f.cut.report(&out, "verify"); again != "" {
		t.Errorf("a second report without reading: %q", again)
	}
}

// TestSelectOnDev: with select_top_k and select_rel_threshold the Self-RAG systems decode the
// dev claims once (the grid's largest k, its lowest threshold), score every grid point, and
// read eval_split with the first best; a grid point assembled from those decisions is byte for
// byte what decoding dev directly at that point writes (two points, two runs), and a decisions
// file made at a higher threshold is not reused.
func TestSelectOnDev(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	var selRec *configs.Recipe
	var out strings.Builder // the last run's output
	runWith := func(split string, ks []int, ts []float64, k int, th float64) string {
		out.Reset()
		rec := tinyRecipe(t, "")
		if ks != nil {
			selRec = rec
		}
		c := Of(rec)
		c.Systems, c.EvalSplit, c.SelectTopK, c.SelectRelThreshold, c.TopK, c.RelThreshold = []string{"selfrag_bm25", "oracle_selfrag"}, split, ks, ts, k, th
		dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	sel := runWith("test", []int{2, 1}, []float64{0.6, 0, 0.3}, 2, 0.5)
	mt, err := experiment.ReadMetrics(sel)
	if err != nil {
		t.Fatal(err)
	}
	tsv, err := os.ReadFile(filepath.Join(sel, experiment.RunsDir, "dev.selfrag_bm25.select.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(tsv)), "\n")[1:]
	var grid []string
	bestF1, best := -1.0, ""
	for _, row := range rows {
		f := strings.Split(row, "\t")
		grid = append(grid, f[0]+"/"+f[1])
		var f1 float64
		fmt.Sscan(f[2], &f1)
		if f1 > bestF1+1e-9 {
			bestF1, best = f1, f[0]+"/"+f[1]
		}
	}
	if want := []string{"1/0", "1/0.3", "1/0.6", "2/0", "2/0.3", "2/0.6"}; !slices.Equal(grid, want) {
		t.Fatalf("grid %v, want %v", grid, want)
	}
	chosen := fmt.Sprintf("%g/%g", mt["dev/selfrag_bm25/top_k"], mt["dev/selfrag_bm25/rel_threshold"])
	if chosen != best || math.Abs(mt["dev/selfrag_bm25/abstract_label_only/f1"]-bestF1) > 1e-6 {
		t.Errorf("chose %s (F1 %v), the grid's first best is %s (%v)", chosen, mt["dev/selfrag_bm25/abstract_label_only/f1"], best, bestF1)
	}
	if used := fmt.Sprintf("%g/%g", mt["test/selfrag_bm25/top_k"], mt["test/selfrag_bm25/rel_threshold"]); used != chosen || mt["test/claims"] != 4 || mt["dev/claims"] != 4 {
		t.Errorf("test read with %s (%v claims), chosen %s", used, mt["test/claims"], chosen)
	}
	if _, ok := mt["dev/oracle_selfrag/rel_threshold"]; !ok {
		t.Errorf("no threshold chosen for oracle_selfrag")
	}

	rec := tinyRecipe(t, "")
	corpus, err := ReadCorpus(filepath.Join(VerifyDir(rec.Data.Dir), "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	claims, err := ReadClaims(filepath.Join(VerifyDir(rec.Data.Dir), "claims_dev.jsonl"), corpus)
	if err != nil {
		t.Fatal(err)
	}
	claims = claims[:4]
	path := filepath.Join(sel, experiment.RunsDir, "dev.selfrag_bm25.decisions.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := parseDecisions(path, b)
	if err != nil || len(ds) != 8 {
		t.Fatalf("%d dev decisions (4 claims x 2), %v", len(ds), err)
	}
	for _, p := range []choice{{1, 0.3}, {2, 0.6}} {
		direct := runWith("dev", nil, nil, p.k, p.threshold)
		got := filepath.Join(t.TempDir(), "assembled.jsonl")
		if err := writePredictions(got, assemble(claims, ds, p.k, p.threshold, false)); err != nil {
			t.Fatal(err)
		}
		testkit.SameFile(t, filepath.Join(direct, experiment.RunsDir, "dev.selfrag_bm25.scifact.jsonl"), got)
	}

	// a resumed run reuses the dev decisions; a damaged file is decoded again, the same bytes
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, damage := range []bool{false, true} {
		if damage {
			if err := os.WriteFile(path, before[:len(before)/2], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var out strings.Builder
		if _, err := experiment.Run(context.Background(), selRec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: sel}); err != nil {
			t.Fatal(err)
		}
		reused := strings.Contains(out.String(), "selfrag_bm25: the dev decisions of "+path+" reused (8)")
		again := strings.Contains(out.String(), "selfrag_bm25: "+path+" is not this decoding")
		if reused == damage || again != damage {
			t.Errorf("damaged %v: reused %v, decoded again %v:\n%s", damage, reused, again, out.String())
		}
		after, err := os.ReadFile(path)
		if err != nil || string(after) != string(before) {
			t.Errorf("damaged %v: the dev decisions after the resume differ (%v)", damage, err)
		}
		mt2, err := experiment.ReadMetrics(sel)
		if err != nil || mt2["dev/selfrag_bm25/top_k"] != mt["dev/selfrag_bm25/top_k"] || mt2["dev/selfrag_bm25/rel_threshold"] != mt["dev/selfrag_bm25/rel_threshold"] {
			t.Errorf("damaged %v: the choice changed on resume (%v)", damage, err)
		}
	}

	// eval_split = "none", a search point: the same choice and dev figures from the same
	// decisions, and no other split read (no metric outside train/ and dev/, no file but dev's)
	point := runWith("none", []int{2, 1}, []float64{0.6, 0, 0.3}, 2, 0.5)
	if o := out.String(); !strings.Contains(o, "train claims (a search point: no split but dev's is read)") || strings.Contains(o, "none claims") {
		t.Errorf("a search point's load line:\n%s", o)
	}
	mp, err := experiment.ReadMetrics(point)
	if err != nil {
		t.Fatal(err)
	}
	nDev := 0
	for key, v := range mp {
		switch {
		case strings.HasPrefix(key, "dev/"):
			nDev++
			if v != mt[key] {
				t.Errorf("search point %s = %v, the selecting run's %v", key, v, mt[key])
			}
		case !strings.HasPrefix(key, "train/"):
			t.Errorf("search point wrote %s = %v: another split was read", key, v)
		}
	}
	if nDev != 6 { // claims; per Self-RAG system: F1, threshold; selfrag_bm25's top_k
		t.Errorf("search point: %d dev metrics, want 6: %v", nDev, mp)
	}
	files, err := os.ReadDir(filepath.Join(point, experiment.RunsDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasPrefix(f.Name(), "dev.") {
			t.Errorf("search point wrote runs/%s", f.Name())
		}
	}
	testkit.SameFile(t, filepath.Join(sel, experiment.RunsDir, "dev.selfrag_bm25.decisions.jsonl"),
		filepath.Join(point, experiment.RunsDir, "dev.selfrag_bm25.decisions.jsonl"))

	// decisions made at threshold 1 (every abstract cut by relevance) are not those of 0.3
	hi := runWith("dev", nil, nil, 2, 1)
	if b, err = os.ReadFile(filepath.Join(hi, experiment.RunsDir, "dev.selfrag_bm25.decisions.jsonl")); err != nil {
		t.Fatal(err)
	}
	hds, err := parseDecisions(path, b)
	if err != nil {
		t.Fatal(err)
	}
	bm := bm25(corpus)
	ranked, err := retrieve(claims, 2, bm.Search)
	if err != nil {
		t.Fatal(err)
	}
	want := func(cl Claim) []int { return ranked[cl.ID] }
	if !decodedAs(ds, claims, want, 0) || !decodedAs(hds, claims, want, 1) {
		t.Errorf("decisions not recognised as decoded at their own threshold")
	}
	if decodedAs(hds, claims, want, 0.3) || decodedAs(ds[:7], claims, want, 0) {
		t.Errorf("decisions at threshold 1, or one short, taken for threshold 0.3's")
	}
}

// TestChooseOnGrid: hand-made decisions of three claims (one NEI) over two ranks, scored at
// every (k, threshold): abstract Label-Only F1 0.4, 0.5, 0.667, 0.667 at k = 1 and 0.571, 0.8,
// 1, 1 at k = 2; the first best (k = 2, threshold 0.7) is chosen, not the tie after it; the
// oracle (every abstract read) has one k.
func TestChooseOnGrid(t *testing.T) {
	sup, con := eval.Support, eval.Contradict
	gold := []eval.SciFactClaim{
		{ID: 1, Evidence: map[int]eval.SciFactGoldAbstract{10: {Label: sup, Sets: [][]int{{0}}}}},
		{ID: 2, Evidence: map[int]eval.SciFactGoldAbstract{20: {Label: con, Sets: [][]int{{1}}}}},
		{ID: 3, Evidence: map[int]eval.SciFactGoldAbstract{}},
	}
	claims := []Claim{{ID: 1}, {ID: 2}, {ID: 3}}
	d := func(id, doc int, l eval.VerifyLabel, pRel float64) decision {
		return decision{ID: id, Doc: doc, Label: l, Sentences: []int{0}, PRelevant: pRel, PSup: 0.5, PCon: 0.3, PNoSupp: 0.2}
	}
	ds := []decision{d(1, 11, sup, 0.4), d(1, 10, sup, 0.9), d(2, 20, con, 0.8), d(2, 21, sup, 0.3), d(3, 30, sup, 0.5), {ID: 3, Doc: 31, PRelevant: 0.1}}
	best, f1, tsv, err := chooseOnGrid(gold, claims, ds, []int{1, 2}, []float64{0, 0.5, 0.7, 0.75}, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range strings.Split(strings.TrimSpace(string(tsv)), "\n")[1:] {
		f := strings.Split(row, "\t")
		got = append(got, f[0]+"/"+f[1]+"="+f[2])
	}
	want := []string{"1/0=0.400000", "1/0.5=0.500000", "1/0.7=0.666667", "1/0.75=0.666667", "2/0=0.571429", "2/0.5=0.800000", "2/0.7=1.000000", "2/0.75=1.000000"}
	if !slices.Equal(got, want) {
		t.Errorf("grid %v\nwant %v", got, want)
	}
	if best != (choice{k: 2, threshold: 0.7}) || f1 != 1 {
		t.Errorf("chose %+v (F1 %v), want k 2, threshold 0.7 (F1 1)", best, f1)
	}
	best, f1, tsv, err = chooseOnGrid(gold, claims, ds, []int{1, 2}, []float64{0, 0.7}, true)
	if err != nil || best != (choice{k: 2, threshold: 0.7}) || f1 != 1 || strings.Count(string(tsv), "\n") != 3 {
		t.Errorf("oracle: chose %+v (F1 %v, %v):\n%s", best, f1, err, tsv)
	}
}

// TestEvaluationResumes: a finished run resumed scores each system whose done marker matches
// from its files (the marker's seconds come back in metrics.json), reads again a system whose
// marker is missing or was made with other settings, and ends with the same prediction files.
func TestEvaluationResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	rec := tinyRecipe(t, "")
	Of(rec).Systems = []string{"closedbook_bm25", "plain_bm25", "selfrag_bm25"}
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	path := func(sys, suffix string) string { return filepath.Join(full, experiment.RunsDir, "dev."+sys+"."+suffix) }
	before := map[string][]byte{}
	for _, sys := range Of(rec).Systems {
		b, err := os.ReadFile(path(sys, "scifact.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		before[sys] = b
	}
	// closedbook_bm25: kept, its seconds set to a mark; plain_bm25: marker gone (killed before
	// it); selfrag_bm25: marker of another top_k.
	if err := os.WriteFile(path("closedbook_bm25", "done.json"), []byte(`{"claims": 4, "top_k": 2, "rel_threshold": 0, "seconds": 12345}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path("plain_bm25", "done.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("selfrag_bm25", "done.json"), []byte(`{"claims": 4, "top_k": 3, "rel_threshold": 0, "seconds": 12345}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: full})
	if err != nil || resumed != full {
		t.Fatalf("resume: %v (%s)", err, resumed)
	}
	mt, err := experiment.ReadMetrics(full)
	if err != nil {
		t.Fatal(err)
	}
	for sys, reused := range map[string]bool{"closedbook_bm25": true, "plain_bm25": false, "selfrag_bm25": false} {
		if got := mt["dev/"+sys+"/seconds"] == 12345; got != reused {
			t.Errorf("%s: scored from its files %v, want %v (seconds %v)\n%s", sys, got, reused, mt["dev/"+sys+"/seconds"], out.String())
		}
		b, err := os.ReadFile(path(sys, "scifact.jsonl"))
		if err != nil || string(b) != string(before[sys]) {
			t.Errorf("%s: predictions after the resume differ (%v)", sys, err)
		}
		if _, err := os.Stat(path(sys, "done.json")); err != nil {
			t.Errorf("%s: no done marker after the resume: %v", sys, err)
		}
	}
}

// TestTrainPairs: every passage of a gold evidence abstract is a pair (the one holding the
// rationale labelled, the other NOT ENOUGH INFO), a retrieved abstract that is evidence is not
// repeated, and each other retrieved abstract gives one passage, NOT ENOUGH INFO, the same on
// every call.
func TestTrainPairs(t *testing.T) {
	f, _ := testFormat(t)
	two := &Doc{ID: 5, Title: "T", Sents: []string{"Aspirin helps.", "It does.", "A third sentence here that is long enough to be cut off by the budget."}}
	other := &Doc{ID: 7, Title: "T", Sents: []string{strings.Repeat("a very long first sentence ", 20), "second"}}
	one := &Doc{ID: 9, Title: "T", Sents: []string{"Short."}}
	corpus := &Corpus{ByID: map[int]*Doc{5: two, 7: other, 9: one}, Order: []*Doc{two, other, one}}
	s := &split{claims: []Claim{{ID: 1, Text: "Aspirin works."}},
		gold: map[int]eval.SciFactClaim{1: {ID: 1, Evidence: map[int]eval.SciFactGoldAbstract{5: {Label: eval.Support, Sets: [][]int{{2}}}}}}}
	got := trainPairs(f, s, map[int][]int{1: {7, 5, 9}}, corpus)
	var desc []string
	for _, p := range got {
		desc = append(desc, fmt.Sprintf("%d %v %q %v", p.doc.ID, p.w, p.gold.label, p.gold.sents))
	}
	ws := f.windows(other)
	if len(ws) != 2 {
		t.Fatalf("doc 7: %d passages, want 2", len(ws))
	}
	want := []string{`5 {0 2} "" []`, `5 {2 3} "SUPPORT" [2]`, fmt.Sprintf(`7 %v "" []`, ws[pickPassage(1, 7, 2)]), `9 {0 1} "" []`}
	if !slices.Equal(desc, want) {
		t.Errorf("pairs\n%v\nwant\n%v", desc, want)
	}
	again := trainPairs(f, s, map[int][]int{1: {7, 5, 9}}, corpus)
	if len(again) != len(got) || again[2].w != got[2].w {
		t.Errorf("not deterministic")
	}
	// over SciFact-sized ids every passage of a three-passage abstract is picked, about a third each
	count := [3]int{}
	for c := range 300 {
		for d := range 10 {
			count[pickPassage(c*37+1, 4000000+d*7919, 3)]++
		}
	}
	for i, n := range count {
		if n < 850 || n > 1150 {
			t.Errorf("passage %d picked %d of 3000 times", i, n)
		}
	}
}

// TestCombinePlain: an abstract's plain verdict from its passages' answers, by hand: the first
// labelled passage decides, passages with the other label or none add nothing, rationale
// indices outside their passage are dropped; all abstaining abstains.
func TestCombinePlain(t *testing.T) {
	ws := []window{{0, 3}, {3, 5}, {5, 8}}
	for _, c := range []struct {
		answers []string
		label   eval.VerifyLabel
		sents   []int
		window  int
	}{
		{[]string{" none\nLabel: NOT ENOUGH INFO", " 3, 4\nLabel: SUPPORT", " 6, 1\nLabel: SUPPORT"}, eval.Support, []int{3, 4, 6}, 1},
		{[]string{" 2\nLabel: CONTRADICT", " 3\nLabel: SUPPORT", " 7\nLabel: CONTRADICT"}, eval.Contradict, []int{2, 7}, 0},
		{[]string{" none\nLabel: NOT ENOUGH INFO", " 4\nLabel: MAYBE", " none\nLabel: NOT ENOUGH INFO"}, "", nil, 0},
		{[]string{" 9, 0\nLabel: SUPPORT", "", ""}, eval.Support, []int{0}, 0},
	} {
		v := combinePlain(c.answers, ws)
		if v.label != c.label || !slices.Equal(v.sents, c.sents) || v.window != c.window || v.passages != 3 || v.text != c.answers[c.window] {
			t.Errorf("%q: %q %v passage %d of %d (%q), want %q %v passage %d", c.answers, v.label, v.sents, v.window, v.passages, v.text, c.label, c.sents, c.window)
		}
	}
}
