// Package scifactverify is the recipe kind scifact_verify: readers of real SciFact claims
// (Wadden et al., EMNLP 2020) built on a pretrained LLaMA (SmolLM2-135M-Instruct) fine-tuned
// with LoRA (Hu et al., 2021), scored by SciFact's official metrics (eval.ScoreSciFact):
//
//   - the Self-RAG reader (Asai et al., ICLR 2024): trained on one sequence per (claim,
//     abstract) pair (the claim's gold evidence abstracts and its top train_k BM25 abstracts)
//     holding the retrieval decision, a relevance token, the rationale sentence indices and a
//     support token (format.go: the reflection tokens mapped onto existing words); the gold
//     annotation plays Self-RAG's critic. Decoding is Self-RAG's short-form decoding: each of
//     the top_k retrieved abstracts is scored by its reflection-token probabilities, and an
//     abstract is emitted with its label and rationale only when p([Relevant]) >= rel_threshold
//     and the support group's argmax is [Fully supported] or [Contradicted]; otherwise the
//     reader abstains (NOT ENOUGH INFO: nothing emitted);
//   - the plain reader: the same pairs, the same LoRA, answering "Rationale: ...\nLabel: ..."
//     with no reflection tokens, over the top-1 abstract;
//   - closed-book: the instruct model, no fine-tuning, asked whether the claim is true; its
//     label is attached to the retriever's top-1 abstract with no rationale;
//   - oracle: both readers over the claim's cited abstracts (cited_doc_ids).
//
// Retrieval is over all abstracts (SciFact's open setting): BM25 in-process (Lucene's
// formula, title + sentences), or a MiniLM retriever's TREC run (scifact_verify.minilm_run).
// The run writes runs/<split>.<system>.scifact.jsonl per system (SciFact's prediction format),
// runs/<split>.<system>.decisions.jsonl (per claim and abstract read: the reflection-token
// probabilities, the decoded answer, the emitted label), runs/<split>.<system>.done.json (the
// claims and settings it was read with: a resumed run scores such a system from its files
// instead of decoding it again) and metrics.json with <split>/<system>/<metric>/{precision,
// recall,f1} for the four official metrics. Training has two phases, "plain" and "selfrag",
// checkpointed in the run's plain/ and selfrag/ directories (export.ReaderLMConfig: `train
// export -run <run>/selfrag`), each resumed exactly. `train verify` runs a trained reader on a file of claims (Verify).
package scifactverify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/model"
)

// Kind is the recipe kind.
const Kind = "scifact_verify"

// The training phases, and the run subdirectories holding their checkpoints.
const (
	PlainPhase   = "plain"
	SelfRAGPhase = "selfrag"
)

func init() {
	experiment.Register(Kind, run, configs.KindSpec{Sections: []string{"data", "train"}, Own: []configs.Section{section}})
}

// Memory estimates the memory of training a reader (model.EstimateLlamaTraining at
// train.batch_size sequences of max_length) from init_from's header alone.
func Memory(rec *configs.Recipe) (model.MemoryEstimate, string, error) {
	c := Of(rec)
	f, err := gguf.Open(c.InitFrom)
	if err != nil {
		return model.MemoryEstimate{}, "", fmt.Errorf("scifact_verify.init_from: %w", err)
	}
	cfg, err := model.LlamaConfigGGUF(f)
	if err != nil {
		return model.MemoryEstimate{}, "", fmt.Errorf("scifact_verify.init_from: %w", err)
	}
	lc := c.lora()
	keys := fmt.Sprintf("scifact_verify.lora_rank = %d, train.batch_size = %d, scifact_verify.max_length = %d (init_from: H = %d, %d layers, FFN %d, V = %d)",
		lc.Rank, rec.Train.BatchSize, c.MaxLength, cfg.Hidden, cfg.Layers, cfg.FFN, cfg.Vocab)
	return model.EstimateLlamaTraining(cfg, &lc, rec.Train.BatchSize*c.MaxLength, c.MaxLength), keys, nil
}

// loaded is what a run reads before its run directory: the model, the data and the rankings.
type loaded struct {
	m      *model.Llama
	f      *format
	corpus *Corpus
	train  *split
	evals  *split
	// rankings of the eval claims by retriever ("bm25", "minilm"), and of the train claims by BM25
	ranked    map[string]map[int][]int
	trainRank map[int][]int
	// the dev claims and their rankings, when the Self-RAG decoder's settings are chosen there
	dev       *split
	devRanked map[string]map[int][]int
}

