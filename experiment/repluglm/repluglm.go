package repluglm

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/splade"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/tokenize"
)

// KindName is the recipe kind.
const KindName = "replug_lm"

// PhaseName is the training phase's name (log lines, checkpoints).
const PhaseName = "replug"

func init() {
	experiment.Register(KindName, run, configs.KindSpec{
		Sections: []string{"data", "tokenizer", "model", "train", "index", "eval"},
		Own:      []configs.Section{section},
		Check:    configs.WarmupWithinSteps,
	})
}

// lmRun is the state a run hands from stage to stage.
type lmRun struct {
	rec  *configs.Recipe
	c    *Config
	o    experiment.Options
	seed uint64

	ds       *data.Dataset
	passages []string
	tok      *tokenize.Tokenizer
	lm       *model.Llama
	lmTok    *tokenize.GGUFTokenizer
	lmSHA    string
	dir      string
	m        *model.BiEncoder
	cfg      model.BiEncoderConfig

	ids, texts []string        // the datastore's passages (the corpus or its sample)
	x          *ragjoint.Index // their vectors, encoded once before training
	zero       map[string]eval.Run

	claims []string // training claims' ids
	qs     []ragjoint.Question
	cands  [][]int     // per training claim, its k datastore rows
	lmLL   [][]float32 // per training claim, log P_LM(claim | abstract) of its k candidates
}

func run(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	r := &lmRun{rec: rec, c: Of(rec), o: o, seed: uint64(rec.Seed)}
	if o.ResumeDir != "" && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		return o.ResumeDir, nil
	}
	err := experiment.RunStages(r.load, r.open, r.datastore, r.candidates, func() error { return r.score(ctx) },
		func() error { return r.train(ctx) }, r.evaluate)
	return r.dir, err
}

// load resolves model.init_from, reads the judged splits, the corpus and the frozen LM, and
// prepares the bi-encoder's tokenizer.
func (r *lmRun) load() error {
	rec, o := r.rec, r.o
	if err := experiment.ResolveInitFrom(rec, o.Out); err != nil {
		return err
	}
	if rec.Model.Encoder != model.EncoderTransformer {
		return rec.KeyError("model.encoder", "%q: RePlug trains a transformer query tower", rec.Model.Encoder)
	}
	var err error
	if r.ds, r.passages, err = experiment.LoadPassages(rec); err != nil {
		return err
	}
	if r.tok, err = experiment.PrepareTokenizer(rec, o.ResumeDir, r.passages, o.Out); err != nil {
		return err
	}
	if r.lmSHA, err = bounded.SHA256(r.c.LM); err != nil {
		return fmt.Errorf("replug_lm.lm: %w", err)
	}
	if r.lm, r.lmTok, err = export.OpenLlamaGGUF(r.c.LM); err != nil {
		return fmt.Errorf("replug_lm.lm: %w", err)
	}
	ids := r.ds.Qrels[rec.Data.TrainSplit].QueryIDs() // the split's members; its judgments are not read
	if n := r.c.TrainClaims; n > 0 && n < len(ids) {
		ids = ids[:n]
	}
	for _, id := range ids {
		text, ok := r.ds.Queries.Text(id)
		if !ok {
			return fmt.Errorf("%s: train claim %q has no text in the queries", rec.Data.Dir, id)
		}
		r.claims = append(r.claims, id)
		r.qs = append(r.qs, ragjoint.Question{Query: text})
	}
	if len(r.claims) == 0 && rec.Train.Steps > 0 {
		return rec.KeyError("data.train_split", "%q has no claims to train on", rec.Data.TrainSplit)
	}
	fmt.Fprintf(o.Out, "replug_lm: LM %s (%d layers, H = %d, V = %d, context %d), %d training claims, k = %d, gamma = %g, beta = %g\n",
		r.c.LM, r.lm.Cfg.Layers, r.lm.Cfg.Hidden, r.lm.Cfg.Vocab, r.lm.Cfg.MaxPosition, len(r.claims), r.c.TopK, r.c.TauR, r.c.TauLM)
	return nil
}

