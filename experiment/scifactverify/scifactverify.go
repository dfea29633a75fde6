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
// probabilities, the decoded answer, the emitted label) and metrics.json with <split>/<system>/<metric>/{precision,recall,f1} for the four official
// metrics. Training has two phases, "plain" and "selfrag", checkpointed in the run's plain/
// and selfrag/ directories (export.ReaderLMConfig: `train export -run <run>/selfrag`), each
// resumed exactly. `train verify` runs a trained reader on a file of claims (Verify).
package scifactverify

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
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
	l := &loaded{m: m, ranked: map[string]map[int][]int{}}
	if l.f, err = newFormat(tok, c.AbstractTokens, c.MaxLength); err != nil {
		return nil, err
	}
	if l.corpus, err = ReadCorpus(filepath.Join(VerifyDir(rec.Data.Dir), "corpus.jsonl")); err != nil {
		return nil, err
	}
	if l.train, err = readSplit(rec.Data.Dir, rec.Data.TrainSplit, l.corpus); err != nil {
		return nil, err
	}
	if l.evals, err = readSplit(rec.Data.Dir, c.EvalSplit, l.corpus); err != nil {
		return nil, err
	}
	if n := c.MaxEvalClaims; n > 0 && n < len(l.evals.claims) {
		l.evals.claims = l.evals.claims[:n]
	}
	bm := bm25(l.corpus)
	k := max(c.TopK, 1)
	if l.trainRank, err = retrieve(l.train.claims, c.TrainK, bm.Search); err != nil {
		return nil, err
	}
	if l.ranked["bm25"], err = retrieve(l.evals.claims, k, bm.Search); err != nil {
		return nil, err
	}
	if c.wants(func(s string) bool { return strings.HasSuffix(s, "_minilm") }) {
		if c.MinilmRun == "" {
			return nil, fmt.Errorf("scifact_verify.minilm_run: required by the *_minilm systems (a MiniLM retriever's TREC run over the corpus)")
		}
		path := strings.ReplaceAll(c.MinilmRun, "{split}", c.EvalSplit)
		if l.ranked["minilm"], err = fromRun(path, l.evals.claims, k, l.corpus); err != nil {
			return nil, fmt.Errorf("scifact_verify.minilm_run: %w", err)
		}
	}
	fmt.Fprintf(out, "scifact_verify: %s (%d layers, H = %d); %d abstracts; %d train claims, %d %s claims\n",
		c.InitFrom, m.Cfg.Layers, m.Cfg.Hidden, len(l.corpus.Order), len(l.train.claims), len(l.evals.claims), c.EvalSplit)
	return l, nil
}