func load(rec *configs.Recipe, out io.Writer) (*loaded, error) {
	c := Of(rec)
	m, tok, err := export.OpenLlamaGGUF(c.InitFrom)
	if err != nil {
		return nil, fmt.Errorf("scifact_verify.init_from: %w", err)
	}
	if c.MaxLength > m.Cfg.MaxPosition {
		return nil, fmt.Errorf("scifact_verify.max_length = %d exceeds the model's context of %d tokens", c.MaxLength, m.Cfg.MaxPosition)
	}
	l := &loaded{m: m}
	if l.f, err = newFormat(tok, c.AbstractTokens, c.MaxLength); err != nil {
		return nil, err
	}
	if l.corpus, err = ReadCorpus(filepath.Join(VerifyDir(rec.Data.Dir), "corpus.jsonl")); err != nil {
		return nil, err
	}
	if l.train, err = readSplit(rec.Data.Dir, rec.Data.TrainSplit, l.corpus); err != nil {
		return nil, err
	}
	bm := bm25(l.corpus)
	if l.trainRank, err = retrieve(l.train.claims, c.TrainK, bm.Search); err != nil {
		return nil, err
	}
	l.evals = &split{}
	if c.EvalSplit != searchPoint {
		if l.evals, l.ranked, err = readRanked(rec, c.EvalSplit, l.corpus, bm); err != nil {
			return nil, err
		}
	}
	if c.selecting() {
		if l.dev, l.devRanked, err = readRanked(rec, rec.Data.DevSplit, l.corpus, bm); err != nil {
			return nil, err
		}
	}
	evals := fmt.Sprintf(", %d %s claims", len(l.evals.claims), c.EvalSplit)
	if c.EvalSplit == searchPoint {
		evals = " (a search point: no split but dev's is read)"
	}
	fmt.Fprintf(out, "scifact_verify: %s (%d layers, H = %d); %d abstracts; %d train claims%s\n",
		c.InitFrom, m.Cfg.Layers, m.Cfg.Hidden, len(l.corpus.Order), len(l.train.claims), evals)
	if l.dev != nil {
		fmt.Fprintf(out, "scifact_verify: the Self-RAG decoder's top_k and rel_threshold chosen on %d %s claims\n", len(l.dev.claims), rec.Data.DevSplit)
	}
	return l, nil
}

// readRanked reads the claims of split name (the first max_eval_claims when set) and their
// rankings to the config's depth: BM25, and minilm_run ("{split}" replaced by name) when a
// *_minilm system is asked for.
func readRanked(rec *configs.Recipe, name string, corpus *Corpus, bm *index.BM25) (*split, map[string]map[int][]int, error) {
	c := Of(rec)
	s, err := readSplit(rec.Data.Dir, name, corpus)
	if err != nil {
		return nil, nil, err
	}
	if n := c.MaxEvalClaims; n > 0 && n < len(s.claims) {
		s.claims = s.claims[:n]
	}
	ranked := map[string]map[int][]int{}
	if ranked["bm25"], err = retrieve(s.claims, c.depth(), bm.Search); err != nil {
		return nil, nil, err
	}
	if c.wants(func(s string) bool { return strings.HasSuffix(s, "_minilm") }) {
		if c.MinilmRun == "" {
			return nil, nil, fmt.Errorf("scifact_verify.minilm_run: required by the *_minilm systems (a MiniLM retriever's TREC run over the corpus)")
		}
		path := strings.ReplaceAll(c.MinilmRun, "{split}", name)
		if ranked["minilm"], err = fromRun(path, s.claims, c.depth(), corpus); err != nil {
			return nil, nil, fmt.Errorf("scifact_verify.minilm_run: %w", err)
		}
	}
	return s, ranked, nil
}

// run trains the plain and the Self-RAG readers (resuming each from its directory's latest
// checkpoint with -resume) and evaluates the asked systems on eval_split, as named stages,
// methods of verifyRun, which carries the run's state from one to the next.
func run(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	r := &verifyRun{rec: rec, c: Of(rec), o: o, resume: o.ResumeDir != "", metrics: map[string]float64{}, readers: map[string]*reader{},
		choices: map[string]choice{}}
	defer r.close()
	err := experiment.RunStages(
		r.load,                               // the memory estimate, init_from, the corpus, the claims and their rankings
		r.sequences,                          // the training pairs as the plain and the Self-RAG readers' sequences
		r.open,                               // the run directory, the log
		func() error { return r.train(ctx) }, // the readers the systems need; the instruct model (closed-book)
		func() error { return r.selectOnDev(ctx) }, // the Self-RAG decoder's top_k and rel_threshold chosen on dev
		func() error { return r.evaluate(ctx) },    // every system on eval_split: predictions, decisions, metrics.json
	)
	return r.dir, err
}

