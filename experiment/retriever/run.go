package retriever

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// runRetriever runs a retriever recipe as named stages, each a method of retrieverRun, which
// carries the run's state from one to the next: the data and BM25, the run directory and the
// model, the mined examples (with the zero-shot ranking and the teacher's scores), the resume
// point, the two training phases, and the evaluation.
func runRetriever(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	r := &retrieverRun{rec: rec, o: o, resume: o.ResumeDir != "", seed: uint64(rec.Seed)}
	defer r.close()
	for _, stage := range []func() error{
		r.check,                                 // init_from resolved, the loss, a finished or unstreamable run refused
		r.load,                                  // the judged data (loaded or streamed), the tokenizer, BM25, BM25's examples
		r.open,                                  // the run directory, the tokenizer saved, the streamed corpus on disk, the model
		r.mine,                                  // the model before training: zeroshot, dense negatives; the teacher's scores
		r.restore,                               // the latest checkpoint of a resumed run, the log
		func() error { return r.pretrain(ctx) }, // independent cropping
		func() error { return r.train(ctx) },    // the supervised phase, with dev selection
		r.evaluate,                              // BM25, dense and RRF on the eval splits; metrics.json
	} {
		if err := stage(); err != nil || r.finished {
			return r.dir, err
		}
	}
	return r.dir, nil
}

// retrieverRun is the state a retriever run hands from stage to stage.
type retrieverRun struct {
	rec      *configs.Recipe
	o        experiment.Options
	resume   bool
	finished bool // a resumed run that had finished: nothing to do
	seed     uint64
	loss     biencoder.ContrastiveLoss

	corpus corpus // loaded, or streamed from disk (index.stream_above)
	ds     *data.Dataset
	bm25   *index.BM25
	tok    *tokenize.Tokenizer
	smp    *sampler.Sampler
	stats  sampler.MineStats

	dir, tokPath   string
	cfg            model.BiEncoderConfig
	m              *model.BiEncoder
	fromCheckpoint bool // a resumed run with a checkpoint to continue from
	refreshing     bool // negatives mined in the train phase, from the model being trained
	zeroShotRuns   map[string]eval.Run
	teacher        *teacherScores

	state         checkpoints.TrainerState
	optState      *checkpoints.OptimizerState
	secondsBefore float64 // training time of the earlier segments of a resumed run
	segmentStart  time.Time
	lg            *trainer.Log
	env           *experiment.Env
	lens          biencoder.Lengths
	sel           *selector
	miner         *refreshMiner
}

// close releases what the stages opened, the last opened first.
func (r *retrieverRun) close() {
	if r.miner != nil {
		r.miner.close()
	}
	if r.lg != nil {
		r.lg.Close()
	}
	if r.corpus != nil {
		r.corpus.Close()
	}
}

// check resolves model.init_from, builds the loss, and stops a resumed run that has finished
// and a streamed corpus the recipe cannot stream.
func (r *retrieverRun) check() error {
	rec, o := r.rec, r.o
	if err := experiment.ResolveInitFrom(rec, o.Out); err != nil {
		return err
	}
	if d := rec.Loss.Dims; len(d) > 0 && d[0] > rec.Model.Hidden { // model.init_from's size is known now
		return rec.KeyError("loss.dims", "dims[0] = %d exceeds the model's output dimension %d", d[0], rec.Model.Hidden)
	}
	var err error
	if r.loss, err = biencoder.NewContrastiveLoss(rec); err != nil {
		return err
	}
	if r.resume && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		r.dir, r.finished = o.ResumeDir, true
		return nil
	}
	// A corpus of more than index.stream_above passages is streamed (streamedCorpus).
	streamed, n, err := streaming(rec)
	if err != nil {
		return err
	}
	if !streamed {
		r.corpus = &loadedCorpus{}
		return nil
	}
	r.corpus = &streamedCorpus{}
	return checkStreamable(rec, o, n, r.loss.Teacher())
}