// open creates (or reopens) the run directory, saves the tokenizer and builds the bi-encoder
// from model.init_from (a resumed run's checkpoint is loaded by train, after the datastore is
// encoded with the initial passage tower).
func (r *lmRun) open() error {
	rec, o := r.rec, r.o
	var err error
	if r.dir, r.tok, _, err = experiment.OpenRunDir(rec, o, r.tok); err != nil {
		return err
	}
	r.cfg = model.BiEncoderConfig{Kind: model.KindBiEncoder, Encoder: biencoder.EncoderConfig(rec, r.tok.VocabSize()), SharedTowers: rec.Model.SharedTowers,
		Similarity: "cosine", Temperature: r.c.TauR, MaxLength: rec.Tokenizer.MaxLength}
	if r.m, err = model.NewBiEncoder(r.cfg.Encoder, r.cfg.SharedTowers, r.seed); err != nil {
		return err
	}
	if rec.Model.InitFrom != "" {
		return experiment.InitFrom(r.m, rec.Model.InitFrom, o.Out)
	}
	return nil
}

// datastore encodes the passages once with the initial passage tower (normalised: cosine) and
// ranks the eval splits with the initial query tower (the zero-shot system).
func (r *lmRun) datastore() error {
	rec, o := r.rec, r.o
	r.ids, r.texts = splade.EvalCorpus(r.ds, r.passages, rec.Eval.Splits, r.c.CorpusSample, r.seed)
	if r.c.CorpusSample > 0 {
		fmt.Fprintf(o.Out, "datastore: %d of %d passages (every judged passage of %v and %d drawn with the seed; replug_lm.corpus_sample): not comparable with the whole corpus\n",
			len(r.ids), r.ds.Corpus.Len(), rec.Eval.Splits, r.c.CorpusSample)
	}
	vecs, cut, err := r.encodeDatastore()
	if err != nil {
		return err
	}
	dim := r.m.Passage.Dim()
	flat, err := index.NewFlat(r.ids, vecs, dim)
	if err != nil {
		return err
	}
	r.x = &ragjoint.Index{IDs: r.ids, Texts: r.texts, Vecs: vecs, Dim: dim, Flat: flat, Row: map[string]int{}, Cosine: true,
		Temperature: r.c.TauR, L: rec.Tokenizer.QueryLength(), PassageCut: cut}
	for i, id := range r.ids {
		r.x.Row[id] = i
	}
	if slices.Contains(rec.Eval.Systems, "zeroshot") {
		if r.zero, err = r.rank(); err != nil {
			return err
		}
	}
	return nil
}

// rank ranks every eval split's claims with the current query tower over the datastore.
func (r *lmRun) rank() (map[string]eval.Run, error) {
	out := map[string]eval.Run{}
	for _, split := range r.rec.Eval.Splits {
		qids := r.ds.Qrels[split].QueryIDs()
		texts := make([]string, len(qids))
		for i, q := range qids {
			texts[i], _ = r.ds.Queries.Text(q)
		}
		qv, err := r.x.EncodeQueries(r.m, r.tok, texts)
		if err != nil {
			return nil, err
		}
		run := eval.Run{}
		for i, hits := range r.x.Flat.SearchBatch(qv, r.rec.Eval.Depth) {
			run[qids[i]] = hits
		}
		out[split] = run
	}
	return out, nil
}

// candidates retrieves each training claim's top k with the initial query tower: fixed for the
// whole training (so each pair is scored by the LM once).
func (r *lmRun) candidates() error {
	if len(r.qs) == 0 {
		return nil
	}
	if r.c.TopK > len(r.ids) {
		return r.rec.KeyError("replug_lm.top_k", "%d, but the datastore holds %d passages", r.c.TopK, len(r.ids))
	}
	texts := make([]string, len(r.qs))
	for i, q := range r.qs {
		texts[i] = q.Query
	}
	qv, err := r.x.EncodeQueries(r.m, r.tok, texts)
	if err != nil {
		return err
	}
	r.cands = make([][]int, len(r.qs))
	for i, hits := range r.x.Flat.SearchBatch(qv, r.c.TopK) {
		for _, h := range hits {
			r.cands[i] = append(r.cands[i], r.x.Row[h.DocID])
		}
		if len(r.cands[i]) != r.c.TopK {
			return fmt.Errorf("claim %s: %d candidates, want k = %d", r.claims[i], len(r.cands[i]), r.c.TopK)
		}
	}
	return nil
}