// verifyRun is the state a scifact_verify run hands from stage to stage.
type verifyRun struct {
	rec     *configs.Recipe
	c       *Config
	o       experiment.Options
	resume  bool
	l       *loaded
	seqs    map[string][]seq // the training sequences of each reader (PlainPhase, SelfRAGPhase)
	dir     string
	env     *experiment.Env
	readers map[string]*reader
	choices map[string]choice // Self-RAG systems' settings chosen on dev (selectOnDev)
	metrics map[string]float64
}

// load checks the memory estimate and reads the model, the data and the rankings.
func (r *verifyRun) load() error {
	e, keys, err := Memory(r.rec)
	if err != nil {
		return err
	}
	if err := experiment.CheckEstimate(r.rec, r.o.Out, e, keys); err != nil {
		return err
	}
	r.l, err = load(r.rec, r.o.Out)
	return err
}

// sequences lays out every training pair (trainPairs: passages of the gold evidence abstracts
// and of the top train_k BM25 abstracts of each claim) as a plain and a Self-RAG sequence.
func (r *verifyRun) sequences() error {
	l := r.l
	pairs := trainPairs(l.f, l.train, l.trainRank, l.corpus)
	r.seqs = map[string][]seq{}
	evidence := 0
	for _, p := range pairs {
		if p.gold.label != "" {
			evidence++
		}
		a, err := l.f.plainSeq(p.claim.Text, p.doc, p.w, p.gold)
		if err != nil {
			return err
		}
		b, err := l.f.selfragSeq(p.claim.Text, p.doc, p.w, p.gold)
		if err != nil {
			return err
		}
		r.seqs[PlainPhase], r.seqs[SelfRAGPhase] = append(r.seqs[PlainPhase], a), append(r.seqs[SelfRAGPhase], b)
	}
	fmt.Fprintf(r.o.Out, "scifact_verify: %d training passages (every passage of the gold evidence abstracts, one of each of the top %d BM25 others per claim), %d holding rationale sentences\n",
		len(pairs), r.c.TrainK, evidence)
	l.f.cut.report(r.o.Out, "scifact_verify: training sequences")
	return nil
}

// open creates (or reopens) the run directory and opens its log (the phases' checkpoints live
// in plain/ and selfrag/).
func (r *verifyRun) open() error {
	dir, err := experiment.PrepareRunDir(r.rec, r.o)
	if err != nil {
		return err
	}
	r.dir = dir
	lg, err := experiment.OpenRunLog(dir, r.resume, filepath.Join(dir, PlainPhase), filepath.Join(dir, SelfRAGPhase))
	if err != nil {
		return err
	}
	r.env = &experiment.Env{Rec: r.rec, Opts: r.o, Dir: dir, Seed: uint64(r.rec.Seed), Log: lg}
	return nil
}

// train trains the readers the systems need (plain_*, oracle_plain; selfrag_*, oracle_selfrag)
// and adds the instruct model as the closed-book reader.
func (r *verifyRun) train(ctx context.Context) error {
	c := r.c
	needs := map[string]bool{
		PlainPhase:   c.wants(func(s string) bool { return strings.HasPrefix(s, "plain_") || s == "oracle_plain" }),
		SelfRAGPhase: c.wants(func(s string) bool { return strings.HasPrefix(s, "selfrag_") || s == "oracle_selfrag" }),
	}
	for _, name := range []string{PlainPhase, SelfRAGPhase} {
		if !needs[name] {
			continue
		}
		merged, loss, seconds, err := trainReader(ctx, r.env, r.l, name, r.seqs[name], r.resume)
		if err != nil {
			return err
		}
		r.metrics["train/"+name+"/last_loss"], r.metrics["train/"+name+"/seconds"] = loss, seconds
		dec, err := model.NewLlamaDecoder(merged)
		if err != nil {
			return err
		}
		r.readers[name] = &reader{f: r.l.f, dec: dec, relThreshold: c.RelThreshold}
	}
	base, err := model.NewLlamaDecoder(r.l.m) // the instruct model, no adapters: closed-book
	if err != nil {
		return err
	}
	r.readers["closedbook"] = &reader{f: r.l.f, dec: base}
	return nil
}