// load reads the judged splits, prepares the tokenizer, indexes the corpus with BM25 and mines
// the training examples from BM25's ranking: before the run directory exists, so a recipe whose
// batches cannot be dealt from these qrels fails before anything is written or trained.
func (r *retrieverRun) load() error {
	rec, o := r.rec, r.o
	var dev []string // the dev split, for checkpoint selection
	if rec.Eval.SelectMetric != "" {
		dev = append(dev, rec.Data.DevSplit)
	}
	splits := experiment.JudgedSplits(rec, dev...)
	var err error
	if r.ds, r.bm25, r.tok, err = r.corpus.load(rec, o, splits); err != nil {
		return err
	}
	if corpus := r.ds.Corpus; len(corpus.Empty) > 0 {
		fmt.Fprintf(o.Out, "data: %d passages with empty title and text kept (ids %s)\n", len(corpus.Empty), strings.Join(corpus.Empty, ", "))
	}
	// With dense negatives the same check runs on BM25's ranking first: the dense ranking
	// needs the corpus encoded, and the qrels' faults show with either.
	if rec.Train.Steps > 0 {
		r.smp, r.stats, err = experiment.MineSampler(rec, r.ds, experiment.BM25Rank(r.bm25), r.corpus.Texts(), r.corpus.Text, r.seed)
	}
	return err
}

// open creates (or reopens) the run directory, saves the tokenizer there, writes a streamed
// corpus's token store and texts into it, and builds the model (model.init_from's weights when
// the run needs them).
func (r *retrieverRun) open() error {
	rec, o := r.rec, r.o
	if err := experiment.CheckMemory(rec, o.Out, experiment.RetrieverMemory(rec, biencoder.EncoderConfig(rec, r.tok.VocabSize()))); err != nil {
		return err
	}
	var err error
	if r.dir, r.tok, r.tokPath, err = experiment.OpenRunDir(rec, o, r.tok); err != nil {
		return err
	}
	if err = r.corpus.open(rec, r.tok, r.dir, o.Out); err != nil {
		return err
	}
	r.cfg = model.BiEncoderConfig{Kind: model.KindBiEncoder, Encoder: biencoder.EncoderConfig(rec, r.tok.VocabSize()), SharedTowers: rec.Model.SharedTowers,
		Similarity: rec.Loss.Similarity, Temperature: rec.Loss.Temperature, MaxLength: rec.Tokenizer.MaxLength}
	if r.m, err = model.NewBiEncoder(r.cfg.Encoder, r.cfg.SharedTowers, r.seed); err != nil {
		return err
	}
	r.fromCheckpoint = r.resume && experiment.HasCheckpoint(r.dir)
	r.refreshing = rec.Sampler.NegativeSource == "dense_refresh"
	if rec.Model.InitFrom != "" && (!r.fromCheckpoint || r.needStart()) {
		return experiment.InitFrom(r.m, rec.Model.InitFrom, o.Out)
	}
	return nil
}

// denseMining reports whether hard negatives are mined from the model before training.
func (r *retrieverRun) denseMining() bool {
	return r.rec.Train.Steps > 0 && r.rec.Sampler.NegativeSource != "bm25" && !r.refreshing
}

// needStart reports whether the model before training ranks the corpus: the "zeroshot" system,
// or dense negatives.
func (r *retrieverRun) needStart() bool {
	return slices.Contains(r.rec.Eval.Systems, "zeroshot") || r.denseMining()
}

// mine ranks the corpus once with the model before training when the run needs it (the
// "zeroshot" system; hard negatives mined from the dense ranking, alone or interleaved with
// BM25's), writes the training examples, and scores them with the teacher of a distillation
// loss (or reads the scores back from the run's cache).
func (r *retrieverRun) mine() error {
	rec, o, ds := r.rec, r.o, r.ds
	if r.needStart() {
		if err := r.rankBeforeTraining(); err != nil {
			return err
		}
	}
	if r.smp != nil && !r.refreshing { // the same file on every resume (the mining is seeded)
		text := func(id string) string {
			i, _ := ds.Corpus.Index(id)
			return r.corpus.Text(i)
		}
		if err := writeExamples(filepath.Join(r.dir, ExamplesFile), r.smp.Examples(), ds.Queries, text); err != nil {
			return err
		}
	}
	// A distillation loss reads the teacher's scores of every training pair: scored once here
	// (or read back from the run's cache), before any step.
	if r.smp != nil && r.loss.Teacher() {
		var err error
		r.teacher, err = prepareTeacher(rec, r.smp, ds, r.corpus.Texts(), r.bm25, r.dir, o)
		return err
	}
	return nil
}