// run trains the plain and the Self-RAG readers (resuming each from its directory's latest
// checkpoint with -resume) and evaluates the asked systems on eval_split.
func run(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	c := Of(rec)
	e, keys, err := Memory(rec)
	if err != nil {
		return "", err
	}
	if err := experiment.CheckEstimate(rec, o.Out, e, keys); err != nil {
		return "", err
	}
	l, err := load(rec, o.Out)
	if err != nil {
		return "", err
	}
	pairs := trainPairs(l.train, l.trainRank, l.corpus)
	seqs := map[string][]seq{}
	for _, p := range pairs {
		a, err := l.f.plainSeq(p.claim.Text, p.doc, p.gold)
		if err != nil {
			return "", err
		}
		b, err := l.f.selfragSeq(p.claim.Text, p.doc, p.gold)
		if err != nil {
			return "", err
		}
		seqs[PlainPhase], seqs[SelfRAGPhase] = append(seqs[PlainPhase], a), append(seqs[SelfRAGPhase], b)
	}
	fmt.Fprintf(o.Out, "scifact_verify: %d training pairs (gold evidence + top %d BM25 per claim)\n", len(pairs), c.TrainK)

	resume := o.ResumeDir != ""
	dir, err := experiment.PrepareRunDir(rec, o)
	if err != nil {
		return "", err
	}
	lg, err := experiment.OpenRunLog(dir, resume, filepath.Join(dir, PlainPhase), filepath.Join(dir, SelfRAGPhase))
	if err != nil {
		return dir, err
	}
	defer lg.Close()
	env := &experiment.Env{Rec: rec, Opts: o, Dir: dir, Seed: uint64(rec.Seed), Log: lg}
	metrics := map[string]float64{}
	readers := map[string]*reader{}
	needs := map[string]bool{
		PlainPhase:   c.wants(func(s string) bool { return strings.HasPrefix(s, "plain_") || s == "oracle_plain" }),
		SelfRAGPhase: c.wants(func(s string) bool { return strings.HasPrefix(s, "selfrag_") || s == "oracle_selfrag" }),
	}
	for _, name := range []string{PlainPhase, SelfRAGPhase} {
		if !needs[name] {
			continue
		}
		merged, loss, seconds, err := trainReader(ctx, env, l, name, seqs[name], resume)
		if err != nil {
			return dir, err
		}
		metrics["train/"+name+"/last_loss"], metrics["train/"+name+"/seconds"] = loss, seconds
		dec, err := model.NewLlamaDecoder(merged)
		if err != nil {
			return dir, err
		}
		readers[name] = &reader{f: l.f, dec: dec, relThreshold: c.RelThreshold}
	}
	base, err := model.NewLlamaDecoder(l.m) // the instruct model, no adapters: closed-book
	if err != nil {
		return dir, err
	}
	readers["closedbook"] = &reader{f: l.f, dec: base}

	var gold []eval.SciFactClaim
	for _, cl := range l.evals.claims {
		gold = append(gold, l.evals.gold[cl.ID])
	}
	var rows []eval.Row
	for _, sys := range c.Systems {
		start := time.Now()
		var trace bytes.Buffer
		preds, err := predict(ctx, sys, readers, l, c.TopK, o.Progress, &trace)
		if err != nil {
			return dir, fmt.Errorf("%s: %w", sys, err)
		}
		metrics[c.EvalSplit+"/"+sys+"/seconds"] = time.Since(start).Seconds()
		path := filepath.Join(dir, experiment.RunsDir, c.EvalSplit+"."+sys+".scifact.jsonl")
		if err := writePredictions(path, preds); err != nil {
			return dir, err
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, experiment.RunsDir, c.EvalSplit+"."+sys+".decisions.jsonl"), trace.Bytes()); err != nil {
			return dir, err
		}
		sc, err := eval.ScoreSciFact(gold, preds)
		if err != nil {
			return dir, fmt.Errorf("%s: %w", sys, err)
		}
		row := eval.Row{System: sys, Scores: map[string]float64{}}
		for name, p := range map[string]eval.PRF{"abstract_label_only": sc.AbstractLabelOnly, "abstract_rationalized": sc.AbstractRationalized,
			"sentence_selection": sc.SentenceSelection, "sentence_label": sc.SentenceLabel} {
			key := c.EvalSplit + "/" + sys + "/" + name + "/"
			metrics[key+"precision"], metrics[key+"recall"], metrics[key+"f1"] = p.Precision, p.Recall, p.F1
			row.Scores[name+" P"], row.Scores[name+" R"], row.Scores[name+" F1"] = p.Precision, p.Recall, p.F1
		}
		rows = append(rows, row)
	}
	metrics[c.EvalSplit+"/claims"] = float64(len(gold))
	fmt.Fprintf(o.Out, "SciFact %s, %d claims (P, R, F1 micro-averaged over claims):\n%s", c.EvalSplit, len(gold),
		eval.FormatTable([]string{"abstract_label_only P", "abstract_label_only R", "abstract_label_only F1", "abstract_rationalized F1",
			"sentence_selection P", "sentence_selection R", "sentence_selection F1", "sentence_label F1"}, rows))
	return dir, experiment.WriteMetrics(dir, metrics)
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
		ck, err := checkpoints.Load(sub)
		if err != nil {
			return nil, 0, 0, err
		}
		if err := experiment.SetParams(ph.Params, ck.Params); err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", ck.Dir, err)
		}
		ph.Start, ph.Optimizer, ph.SecondsBefore = ck.Trainer.Step, ck.Optimizer, ck.Trainer.TrainSeconds
		loss = ck.Trainer.BestMetric // the last step's loss (State below)
		fmt.Fprintf(env.Opts.Out, "resume: %s at step %d\n", ck.Dir, ck.Trainer.Step)
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
