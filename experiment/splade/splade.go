// Package splade is the recipe kind "splade": learned sparse retrieval (Formal et al. 2021,
// SPLADE v2 / SPLADE++ max pooling) from a BERT checkpoint (model.init_from, e.g.
// all-MiniLM-L6-v2) with an MLM head tied to its word embeddings (model.Splade), trained with
// the splade loss (InfoNCE over in-batch and mined BM25 hard negatives on the sparse dot
// product, plus FLOPS on queries and passages with a quadratic warm-up) or, from a
// cross-encoder teacher's scores (loss.teacher, computed once and cached as the retriever
// caches them: retriever.PrepareTeacher), splade_margin_mse or splade_kl_distill with the same
// FLOPS terms; checkpointed and resumed as every kind; evaluated through an inverted index of
// the top-k pruned passage vectors (index.Sparse, written atomically with a manifest under
// <run>/index/splade) against BM25 on the eval splits, with the vectors' sizes, the FLOPS and
// the query latency.
//
// Not here: the model (model.Splade), the losses (losses.SpladeLoss, SpladeMarginMSE,
// SpladeKLDistill), the teacher's scores and their cache (retriever.PrepareTeacher), the index
// (index.Sparse), the sentence-transformers export (export).
package splade

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/retriever"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
)

func init() {
	experiment.Register(KindName, run, configs.KindSpec{
		Sections: []string{"data", "tokenizer", "model", "loss", "sampler", "train", "index", "eval"},
		Losses:   []string{"splade", "splade_margin_mse", "splade_kl_distill"},
		Own:      []configs.Section{section},
		Check:    configs.WarmupWithinSteps,
	})
}

// PhaseName is the training phase's name (log lines, checkpoints).
const PhaseName = "train"

// IndexDir is where the run writes its inverted index.
const IndexDir = "index/splade"

// streamTrain seeds the training phase's dropout (XORed into the seed), as the bi-encoder's.
const streamTrain = biencoder.StreamTrain

// spladeRun is the state a run hands from stage to stage.
type spladeRun struct {
	rec  *configs.Recipe
	c    *Config
	o    experiment.Options
	seed uint64
	loss losses.Spec // loss.name: splade, or a distillation loss (Teacher set)

	ds       *data.Dataset
	passages []string
	tok      *tokenize.Tokenizer
	bm25     *index.BM25 // the mining's, and the teacher's with loss.teacher_bm25_weight
	smp      *sampler.Sampler
	dir      string
	m        *model.BiEncoder
	s        *model.Splade
	cfg      export.SpladeConfig
	lens     biencoder.Lengths
	zero     *ranking // the model before training (eval.systems "zeroshot")
	trainSec float64  // the train phase's seconds over every segment (metrics.json "train/seconds")
}

func run(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	r := &spladeRun{rec: rec, c: Of(rec), o: o, seed: uint64(rec.Seed)}
	if o.ResumeDir != "" && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		return o.ResumeDir, nil
	}
	for _, stage := range []func() error{r.load, r.open, r.zeroShot, func() error { return r.train(ctx) }, r.evaluate} {
		if err := stage(); err != nil {
			return r.dir, err
		}
	}
	return r.dir, nil
}