// rankBeforeTraining ranks the corpus with the model before training: the "zeroshot" system's
// runs on the eval splits and, for dense negatives, the training examples mined again.
func (r *retrieverRun) rankBeforeTraining() error {
	rec, o, ds := r.rec, r.o, r.ds
	start := time.Now()
	zeroShot, err := newSearcher(rec, r.m, r.tok, r.loss.Cosine(), ds.Corpus.IDs, r.corpus.Texts(), o.Progress)
	if err != nil {
		return err
	}
	defer zeroShot.Close()
	fmt.Fprintf(o.Out, "zeroshot: encoded %d passages with the model before training in %.1fs\n", r.corpus.Len(), time.Since(start).Seconds())
	reportSearch(o.Out, "zeroshot", zeroShot)
	tokenize.ReportTruncation(o.Out, "zeroshot corpus", rec.Tokenizer.MaxLength, tokenize.TruncPart{Name: "passages", Count: &zeroShot.PassageCut})
	r.zeroShotRuns = map[string]eval.Run{} // eval split -> ranking, queries encoded before training too
	for _, split := range rec.Eval.Splits {
		qids := ds.Qrels[split].QueryIDs()
		hits, err := zeroShot.Search(queryTexts(ds, qids), rec.Eval.Depth)
		if err != nil {
			return err
		}
		r.zeroShotRuns[split] = eval.Run{}
		for i, h := range hits {
			r.zeroShotRuns[split][qids[i]] = h
		}
	}
	if r.denseMining() {
		if err := r.mineDense(zeroShot); err != nil {
			return err
		}
	}
	return nil
}

// mineDense mines the training examples again from the dense ranking of the model before
// training (sampler.negative_source "dense" or "bm25+dense"); the training queries are ranked in
// one batch, the window's depth each.
func (r *retrieverRun) mineDense(zeroShot *biencoder.Searcher) error {
	rec, ds := r.rec, r.ds
	trainQIDs := ds.Qrels[rec.Data.TrainSplit].QueryIDs()
	hits, err := zeroShot.Search(queryTexts(ds, trainQIDs), rec.Sampler.NegativeWindow[1])
	if err != nil {
		return err
	}
	denseIDs := map[string][]string{}
	for i, q := range trainQIDs {
		denseIDs[q] = hitIDs(hits[i])
	}
	denseRanking := func(q, text string, n int) ([]string, error) {
		ids, ok := denseIDs[q]
		if !ok {
			return nil, fmt.Errorf("no dense ranking of training query %q", q)
		}
		return ids[:min(n, len(ids))], nil
	}
	ranking := denseRanking
	if rec.Sampler.NegativeSource == "bm25+dense" {
		ranking = interleave(experiment.BM25Rank(r.bm25), denseRanking)
	}
	r.smp, r.stats, err = experiment.MineSampler(rec, ds, ranking, r.corpus.Texts(), r.corpus.Text, r.seed)
	return err
}

// queryTexts returns the texts of the queries qids.
func queryTexts(ds *data.Dataset, qids []string) []string {
	texts := make([]string, len(qids))
	for i, q := range qids {
		texts[i], _ = ds.Queries.Text(q)
	}
	return texts
}

// restore finds where to start: a fresh run at the first phase, a resumed one where its latest
// checkpoint stopped (at the first phase when it was stopped before its first checkpoint); it
// opens the run's log.
func (r *retrieverRun) restore() error {
	o := r.o
	if r.resume && !r.fromCheckpoint {
		fmt.Fprintf(o.Out, "resume: %s has no checkpoint yet; starting from the first phase\n", r.dir)
	}
	if r.fromCheckpoint {
		ck, err := checkpoints.Load(r.dir)
		if err != nil {
			return err
		}
		if err := experiment.SetParams(r.m.Params(), ck.Params); err != nil {
			return fmt.Errorf("%s: %w", ck.Dir, err)
		}
		r.state, r.optState = ck.Trainer, ck.Optimizer
		r.secondsBefore = ck.Trainer.TrainSeconds
		fmt.Fprintf(o.Out, "resume: %s at %s step %d\n", ck.Dir, r.state.Phase, r.state.Step)
	}
	var err error
	if r.lg, err = experiment.OpenRunLog(r.dir, r.resume); err != nil {
		return err
	}
	r.segmentStart = time.Now()
	r.env = &experiment.Env{Rec: r.rec, Opts: o, Dir: r.dir, Seed: r.seed, TokenizerPath: r.tokPath, Log: r.lg}
	// Queries are cut to tokenizer.query_max_length (max_length when unset), passages to
	// max_length; the training graphs are fixed-shape per side.
	r.lens = biencoder.Lengths{Query: r.rec.Tokenizer.QueryLength(), Passage: r.rec.Tokenizer.MaxLength}
	return nil
}