// evaluate runs every system of scifact_verify.systems on the eval claims, prints the table of
// the four official metrics and writes metrics.json.
func (r *verifyRun) evaluate(ctx context.Context) error {
	c := r.c
	if c.EvalSplit == searchPoint { // a search point: the dev choice (selectOnDev) is its result
		return experiment.WriteMetrics(r.dir, r.metrics)
	}
	var gold []eval.SciFactClaim
	for _, cl := range r.l.evals.claims {
		gold = append(gold, r.l.evals.gold[cl.ID])
	}
	var rows []eval.Row
	for _, sys := range c.Systems {
		row, err := r.evaluateSystem(ctx, sys, gold)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	r.metrics[c.EvalSplit+"/claims"] = float64(len(gold))
	r.l.f.cut.report(r.o.Out, "scifact_verify: "+c.EvalSplit+" prompts")
	fmt.Fprintf(r.o.Out, "SciFact %s, %d claims (P, R, F1 micro-averaged over claims):\n%s", c.EvalSplit, len(gold),
		eval.FormatTable([]string{"abstract_label_only P", "abstract_label_only R", "abstract_label_only F1", "abstract_rationalized F1",
			"sentence_selection P", "sentence_selection R", "sentence_selection F1", "sentence_label F1"}, rows))
	return experiment.WriteMetrics(r.dir, r.metrics)
}

// evaluateSystem runs system sys on the eval claims, writes its predictions
// (runs/<split>.<sys>.scifact.jsonl), decisions and done marker, and scores them against gold
// into metrics and a table row. A resumed run scores a system from its files instead when its
// done marker says it was read with the same claims and settings (evaluated).
func (r *verifyRun) evaluateSystem(ctx context.Context, sys string, gold []eval.SciFactClaim) (eval.Row, error) {
	c := r.c
	k, readers := c.TopK, r.readers
	if ch, ok := r.choices[sys]; ok {
		readers, k = withThreshold(r.readers, ch.threshold), max(ch.k, 1)
	}
	want := sysDone{Claims: len(gold), TopK: k}
	if isSelfRAG(sys) {
		want.RelThreshold = readers[SelfRAGPhase].relThreshold
		r.metrics[c.EvalSplit+"/"+sys+"/rel_threshold"] = want.RelThreshold
		if sys != "oracle_selfrag" {
			r.metrics[c.EvalSplit+"/"+sys+"/top_k"] = float64(k)
		}
	}
	preds, seconds, err := r.evaluated(sys, gold, want)
	if err != nil {
		return eval.Row{}, err
	}
	if preds == nil {
		start := time.Now()
		var trace bytes.Buffer
		if preds, err = predict(ctx, sys, readers, r.l, k, r.o.Progress, &trace); err != nil {
			return eval.Row{}, fmt.Errorf("%s: %w", sys, err)
		}
		seconds = time.Since(start).Seconds()
		if err := r.writeSystem(sys, preds, trace.Bytes(), want, seconds); err != nil {
			return eval.Row{}, err
		}
	}
	r.metrics[c.EvalSplit+"/"+sys+"/seconds"] = seconds
	sc, err := eval.ScoreSciFact(gold, preds)
	if err != nil {
		return eval.Row{}, fmt.Errorf("%s: %w", sys, err)
	}
	row := eval.Row{System: sys, Scores: map[string]float64{}}
	for name, p := range map[string]eval.PRF{"abstract_label_only": sc.AbstractLabelOnly, "abstract_rationalized": sc.AbstractRationalized,
		"sentence_selection": sc.SentenceSelection, "sentence_label": sc.SentenceLabel} {
		key := c.EvalSplit + "/" + sys + "/" + name + "/"
		r.metrics[key+"precision"], r.metrics[key+"recall"], r.metrics[key+"f1"] = p.Precision, p.Recall, p.F1
		row.Scores[name+" P"], row.Scores[name+" R"], row.Scores[name+" F1"] = p.Precision, p.Recall, p.F1
	}
	return row, nil
}

// sysDone is a system's done marker, runs/<split>.<system>.done.json, written after its
// predictions and decisions: the claims and settings it was read with and its seconds.
type sysDone struct {
	Claims       int     `json:"claims"`
	TopK         int     `json:"top_k"`
	RelThreshold float64 `json:"rel_threshold"`
	Seconds      float64 `json:"seconds"`
}

// systemPath is the path of one of system sys's files under runs/ (suffix: "scifact.jsonl",
// "decisions.jsonl", "done.json").
func (r *verifyRun) systemPath(sys, suffix string) string {
	return filepath.Join(r.dir, experiment.RunsDir, r.c.EvalSplit+"."+sys+"."+suffix)
}

// writeSystem writes system sys's predictions, decisions and, last, its done marker (each a
// temporary file renamed into place).
func (r *verifyRun) writeSystem(sys string, preds []eval.SciFactPrediction, decisions []byte, d sysDone, seconds float64) error {
	if err := writePredictions(r.systemPath(sys, "scifact.jsonl"), preds); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(r.systemPath(sys, "decisions.jsonl"), decisions); err != nil {
		return err
	}
	d.Seconds = seconds
	return atomicfile.WriteJSON(r.systemPath(sys, "done.json"), d)
}

// evaluated returns, in a resumed run, system sys's predictions read back from its file and its
// seconds when its done marker matches want (the claims and settings; seconds aside), else nil.
func (r *verifyRun) evaluated(sys string, gold []eval.SciFactClaim, want sysDone) ([]eval.SciFactPrediction, float64, error) {
	if !r.resume {
		return nil, 0, nil
	}
	b, err := bounded.ReadFile(r.systemPath(sys, "done.json"), bounded.SmallFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var got sysDone
	if err := json.Unmarshal(b, &got); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", r.systemPath(sys, "done.json"), err)
	}
	seconds := got.Seconds
	if got.Seconds = 0; got != want {
		fmt.Fprintf(r.o.Out, "scifact_verify: %s: read again (its files were made with %+v, now %+v)\n", sys, got, want)
		return nil, 0, nil
	}
	preds, err := eval.ReadSciFactPredictions(r.systemPath(sys, "scifact.jsonl"), gold)
	if err != nil {
		return nil, 0, err
	}
	fmt.Fprintf(r.o.Out, "scifact_verify: %s: scored from the files a run before this one wrote (%d claims)\n", sys, len(preds))
	return preds, seconds, nil
}

// close closes the log.
func (r *verifyRun) close() {
	if r.env != nil {
		r.env.Log.Close()
	}
}

// trainReader trains one reader's fresh LoRA (seeded by the recipe's seed and the phase) on
// seqs, resuming from dir/<name>'s latest checkpoint when resume, and returns the model with
// the adapters merged, the last step's loss and the phase's training seconds.
func trainReader(ctx context.Context, env *experiment.Env, l *loaded, name string, seqs []seq, resume bool) (*model.Llama, float64, float64, error) {
	rec, c := env.Rec, Of(env.Rec)
	lc := c.lora()
	seed := env.Seed ^ map[string]uint64{PlainPhase: 0x706c61696e, SelfRAGPhase: 0x73656c66}[name]
	lora, err := model.NewLlamaLoRA(l.m, lc, seed)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("scifact_verify lora: %w", err)
	}
	lora.RNG = &model.RNG{}
	sub := filepath.Join(env.Dir, name)
	ph := experiment.Phase{Name: name, Steps: rec.Train.Steps, LR: rec.Train.LR, Dir: sub,
		Warmup: experiment.ShortWarmup(rec.Train.WarmupSteps, rec.Train.Steps), CheckpointEvery: rec.Train.CheckpointEvery,
		Params: lora.Params(), Config: export.ReaderLMConfig{Kind: export.KindReaderLM, InitFrom: c.InitFrom, Llama: l.m.Cfg, LoRA: &lc}}
	var loss float64
	if resume && experiment.HasCheckpoint(sub) {
		ts, err := ph.Restore(sub, env.Opts.Out)
		if err != nil {
			return nil, 0, 0, err
		}
		loss = ts.BestMetric // the last step's loss (State below)
	}
	l.m.AttachLoRA(lora)
	defer l.m.AttachLoRA(nil)
	seconds := ph.SecondsBefore
	if ph.Start < ph.Steps {
		task, err := newSeqTask(l.m, rec.Train.BatchSize, seqs, seed)
		if err != nil {
			return nil, 0, 0, err
		}
		ph.Task = task
		ph.State = func(_ int, ts *checkpoints.TrainerState) {
			ts.BestMetric, ts.BestMetricName = task.last, "last_step_loss"
		}
		fmt.Fprintf(env.Opts.Out, "scifact_verify: training the %s reader: %d sequences of at most %d tokens, LoRA rank %d\n",
			name, len(seqs), task.L, lc.Rank)
		if _, seconds, err = env.RunPhase(ctx, ph); err != nil {
			return nil, 0, 0, err
		}
		loss = task.last
	}
	lora.Train = false
	merged, err := l.m.MergeLoRA()
	if err != nil {
		return nil, 0, 0, err
	}
	return merged, loss, seconds, nil
}