// load resolves model.init_from, reads the judged splits and the corpus, prepares the tokenizer
// and mines the training examples from BM25's ranking (before the run directory exists).
func (r *spladeRun) load() error {
	rec, o := r.rec, r.o
	if rec.IsSet("loss.similarity") && rec.Loss.Similarity != "dot" {
		return rec.KeyError("loss.similarity", "%q, but SPLADE scores sparse vectors by their dot product; set \"dot\" or drop the key", rec.Loss.Similarity)
	}
	var err error
	if r.loss, err = losses.Lookup(rec.Loss.Name); err != nil {
		return rec.KeyError("loss.name", "%v", err)
	}
	if err := experiment.ResolveInitFrom(rec, o.Out); err != nil {
		return err
	}
	if rec.Model.Encoder != model.EncoderTransformer || !rec.Model.SharedTowers {
		return rec.KeyError("model.init_from", "SPLADE needs one BERT transformer tower for queries and passages (encoder %q, shared towers %v)", rec.Model.Encoder, rec.Model.SharedTowers)
	}
	var extra []string // the dev split the pruning is chosen on
	if r.c.selecting() {
		extra = append(extra, rec.Data.DevSplit)
	}
	if r.ds, r.passages, err = experiment.LoadPassages(rec, extra...); err != nil {
		return err
	}
	if r.tok, err = experiment.PrepareTokenizer(rec, o.ResumeDir, r.passages, o.Out); err != nil {
		return err
	}
	r.bm25 = index.NewBM25(r.ds.Corpus.IDs, r.passages, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	if rec.Train.Steps > 0 {
		if r.smp, _, err = experiment.MineSampler(rec, r.ds, experiment.BM25Rank(r.bm25), r.passages, nil, r.seed); err != nil {
			return err
		}
	}
	return nil
}

// open creates (or reopens) the run directory, saves the tokenizer and builds the model:
// model.init_from's encoder with the identity-initialised MLM head, or the latest checkpoint of
// a resumed run.
func (r *spladeRun) open() error {
	rec, o := r.rec, r.o
	var err error
	if r.dir, err = experiment.PrepareRunDir(rec, o); err != nil {
		return err
	}
	if r.tok, _, err = experiment.SaveTokenizer(r.tok, r.dir, o.ResumeDir != ""); err != nil {
		return err
	}
	enc := biencoder.EncoderConfig(rec, r.tok.VocabSize())
	if r.m, err = model.NewBiEncoder(enc, true, r.seed); err != nil {
		return err
	}
	if r.s, err = model.NewSplade(r.m.Query, r.c.DecoderBiasInit); err != nil {
		return err
	}
	r.lens = biencoder.Lengths{Query: rec.Tokenizer.QueryLength(), Passage: rec.Tokenizer.MaxLength}
	r.cfg = export.SpladeConfig{Kind: KindName, Encoder: enc, MaxLength: r.lens.Passage, QueryMaxLength: r.lens.Query,
		TopKQuery: r.c.TopKQuery, TopKPassage: r.c.TopKPassage, DecoderBiasInit: r.c.DecoderBiasInit}
	if rec.Model.InitFrom != "" {
		if err := experiment.InitFrom(r.m, rec.Model.InitFrom, o.Out); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.Out, "splade: MLM head over %d layers, H = %d, V = %d (decoder tied to the word embeddings; transform dense = I, LayerNorm 1/0, decoder bias %g); lambda_q %g, lambda_d %g, FLOPS warm-up %d steps\n",
		enc.Layers, enc.Hidden, enc.Vocab, r.c.DecoderBiasInit, r.c.LambdaQ, r.c.LambdaD, r.c.FlopsWarmup)
	return nil
}

// train runs the training phase (from the latest checkpoint of a resumed run).
func (r *spladeRun) train(ctx context.Context) error {
	rec, o, tr := r.rec, r.o, r.rec.Train
	ph := experiment.Phase{Name: PhaseName, Steps: tr.Steps, LR: tr.LR, Warmup: tr.WarmupSteps, CheckpointEvery: tr.CheckpointEvery,
		Params: r.s.Params(), Config: r.cfg}
	if o.ResumeDir != "" && experiment.HasCheckpoint(r.dir) {
		ck, err := checkpoints.Load(r.dir)
		if err != nil {
			return err
		}
		if err := experiment.SetParams(r.s.Params(), ck.Params); err != nil {
			return fmt.Errorf("%s: %w", ck.Dir, err)
		}
		ph.Start, ph.Optimizer, ph.SecondsBefore = ck.Trainer.Step, ck.Optimizer, ck.Trainer.TrainSeconds
		r.trainSec = ck.Trainer.TrainSeconds
		fmt.Fprintf(o.Out, "resume: %s at step %d\n", ck.Dir, ck.Trainer.Step)
	}
	lg, err := experiment.OpenRunLog(r.dir, o.ResumeDir != "")
	if err != nil {
		return err
	}
	defer lg.Close()
	if tr.Steps == 0 { // the untrained model is checkpoint 0: its index can be searched, the model exported
		env := &experiment.Env{Rec: rec, Opts: o, Dir: r.dir, Seed: r.seed, TokenizerPath: filepath.Join(r.dir, "tokenizer.json"), Log: lg}
		return env.SaveZeroStep(PhaseName, r.s.Params(), r.cfg)
	}
	if ph.Start >= tr.Steps {
		return nil
	}
	opts := taskOptions{B: tr.BatchSize, N: tr.BatchSize * (1 + rec.Sampler.HardNegatives), Lens: r.lens,
		Loss: r.loss, Temperature: rec.Loss.Temperature, LambdaQ: r.c.LambdaQ, LambdaD: r.c.LambdaD, FlopsWarmup: r.c.FlopsWarmup,
		Masked: rec.Sampler.FalseNegatives == "mask", Seed: r.seed ^ streamTrain, Next: r.smp.Batch}
	if r.loss.Teacher {
		teacher, err := retriever.PrepareTeacher(rec, r.smp, r.ds, r.passages, r.bm25, r.dir, o)
		if err != nil {
			return err
		}
		opts.Teacher, opts.TeacherTemperature, opts.InfoNCEWeight = teacher.BatchScores, rec.Loss.TeacherTemperature, rec.Loss.InfoNCEWeight
		// a distillation loss compares each query with its own candidates: the false-negative
		// mask is read only by its InfoNCE term
		opts.Masked = opts.Masked && opts.InfoNCEWeight > 0
		fmt.Fprintf(o.Out, "splade: loss %s from the teacher's scores (teacher temperature %g) + FLOPS; infonce_weight %g\n", r.loss.Name, opts.TeacherTemperature, opts.InfoNCEWeight)
	}
	t, err := newTask(r.m, r.s, r.tok, opts)
	if err != nil {
		return err
	}
	defer t.Close()
	ph.Task = t
	ph.State = func(done int, ts *checkpoints.TrainerState) {
		ts.Epoch, ts.SamplerPosition = r.smp.Epoch(done), done*tr.BatchSize
	}
	env := &experiment.Env{Rec: rec, Opts: o, Dir: r.dir, Seed: r.seed, TokenizerPath: filepath.Join(r.dir, "tokenizer.json"), Log: lg}
	_, r.trainSec, err = env.RunPhase(ctx, ph)
	return err
}

// setDropout seeds the model's dropout masks of step (a function of the seed and the step only,
// so a resumed run draws the same ones).
func setDropout(m *model.BiEncoder, seed uint64, step int) {
	m.SetRNG(rand.New(rand.NewPCG(seed, uint64(step))))
}

// since is the seconds since t.
func since(t time.Time) float64 { return time.Since(t).Seconds() }
