// Package colbert is the recipe kind colbert: a late-interaction retriever (package colbert:
// ColBERT with PyLate's text handling) fine-tuned from model.init_from's BERT body with
// colbert_contrastive (in-batch and BM25 hard negatives) or colbert_kl_distill (a
// cross-encoder teacher's scores, cached as the retriever caches them), checkpointed and resumed
// exactly through experiment.Env.RunPhase; evaluated by exact MaxSim (system colbert) and through
// the PLAID-style index (colbert_plaid, written to plaid/ in the run directory) beside BM25.
// sampler.false_negatives defaults to "defer" for this kind (FalseNegatives: what every colbert
// run did before the kind read the key); "mask" removes an in-batch false negative from
// colbert_contrastive's softmax (losses.ColBERTContrastiveMasked). train.mini_batch_size trains
// each batch by gradient caching (colbert.CachedTask) and train.dynamic_padding pads each batch's
// passages (each chunk's, with caching) to their own length bucket (colbert.BucketedTask), as
// they do for the retriever; both off by default. One package and one registration with its own
// [colbert] table.
package colbert

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/checkpoints"
	cb "github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/retriever"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// Kind is the recipe kind and the checkpoints' config.json kind.
const Kind = cb.Kind

// PhaseName names the training phase in log.jsonl and checkpoints.
const PhaseName = "train"

// PlaidDir is the run directory's PLAID-style index.
const PlaidDir = "plaid"

// StreamTrain seeds the training steps' dropout (XORed into the seed), as the retriever's.
const streamTrain = biencoder.StreamTrain

func init() {
	experiment.Register(Kind, runColBERT, configs.KindSpec{
		Sections: []string{"data", "tokenizer", "model", "loss", "sampler", "train", "index", "eval"},
		Losses:   []string{"colbert_contrastive", "colbert_kl_distill"},
		// the bi-encoder's gradient caching and length buckets, read as the retriever reads them
		Keys:  []string{"train.mini_batch_size", "train.dynamic_padding"},
		Own:   []configs.Section{section},
		Check: configs.WarmupWithinSteps,
	})
}

// runColBERT runs a colbert recipe as named stages, methods of colbertRun, which carries the
// run's state from one to the next: the judged splits, BM25 and the mined sampler are read
// before the run directory exists, so a bad input leaves nothing behind.
func runColBERT(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	r := &colbertRun{rec: rec, c: Of(rec), o: o, seed: uint64(rec.Seed), resume: o.ResumeDir != "", metrics: map[string]float64{}}
	defer r.close()
	if err := r.check(); err != nil {
		return "", err
	}
	if r.resume && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		return o.ResumeDir, nil
	}
	for _, stage := range []func() error{
		r.load,                               // the judged splits, the passages, the tokenizer, BM25
		r.mine,                               // BM25 hard negatives of the training queries: the sampler
		r.open,                               // the run directory, the model from init_from
		r.restore,                            // a resumed run's latest checkpoint, the log
		func() error { return r.train(ctx) }, // colbert_contrastive or colbert_kl_distill
		r.evaluate,                           // exact MaxSim and PLAID beside BM25; metrics.json
	} {
		if err := stage(); err != nil {
			return r.dir, err
		}
	}
	return r.dir, nil
}

// colbertRun is the state a colbert run hands from stage to stage.
type colbertRun struct {
	rec    *configs.Recipe // a copy holding the kind's sampler.false_negatives once check has run
	c      *Config
	o      experiment.Options
	seed   uint64
	resume bool
	loss   losses.Spec

	ds       *data.Dataset
	passages []string
	tok      *tokenize.Tokenizer
	tokPath  string
	bm25     *index.BM25
	smp      *sampler.Sampler
	cfg      cb.Config
	dir      string
	m        *cb.Model
	ph       experiment.Phase
	lg       *trainer.Log
	metrics  map[string]float64
}

// FalseNegatives is the kind's sampler.false_negatives when a recipe leaves the key out:
// "defer" (no batch holds a false negative), what every colbert run did before the kind read
// the key; "mask" lets them in and removes them from colbert_contrastive's softmax
// (losses.ColBERTContrastiveMasked).
const FalseNegatives = "defer"