// trainSeconds is the run's training time so far, earlier segments of a resumed run included.
func (r *retrieverRun) trainSeconds() float64 {
	return r.secondsBefore + time.Since(r.segmentStart).Seconds()
}

// phase is a training phase of the bi-encoder with the recipe's optimiser settings.
func (r *retrieverRun) phase(name string, steps, startStep int, task trainer.Task, warmup int) experiment.Phase {
	return experiment.Phase{Name: name, Steps: steps, Task: task, LR: r.rec.Train.LR, Warmup: warmup, CheckpointEvery: r.rec.Train.CheckpointEvery,
		Params: r.m.Params(), Config: r.cfg, Start: startStep, Optimizer: r.optState, Seconds: r.trainSeconds}
}

// phaseOrder orders the phases of a retriever run, for resuming.
var phaseOrder = map[string]int{"": 0, "pretrain": 1, "train": 2, selectedPhase: 3}

// pretrain runs phase 1, unsupervised independent cropping (Contriever), unless the run is past it.
func (r *retrieverRun) pretrain(ctx context.Context) error {
	pt, state := r.rec.Pretrain, r.state
	if pt.Steps == 0 || phaseOrder[state.Phase] > 1 || (state.Phase == "pretrain" && state.Step >= pt.Steps) {
		return nil
	}
	startStep := 0
	if state.Phase == "pretrain" {
		startStep = state.Step
	}
	ptLoss, err := r.loss.Unsupervised()
	if err != nil {
		return err
	}
	task, err := biencoder.NewBiTask(r.m, r.tok, biencoder.TaskOptions{B: pt.BatchSize, N: pt.BatchSize, Lengths: r.lens, Loss: ptLoss, Seed: r.seed, Stream: biencoder.StreamPretrain, Next: func(step int) (biencoder.PairBatch, error) {
		cb, err := sampler.CropPairsFunc(r.ds.Corpus.Len(), r.corpus.Text, pt.BatchSize, pt.CropMin, pt.CropMax, step, r.seed)
		return biencoder.PairBatch{Queries: cb.Queries, Passages: cb.Positives}, err
	}})
	if err != nil {
		return err
	}
	_, _, err = r.env.RunPhase(ctx, r.phase("pretrain", pt.Steps, startStep, task, experiment.ShortWarmup(r.rec.Train.WarmupSteps, pt.Steps)))
	task.Close()
	if err != nil {
		return err
	}
	r.optState = nil
	return nil
}