// report prints the scorer's counts.
func (s *scorer) report(out io.Writer, cached int) {
	fmt.Fprintf(out, "lm: %d (claim, abstract) pairs scored by the LM, %d from %s; cut: %d abstracts to %d tokens, %d claims to %d tokens\n",
		s.pairs, cached, CacheFile, s.cutAbstracts, s.c.AbstractTokens, s.cutClaims, s.c.ClaimTokens)
}

// train runs the RePlug phase (from the latest checkpoint of a resumed run).
func (r *lmRun) train(ctx context.Context) error {
	rec, o, tr := r.rec, r.o, r.rec.Train
	ph := experiment.Phase{Name: PhaseName, Steps: tr.Steps, LR: tr.LR, Warmup: tr.WarmupSteps, CheckpointEvery: tr.CheckpointEvery,
		Params: r.m.Params(), Config: r.cfg}
	if o.ResumeDir != "" {
		if err := experiment.ResumeAt(r.dir, &ph, o.Out); err != nil {
			return err
		}
	}
	lg, err := experiment.OpenRunLog(r.dir, o.ResumeDir != "")
	if err != nil {
		return err
	}
	defer lg.Close()
	env := &experiment.Env{Rec: rec, Opts: o, Dir: r.dir, Seed: r.seed, TokenizerPath: filepath.Join(r.dir, "tokenizer.json"), Log: lg}
	if tr.Steps == 0 {
		return env.SaveZeroStep(PhaseName, r.m.Params(), r.cfg)
	}
	if ph.Start >= tr.Steps {
		return nil
	}
	t, err := newTask(r.m, r.tok, r.x, r.qs, r.cands, r.lmLL, tr.BatchSize, r.c.TauLM, r.seed)
	if err != nil {
		return err
	}
	defer t.Close()
	ph.Task = t
	_, _, err = env.RunPhase(ctx, ph)
	return err
}

// evaluate ranks the eval splits with the trained query tower over the frozen datastore and
// writes runs/<split>.<system>.trec for bm25, zeroshot and replug, and metrics.json.
func (r *lmRun) evaluate() error {
	rec, o := r.rec, r.o
	trained, err := r.rank()
	if err != nil {
		return err
	}
	metrics := map[string]float64{"eval/corpus_passages": float64(len(r.ids)), "replug/top_k": float64(r.c.TopK),
		"replug/tau_r": r.c.TauR, "replug/tau_lm": r.c.TauLM, "replug/train_claims": float64(len(r.claims))}
	var bm25 *index.BM25
	if slices.Contains(rec.Eval.Systems, "bm25") {
		bm25 = index.NewBM25(r.ids, r.texts, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	}
	for _, split := range rec.Eval.Splits {
		qids := r.ds.Qrels[split].QueryIDs()
		var systems []experiment.System
		if bm25 != nil {
			run := eval.Run{}
			for _, q := range qids {
				text, _ := r.ds.Queries.Text(q)
				run[q] = bm25.Search(text, rec.Eval.Depth)
			}
			systems = append(systems, experiment.System{Name: "bm25", Run: run})
		}
		if r.zero != nil {
			systems = append(systems, experiment.System{Name: "zeroshot", Run: r.zero[split]})
		}
		systems = append(systems, experiment.System{Name: "replug", Run: trained[split]})
		rows, err := experiment.EvaluateSystems(r.dir, split, split == rec.Data.TestSplit, r.ds.Qrels[split], systems, rec.Eval.Metrics, metrics)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "\n%s (%d claims, %d passages):\n%s", split, len(qids), len(r.ids), eval.FormatTable(rec.Eval.Metrics, rows))
	}
	return experiment.WriteMetrics(r.dir, metrics)
}