// check resolves model.init_from, looks up loss.name and takes the kind's default of
// sampler.false_negatives (FalseNegatives) into a copy of the recipe.
func (r *colbertRun) check() error {
	r.rec = withDefaults(r.rec)
	if err := experiment.ResolveInitFrom(r.rec, r.o.Out); err != nil {
		return err
	}
	var err error
	if r.loss, err = losses.Lookup(r.rec.Loss.Name); err != nil {
		return fmt.Errorf("loss.name: %w", err)
	}
	return nil
}

// withDefaults is a copy of rec with the kind's sampler.false_negatives when rec leaves it out.
func withDefaults(rec *configs.Recipe) *configs.Recipe {
	cp := *rec
	if !cp.IsSet("sampler.false_negatives") {
		cp.Sampler.FalseNegatives = FalseNegatives
	}
	return &cp
}

// load reads the judged splits and the passages, prepares the tokenizer and BM25, and checks
// the model's shape.
func (r *colbertRun) load() error {
	rec, c := r.rec, r.c
	var err error
	var extra []string
	if c.selecting() {
		extra = append(extra, rec.Data.DevSplit) // the PLAID-style search settings' grid
	}
	if r.ds, r.passages, err = experiment.LoadPassages(rec, extra...); err != nil {
		return err
	}
	if r.tok, err = experiment.PrepareTokenizer(rec, r.o.ResumeDir, r.passages, r.o.Out); err != nil {
		return err
	}
	r.bm25 = index.NewBM25(r.ds.Corpus.IDs, r.passages, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	r.cfg = cb.Config{Encoder: biencoder.EncoderConfig(rec, r.tok.VocabSize()), Dim: c.Dim, QueryLength: c.QueryLength,
		DocumentLength: c.DocumentLength, AttendExpansion: c.AttendToExpansionTokens}
	return r.cfg.Validate()
}

// mine mines BM25 hard negatives for the training queries (sampler.negative_window, judged
// passages excluded) into the batch sampler.
func (r *colbertRun) mine() error {
	if r.rec.Train.Steps == 0 {
		return nil
	}
	var err error
	r.smp, _, err = experiment.MineSampler(r.rec, r.ds, experiment.BM25Rank(r.bm25), r.passages, nil, r.seed)
	return err
}

// open creates (or reopens) the run directory, saves the tokenizer and builds the model with
// model.init_from's encoder (unless a checkpoint will replace it).
func (r *colbertRun) open() error {
	dir, err := experiment.PrepareRunDir(r.rec, r.o)
	if err != nil {
		return err
	}
	r.dir = dir
	if r.tok, r.tokPath, err = experiment.SaveTokenizer(r.tok, r.dir, r.resume); err != nil {
		return err
	}
	if r.m, err = cb.New(r.cfg, r.seed); err != nil {
		return err
	}
	if r.rec.Model.InitFrom != "" && !(r.resume && experiment.HasCheckpoint(r.dir)) {
		return experiment.InitFrom(r.m.Enc, r.rec.Model.InitFrom, r.o.Out)
	}
	return nil
}

// restore resumes the training phase from a resumed run's latest checkpoint and opens the log.
func (r *colbertRun) restore() error {
	tr := r.rec.Train
	r.ph = experiment.Phase{Name: PhaseName, Steps: tr.Steps, LR: tr.LR, Warmup: tr.WarmupSteps,
		CheckpointEvery: tr.CheckpointEvery, Params: r.m.Params(), Config: r.m.Cfg}
	if r.resume && experiment.HasCheckpoint(r.dir) {
		if _, err := r.ph.Restore(r.dir, r.o.Out); err != nil {
			return err
		}
	}
	cfg := r.cfg
	fmt.Fprintf(r.o.Out, "colbert: %d layers, H = %d -> %d per token, queries %d tokens ([MASK]-expanded), passages <= %d tokens; loss %s\n",
		cfg.Encoder.Layers, cfg.Encoder.Hidden, cfg.Dim, cfg.QueryLength, cfg.DocumentLength, r.loss.Name)
	var err error
	r.lg, err = experiment.OpenRunLog(r.dir, r.resume)
	return err
}

// train runs the training phase (what is left of it): each step the sampler's batch, the
// teacher's scores for colbert_kl_distill, the false-negative mask for a masked
// colbert_contrastive.
func (r *colbertRun) train(ctx context.Context) error {
	rec, o := r.rec, r.o
	if rec.Train.Steps == 0 { // the untrained model is checkpoint 0: its index can be searched, the model exported
		env := &experiment.Env{Rec: rec, Opts: o, Dir: r.dir, Seed: r.seed, TokenizerPath: r.tokPath, Log: r.lg}
		return env.SaveZeroStep(PhaseName, r.m.Params(), r.m.Cfg)
	}
	if r.ph.Start >= rec.Train.Steps { // resumed after the last step: the checkpoint's seconds
		r.metrics["train/seconds"] = r.ph.SecondsBefore
		return nil
	}
	var teacher *retriever.Teacher
	if r.loss.Teacher {
		var err error
		if teacher, err = retriever.PrepareTeacher(rec, r.smp, r.ds, r.passages, r.bm25, r.dir, o); err != nil {
			return err
		}
	}
	loss, next := r.batches(teacher)
	B := rec.Train.BatchSize
	// plain, length-bucketed (train.dynamic_padding) or gradient-cached (train.mini_batch_size)
	task, err := cb.NewTrainTask(r.m, r.tok, cb.TaskOptions{B: B, N: B * (1 + rec.Sampler.HardNegatives), Loss: loss, Seed: r.seed ^ streamTrain,
		Next: next, MiniBatch: rec.Train.MiniBatchSize, Dynamic: rec.Train.DynamicPadding})
	if err != nil {
		return err
	}
	defer task.Close()
	r.ph.Task = task
	r.ph.State = func(done int, ts *checkpoints.TrainerState) {
		ts.Epoch, ts.SamplerPosition = r.smp.Epoch(done), done*B
	}
	env := &experiment.Env{Rec: rec, Opts: o, Dir: r.dir, Seed: r.seed, TokenizerPath: r.tokPath, Log: r.lg}
	res, seconds, err := env.RunPhase(ctx, r.ph)
	if err != nil {
		return err
	}
	r.metrics["train/seconds"], r.metrics["train/last_loss"] = seconds, res.LastLoss
	return nil
}

// batches is the training loss and the batch of each step: the sampler's, with the teacher's
// scores (colbert_kl_distill) and, for a masked colbert_contrastive (sampler.false_negatives =
// "mask"), the sampler's false-negative mask.
func (r *colbertRun) batches(teacher *retriever.Teacher) (cb.Loss, func(step int) (cb.Batch, error)) {
	rec := r.rec
	loss := cb.Loss{Name: r.loss.Name, Temperature: rec.Loss.Temperature, TeacherTemperature: rec.Loss.TeacherTemperature,
		Masked: rec.Sampler.FalseNegatives == "mask" && !r.loss.Teacher}
	return loss, func(step int) (cb.Batch, error) {
		b, _, err := r.smp.Batch(step)
		if err != nil {
			return cb.Batch{}, err
		}
		out := cb.Batch{Queries: b.Queries, Passages: append(slices.Clone(b.Positives), b.Negatives...)}
		if loss.Masked {
			out.Mask = b.Mask
		}
		if teacher != nil {
			out.Teacher, err = teacher.BatchScores(b)
		}
		return out, err
	}
}

// close closes the log.
func (r *colbertRun) close() {
	if r.lg != nil {
		r.lg.Close()
	}
}

// modelHash is the sha256 (hex) of the model's parameters (names, shapes, float32 values): the
// PLAID index's manifest names the model whose vectors it holds.
func modelHash(m *cb.Model) string {
	h := sha256.New()
	model.WriteParams(h, m.Params())
	return hex.EncodeToString(h.Sum(nil))
}

// evaluate encodes the corpus, builds the PLAID-style index (colbert.plaid), ranks each eval
// split by BM25, exact MaxSim (colbert) and the index (colbert_plaid), writes the runs, the
// tables and metrics.json: besides the systems' metrics, the index's bytes per passage and,
// per split, the recall of exact MaxSim's top 10 by PLAID's.
func (r *colbertRun) evaluate() error {
	enc, err := cb.NewEncoder(r.m, r.tok, r.c.EncodeBatch)
	if err != nil {
		return err
	}
	defer enc.Close()
	docs, err := r.encodeCorpus(enc)
	if err != nil {
		return err
	}
	exact, err := cb.NewExact(r.ds.Corpus.IDs, docs)
	if err != nil {
		return err
	}
	plaid, err := r.buildPlaid(docs)
	if err != nil {
		return err
	}
	c := r.c
	sp := cb.SearchParams{NCells: c.NCells, CentroidScoreThreshold: c.CentroidScoreThreshold, NDocs: c.NDocs}
	if plaid != nil && c.selecting() {
		if sp, err = r.choosePlaid(enc, exact, plaid); err != nil {
			return err
		}
	}
	if plaid != nil { // the settings every split was searched with; train search reads them
		r.metrics["colbert_plaid/ncells"], r.metrics["colbert_plaid/ndocs"] = float64(sp.NCells), float64(sp.NDocs)
		r.metrics["colbert_plaid/centroid_score_threshold"] = sp.CentroidScoreThreshold
	}
	for _, split := range r.rec.Eval.Splits {
		if err := r.evaluateSplit(split, enc, exact, plaid, sp); err != nil {
			return err
		}
	}
	return experiment.WriteMetrics(r.dir, r.metrics)
}

// encodeCorpus encodes every passage's token vectors and records their sizes.
func (r *colbertRun) encodeCorpus(enc *cb.Encoder) (*cb.Tokens, error) {
	start := time.Now()
	docs, err := enc.Documents(r.passages)
	if err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	tokenize.ReportTruncation(r.o.Out, "eval corpus", r.c.DocumentLength, tokenize.TruncPart{Name: "passages", Count: &enc.DocCut})
	nTok := len(docs.Vecs) / docs.Dim
	fmt.Fprintf(r.o.Out, "colbert: encoded %d passages (%d scored tokens, %.1f per passage) in %.1fs\n", docs.Len(), nTok, float64(nTok)/float64(docs.Len()), secs)
	r.metrics["colbert/encode_seconds"] = secs
	r.metrics["colbert/tokens_per_passage"] = float64(nTok) / float64(docs.Len())
	r.metrics["colbert/float32_bytes_per_passage"] = float64(nTok*docs.Dim*4) / float64(docs.Len())
	return docs, nil
}

// buildPlaid builds the PLAID-style index over docs and saves it in PlaidDir (nil without
// colbert.plaid).
func (r *colbertRun) buildPlaid(docs *cb.Tokens) (*cb.Plaid, error) {
	c := r.c
	if !c.Plaid {
		return nil, nil
	}
	start := time.Now()
	plaid, err := cb.BuildPlaid(r.ds.Corpus.IDs, docs, cb.PlaidOptions{NBits: c.NBits, KMeansIters: c.KMeansIters, Seed: r.seed})
	if err != nil {
		return nil, err
	}
	if err := plaid.Save(filepath.Join(r.dir, PlaidDir), modelHash(r.m)); err != nil {
		return nil, err
	}
	st, f32 := plaid.Stats(), r.metrics["colbert/float32_bytes_per_passage"]
	fmt.Fprintf(r.o.Out, "colbert: PLAID-style index: %d centroids, %d bits per dimension, %.1f bytes per passage (codes and residuals; float32 vectors %.1f, %.1fx), %d bytes in all with centroids, built in %.1fs\n",
		st.Centroids, c.NBits, st.BytesPerPassage, f32, f32/st.BytesPerPassage, st.TotalBytes, time.Since(start).Seconds())
	r.metrics["colbert_plaid/bytes_per_passage"] = st.BytesPerPassage
	r.metrics["colbert_plaid/total_bytes"] = float64(st.TotalBytes)
	r.metrics["colbert_plaid/centroids"] = float64(st.Centroids)
	return plaid, nil
}

// evaluateSplit ranks split's queries by BM25, exact MaxSim and the index (when built), writes
// the runs and prints the table, with the index's recall of the exact top 10 and the query
// latencies.
func (r *colbertRun) evaluateSplit(split string, enc *cb.Encoder, exact *cb.Exact, plaid *cb.Plaid, sp cb.SearchParams) error {
	rec, metrics, depth := r.rec, r.metrics, r.rec.Eval.Depth
	qrels := r.ds.Qrels[split]
	qids, qv, err := r.encodeQueries(enc, split)
	if err != nil {
		return err
	}
	runs := map[string]eval.Run{"bm25": {}, "colbert": {}, "colbert_plaid": {}}
	var recall, exactSecs, plaidSecs float64
	for i, q := range qids {
		text, _ := r.ds.Queries.Text(q)
		runs["bm25"][q] = r.bm25.Search(text, depth)
		t0 := time.Now()
		ex := exact.Search(qv.Rows(i), depth)
		exactSecs += time.Since(t0).Seconds()
		runs["colbert"][q] = ex
		if plaid != nil {
			t0 = time.Now()
			pl := plaid.Search(qv.Rows(i), depth, sp)
			plaidSecs += time.Since(t0).Seconds()
			runs["colbert_plaid"][q] = pl
			recall += topRecall(ex, pl, 10)
		}
	}
	systems := []experiment.System{{Name: "bm25", Run: runs["bm25"]}, {Name: "colbert", Run: runs["colbert"]}}
	key := func(k string) string {
		if split == rec.Data.TestSplit {
			return k
		}
		return k + "." + split
	}
	metrics[key("colbert/query_milliseconds")] = 1000 * exactSecs / float64(len(qids))
	encMS, err := loneQueryEncode(enc, r.ds, qids)
	if err != nil {
		return err
	}
	metrics[key("colbert/query_encode_ms")] = encMS
	if plaid != nil {
		metrics[key("colbert_plaid/query_encode_ms")] = encMS
		systems = append(systems, experiment.System{Name: "colbert_plaid", Run: runs["colbert_plaid"]})
		metrics[key("colbert_plaid/recall_of_exact_top10")] = recall / float64(len(qids))
		metrics[key("colbert_plaid/query_milliseconds")] = 1000 * plaidSecs / float64(len(qids))
	}
	rows, err := experiment.EvaluateSystems(r.dir, split, split == rec.Data.TestSplit, qrels, systems, rec.Eval.Metrics, metrics)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.o.Out, "\n%s split, %d queries (%s):\n%s", split, len(qids), filepath.Base(rec.Data.Dir), eval.FormatTable(rec.Eval.Metrics, rows))
	if plaid != nil {
		fmt.Fprintf(r.o.Out, "colbert_plaid: recall of exact MaxSim's top 10: %.4f; %.1f ms per query (exact %.1f ms)\n",
			metrics[key("colbert_plaid/recall_of_exact_top10")], metrics[key("colbert_plaid/query_milliseconds")], metrics[key("colbert/query_milliseconds")])
	}
	return nil
}