// train runs phase 2, supervised training (loss.name) on the training qrels with mined hard
// negatives, each dev evaluation choosing the checkpoint (eval.select_metric), unless the run
// is past it.
func (r *retrieverRun) train(ctx context.Context) error {
	rec, o, tr, state := r.rec, r.o, r.rec.Train, r.state
	r.sel = newSelector(rec, r.ds, r.tok, r.m, r.loss.Cosine(), r.corpus.Texts(), r.env, r.cfg, state)
	stoppedEarly := state.Phase == "train" && state.Counters[experiment.CounterStopped] > 0 // train.patience ran out before the checkpoint
	if tr.Steps == 0 || phaseOrder[state.Phase] > 2 || (state.Phase == "train" && state.Step >= tr.Steps) || stoppedEarly {
		return nil
	}
	startStep := 0
	if state.Phase == "train" {
		startStep = state.Step
	} else {
		r.optState = nil
	}
	st := r.stats
	fmt.Fprintf(o.Out, "sampler: %d training queries, %d examples; %d judged-relevant documents excluded from the negative window; %d queries short of negatives (%d slots filled at random)\n",
		st.Queries, st.Examples, st.ExcludedRelevant, len(st.Short), st.Missing)
	var avoided int
	masked := rec.Sampler.FalseNegatives == "mask"
	deal := r.smp.Batch
	if r.refreshing {
		r.miner = newRefreshMiner(ctx, rec, r.ds, r.tok, r.m, r.loss.Cosine(), r.corpus.Texts(), r.dir, r.lg, o.Out)
		deal = r.miner.batch
	}
	next := func(step int) (biencoder.PairBatch, error) {
		b, st, err := deal(step)
		avoided += st.FalseNegativesAvoided + st.MaskedFalseNegatives
		pb := biencoder.PairBatch{Queries: b.Queries, Passages: append(append([]string(nil), b.Positives...), b.Negatives...)}
		if masked {
			pb.Mask = b.Mask
		}
		if err == nil && r.teacher != nil {
			pb.Teacher, err = r.teacher.batchScores(b)
		}
		return pb, err
	}
	// plain, length-bucketed (train.dynamic_padding) or gradient-cached (train.mini_batch_size)
	inner, err := biencoder.New(r.m, r.tok, biencoder.TaskOptions{B: tr.BatchSize, N: tr.BatchSize * (1 + rec.Sampler.HardNegatives), Lengths: r.lens,
		Loss: r.loss, Masked: masked, Seed: r.seed, Stream: biencoder.StreamTrain, Next: next, MiniBatch: tr.MiniBatchSize, Dynamic: tr.DynamicPadding})
	if err != nil {
		return err
	}
	task := &lossTap{trainTask: inner}
	ph := r.phase("train", tr.Steps, startStep, task, tr.WarmupSteps)
	ph.EvalEvery = tr.EvalEvery
	ph.State = func(done int, ts *checkpoints.TrainerState) {
		// Batches are a function of the step: the sampler's position is done·B examples
		// into its stream of seeded epochs.
		ts.Epoch, ts.SamplerPosition = r.smp.Epoch(done), done*tr.BatchSize
	}
	if sel := r.sel; sel != nil {
		sel.lastLoss = func() float64 { return task.last }
		ph.Select = sel.check
		st := ph.State
		ph.State = func(done int, ts *checkpoints.TrainerState) { st(done, ts); sel.record(ts) }
	}
	_, _, err = r.env.RunPhase(ctx, ph)
	reportGraphs(o.Out, inner)
	task.Close()
	if err != nil {
		return err
	}
	if masked {
		fmt.Fprintf(o.Out, "sampler: %d judged-relevant in-batch candidates masked out of other queries' softmax\n", avoided)
	} else {
		fmt.Fprintf(o.Out, "sampler: %d examples deferred to keep judged-relevant passages out of other queries' negatives\n", avoided)
	}
	return nil
}

// reportGraphs says how many training graphs a dynamically padded task built.
func reportGraphs(out io.Writer, task biencoder.Task) {
	if bt, ok := task.(*biencoder.BucketedBiTask); ok {
		var shapes []string
		for _, l := range bt.Cached() {
			shapes = append(shapes, fmt.Sprintf("%d/%d", l.Query, l.Passage))
		}
		fmt.Fprintf(out, "train: dynamic padding: %d training graphs built; cached at the end: %s (query/passage tokens)\n", bt.Built(), strings.Join(shapes, ", "))
	}
	if ct, ok := task.(*biencoder.CachedBiTask); ok && ct.Dynamic {
		fmt.Fprintf(out, "train: dynamic padding: %d chunk graph pairs built besides the maximum lengths'\n", ct.Built())
	}
}

// evaluate records the training figures (time, throughput, mining, the chosen checkpoint),
// evaluates BM25, the trained model and their fusion on the eval splits and writes metrics.json.
func (r *retrieverRun) evaluate() error {
	rec, sel := r.rec, r.sel
	seconds := r.trainSeconds()
	trainSteps := rec.Train.Steps
	if sel != nil && sel.StoppedAt > 0 {
		trainSteps = sel.StoppedAt
	}
	examples := rec.Pretrain.Steps*rec.Pretrain.BatchSize + trainSteps*rec.Train.BatchSize
	metrics := map[string]float64{"train/seconds": seconds}
	if r.refreshing && rec.Train.Steps > 0 {
		if err := miningMetrics(r.dir, trainSteps, metrics); err != nil {
			return err
		}
	}
	if sel != nil && rec.Train.Steps > 0 {
		if err := sel.finish(metrics); err != nil {
			return err
		}
	}
	if seconds > 0 {
		metrics["train/examples_per_second"] = float64(examples) / seconds
	}
	if err := r.evaluateSplits(metrics); err != nil {
		return err
	}
	return experiment.WriteMetrics(r.dir, metrics)
}