// encodeQueries returns split's judged query ids and their token vectors, encoded in that order.
func (r *colbertRun) encodeQueries(enc *cb.Encoder, split string) ([]string, *cb.Tokens, error) {
	qids := r.ds.Qrels[split].QueryIDs()
	texts := make([]string, len(qids))
	for i, q := range qids {
		texts[i], _ = r.ds.Queries.Text(q)
	}
	qv, err := enc.Queries(texts)
	return qids, qv, err
}

// loneQueryEncode is the mean milliseconds of encoding one query alone (the first
// experiment.LatencyQueries of qids, one call each), the half of a served query's latency that
// "<system>/query_milliseconds" (the search over vectors encoded beforehand) leaves out.
func loneQueryEncode(enc *cb.Encoder, ds *data.Dataset, qids []string) (float64, error) {
	cut := enc.QueryCut // the truncation counts count each query once
	defer func() { enc.QueryCut = cut }()
	return experiment.LoneLatency(len(qids), func(i int) error {
		text, _ := ds.Queries.Text(qids[i])
		_, err := enc.Queries([]string{text})
		return err
	})
}

// topRecall is the share of ref's first k passages found among got's first k.
func topRecall(ref, got []index.Hit, k int) float64 {
	in := map[string]bool{}
	for _, h := range got[:min(k, len(got))] {
		in[h.DocID] = true
	}
	n, found := min(k, len(ref)), 0
	for _, h := range ref[:n] {
		if in[h.DocID] {
			found++
		}
	}
	if n == 0 {
		return 1
	}
	return float64(found) / float64(n)
}
