package retriever

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/dense"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// The retriever kind: configs.Load accepts the sections it reads and the losses that train a
// bi-encoder: InfoNCE, its Matryoshka sum over embedding prefixes (loss.dims), and distillation
// of a cross-encoder teacher (loss.teacher) by margins or by the softmax over each query's
// candidates.
func init() {
	experiment.Register("retriever", runRetriever)
	configs.RegisterKind("retriever", configs.KindSpec{
		Sections: []string{"data", "tokenizer", "model", "loss", "sampler", "pretrain", "train", "index", "eval"},
		Losses:   []string{"infonce", "matryoshka_infonce", "margin_mse", "kl_distill"},
	})
}

func runRetriever(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	if err := experiment.ResolveInitFrom(rec, o.Out); err != nil {
		return "", err
	}
	if d := rec.Loss.Dims; len(d) > 0 && d[0] > rec.Model.Hidden { // model.init_from's size is known now
		return "", rec.KeyError("loss.dims", "dims[0] = %d exceeds the model's output dimension %d", d[0], rec.Model.Hidden)
	}
	loss, err := dense.NewContrastiveLoss(rec)
	if err != nil {
		return "", err
	}
	splits := []string{rec.Data.TrainSplit}
	if rec.Eval.SelectMetric != "" {
		splits = append(splits, rec.Data.DevSplit)
	}
	for _, s := range rec.Eval.Splits {
		if !slices.Contains(splits, s) {
			splits = append(splits, s)
		}
	}
	resume := o.ResumeDir != ""
	if resume && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		return o.ResumeDir, nil
	}
	// A corpus of more than index.stream_above passages is streamed: read once for BM25 and the
	// ids, once more to train the tokenizer, and once after the run directory is made into its
	// token store and texts on disk (stream), which training batches and the final index read.
	streamed, nPassages, err := streaming(rec)
	if err != nil {
		return "", err
	}
	if streamed {
		if err := checkStreamable(rec, o, nPassages, loss.Teacher()); err != nil {
			return "", err
		}
	}
	var ds *data.Dataset
	var passages []string // every passage text, when the corpus is loaded
	var stream *streamedCorpus
	var bm25 *index.BM25
	var tok *tokenize.Tokenizer
	bm25Params := index.BM25Params{K1: rec.Index.K1, B: rec.Index.B}
	start := time.Now()
	if streamed {
		b := index.NewBM25Builder(bm25Params)
		if ds, err = data.LoadStreamed(rec.Data.Dir, func(d data.Document) error { b.Add(d.ID, d.Passage(rec.Data.TitleField)); return nil }, splits...); err != nil {
			return "", err
		}
		bm25 = b.Build()
		fmt.Fprintf(o.Out, "bm25: streamed and indexed %d passages in %.2fs (index.stream_above = %d)\n", ds.Corpus.Len(), time.Since(start).Seconds(), rec.Index.StreamAbove)
		texts, textErr := corpusTexts(filepath.Join(rec.Data.Dir, "corpus.jsonl"), rec.Data.TitleField)
		if tok, err = experiment.PrepareTokenizerSeq(rec, o.ResumeDir, texts, o.Out); err == nil {
			err = textErr()
		}
		if err != nil {
			return "", err
		}
	} else {
		if ds, err = data.LoadJudged(rec.Data.Dir, splits...); err != nil {
			return "", err
		}
		passages = make([]string, ds.Corpus.Len())
		for i := range passages {
			passages[i] = ds.Corpus.Passage(i, rec.Data.TitleField)
		}
		if tok, err = experiment.PrepareTokenizer(rec, o.ResumeDir, passages, o.Out); err != nil {
			return "", err
		}
		start = time.Now()
		bm25 = index.NewBM25(ds.Corpus.IDs, passages, bm25Params)
		fmt.Fprintf(o.Out, "bm25: indexed %d passages in %.2fs\n", ds.Corpus.Len(), time.Since(start).Seconds())
	}
	if corpus := ds.Corpus; len(corpus.Empty) > 0 {
		fmt.Fprintf(o.Out, "data: %d passages with empty title and text kept (ids %s)\n", len(corpus.Empty), strings.Join(corpus.Empty, ", "))
	}
	// passageText is the text of corpus passage i: from memory, or from the streamed corpus's
	// texts on disk (written once the run directory exists, before any batch is dealt).
	passageText := func(i int) string {
		if stream != nil {
			return stream.Text(i)
		}
		return passages[i]
	}
	// The training examples are built before the run directory, so a recipe whose batches
	// cannot be dealt from these qrels fails before anything is written or trained.
	var smp *sampler.Sampler
	var stats sampler.MineStats
	// With dense negatives the same check runs on BM25's ranking first: the dense ranking
	// needs the corpus encoded, and the qrels' faults show with either.
	bm25Ranking := func(q, text string, n int) ([]string, error) { return hitIDs(bm25.Search(text, n)), nil }
	if rec.Train.Steps > 0 {
		if smp, stats, err = retrieverSampler(rec, ds, bm25Ranking, passages, passageText, uint64(rec.Seed)); err != nil {
			return "", fmt.Errorf("[train]/[sampler] do not fit the %s qrels of %s: %w", rec.Data.TrainSplit, rec.Data.Dir, err)
		}
	}
	if err := experiment.CheckMemory(rec, dense.EncoderConfig(rec, tok.VocabSize()), o.Out); err != nil {
		return "", err
	}
	dir, err := experiment.PrepareRunDir(rec, o)
	if err != nil {
		return "", err
	}
	tok, tokPath, err := experiment.SaveTokenizer(tok, dir, resume)
	if err != nil {
		return dir, err
	}
	if streamed {
		start := time.Now()
		if stream, err = writeStreamedCorpus(rec, tok, ds.Corpus.IDs, dir); err != nil {
			return dir, err
		}
		defer stream.Close()
		fmt.Fprintf(o.Out, "stream: tokenized %d passages into %s in %.1fs\n", stream.Tokens.Len(), filepath.Join(dir, StreamDir), time.Since(start).Seconds())
	}

	cfg := model.BiEncoderConfig{Kind: model.KindBiEncoder, Encoder: dense.EncoderConfig(rec, tok.VocabSize()), SharedTowers: rec.Model.SharedTowers,
		Similarity: rec.Loss.Similarity, Temperature: rec.Loss.Temperature, MaxLength: rec.Tokenizer.MaxLength}
	seed := uint64(rec.Seed)
	m, err := model.NewBiEncoder(cfg.Encoder, cfg.SharedTowers, seed)
	if err != nil {
		return dir, err
	}
	fromCheckpoint := resume && experiment.HasCheckpoint(dir)
	refreshing := rec.Sampler.NegativeSource == "dense_refresh" // mined in the train phase, from the model being trained
	needStart := slices.Contains(rec.Eval.Systems, "zeroshot") || (rec.Train.Steps > 0 && rec.Sampler.NegativeSource != "bm25" && !refreshing)
	if rec.Model.InitFrom != "" && (!fromCheckpoint || needStart) {
		if err := experiment.InitFrom(m, rec.Model.InitFrom, o.Out); err != nil {
			return dir, err
		}
	}
	// The model before training ranks the corpus once: the "zeroshot" system, and the dense
	// ranking that hard negatives are mined from.
	var zeroShot *dense.Searcher
	var zeroShotRuns map[string]eval.Run // eval split -> ranking, queries encoded before training too
	if needStart {
		start := time.Now()
		if zeroShot, err = newSearcher(rec, m, tok, loss.Cosine(), ds.Corpus.IDs, passages, o.Progress); err != nil {
			return dir, err
		}
		fmt.Fprintf(o.Out, "zeroshot: encoded %d passages with the model before training in %.1fs\n", len(passages), time.Since(start).Seconds())
		reportSearch(o.Out, "zeroshot", zeroShot)
		experiment.ReportTruncation(o.Out, "zeroshot corpus", rec.Tokenizer.MaxLength, experiment.TruncPart{Name: "passages", Count: &zeroShot.PassageCut})
		zeroShotRuns = map[string]eval.Run{}
		for _, split := range rec.Eval.Splits {
			qids := ds.Qrels[split].QueryIDs()
			texts := make([]string, len(qids))
			for i, q := range qids {
				texts[i], _ = ds.Queries.Text(q)
			}
			hits, err := zeroShot.Search(texts, rec.Eval.Depth)
			if err != nil {
				return dir, err
			}
			zeroShotRuns[split] = eval.Run{}
			for i, h := range hits {
				zeroShotRuns[split][qids[i]] = h
			}
		}
		if rec.Train.Steps > 0 && rec.Sampler.NegativeSource != "bm25" && !refreshing {
			// The training queries are ranked in one batch, the window's depth each.
			trainQIDs := ds.Qrels[rec.Data.TrainSplit].QueryIDs()
			trainTexts := make([]string, len(trainQIDs))
			for i, q := range trainQIDs {
				trainTexts[i], _ = ds.Queries.Text(q)
			}
			hits, err := zeroShot.Search(trainTexts, rec.Sampler.NegativeWindow[1])
			if err != nil {
				return dir, err
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
				ranking = interleave(bm25Ranking, denseRanking)
			}
			if smp, stats, err = retrieverSampler(rec, ds, ranking, passages, passageText, uint64(rec.Seed)); err != nil {
				return dir, fmt.Errorf("[train]/[sampler] do not fit the %s qrels of %s: %w", rec.Data.TrainSplit, rec.Data.Dir, err)
			}
		}
	}
	if zeroShot != nil {
		zeroShot.Close()
	}
	if smp != nil && !refreshing { // the same file on every resume (the mining is seeded)
		text := func(id string) string {
			i, _ := ds.Corpus.Index(id)
			return passageText(i)
		}
		if err := writeExamples(filepath.Join(dir, ExamplesFile), smp.Examples(), ds.Queries, text); err != nil {
			return dir, err
		}
	}
	// A distillation loss reads the teacher's scores of every training pair: scored once here
	// (or read back from the run's cache), before any step.
	var teacher *teacherScores
	if smp != nil && loss.Teacher() {
		if teacher, err = prepareTeacher(rec, smp, ds, passages, bm25, dir, o); err != nil {
			return dir, err
		}
	}

	// Where to start: a fresh run starts at the first phase; a resumed one where its latest
	// checkpoint stopped (at the first phase when it was stopped before its first checkpoint).
	var state checkpoints.TrainerState
	var optState *checkpoints.OptimizerState
	var secondsBefore float64 // training time of the earlier segments of a resumed run
	if resume && !fromCheckpoint {
		fmt.Fprintf(o.Out, "resume: %s has no checkpoint yet; starting from the first phase\n", dir)
	}
	if fromCheckpoint {
		ck, err := checkpoints.Load(dir)
		if err != nil {
			return dir, err
		}
		if err := experiment.SetParams(m.Params(), ck.Params); err != nil {
			return dir, fmt.Errorf("%s: %w", ck.Dir, err)
		}
		state, optState = ck.Trainer, ck.Optimizer
		secondsBefore = ck.Trainer.TrainSeconds
		fmt.Fprintf(o.Out, "resume: %s at %s step %d\n", ck.Dir, state.Phase, state.Step)
	}
	lg, err := experiment.OpenRunLog(dir, resume)
	if err != nil {
		return dir, err
	}
	defer lg.Close()

	segmentStart := time.Now()
	trainSeconds := func() float64 { return secondsBefore + time.Since(segmentStart).Seconds() }
	env := &experiment.Env{Rec: rec, Opts: o, Dir: dir, Seed: seed, TokenizerPath: tokPath, Log: lg}
	phase := func(name string, steps, startStep int, task trainer.Task, warmup int) experiment.Phase {
		return experiment.Phase{Name: name, Steps: steps, Task: task, LR: rec.Train.LR, Warmup: warmup, CheckpointEvery: rec.Train.CheckpointEvery,
			Params: m.Params(), Config: cfg, Start: startStep, Optimizer: optState, Seconds: trainSeconds}
	}
	// Queries are cut to tokenizer.query_max_length (max_length when unset), passages to
	// max_length; the training graphs are fixed-shape per side.
	lens := dense.Lengths{Query: rec.Tokenizer.QueryLength(), Passage: rec.Tokenizer.MaxLength}
	phaseOrder := map[string]int{"": 0, "pretrain": 1, "train": 2, selectedPhase: 3}

	// Phase 1: unsupervised independent cropping (Contriever).
	if pt := rec.Pretrain; pt.Steps > 0 && phaseOrder[state.Phase] <= 1 && !(state.Phase == "pretrain" && state.Step >= pt.Steps) {
		startStep := 0
		if state.Phase == "pretrain" {
			startStep = state.Step
		}
		ptLoss, err := loss.Unsupervised()
		if err != nil {
			return dir, err
		}
		task, err := dense.NewBiTask(m, tok, pt.BatchSize, pt.BatchSize, lens, ptLoss, false, seed, dense.StreamPretrain,
			func(step int) (dense.PairBatch, error) {
				cb, err := sampler.CropPairsFunc(ds.Corpus.Len(), passageText, pt.BatchSize, pt.CropMin, pt.CropMax, step, seed)
				return dense.PairBatch{Queries: cb.Queries, Passages: cb.Positives}, err
			})
		if err != nil {
			return dir, err
		}
		_, _, err = env.RunPhase(ctx, phase("pretrain", pt.Steps, startStep, task, experiment.ShortWarmup(rec.Train.WarmupSteps, pt.Steps)))
		task.Close()
		if err != nil {
			return dir, err
		}
		optState = nil
	}

	// Phase 2: supervised training (loss.name) on the training qrels with mined hard negatives.
	sel := newSelector(rec, ds, tok, m, loss.Cosine(), passages, env, cfg, state)
	stoppedEarly := state.Phase == "train" && state.Counters[experiment.CounterStopped] > 0 // train.patience ran out before the checkpoint
	if tr := rec.Train; tr.Steps > 0 && phaseOrder[state.Phase] <= 2 && !(state.Phase == "train" && state.Step >= tr.Steps) && !stoppedEarly {
		startStep := 0
		if state.Phase == "train" {
			startStep = state.Step
		} else {
			optState = nil
		}
		fmt.Fprintf(o.Out, "sampler: %d training queries, %d examples; %d judged-relevant documents excluded from the negative window; %d queries short of negatives (%d slots filled at random)\n",
			stats.Queries, stats.Examples, stats.ExcludedRelevant, len(stats.Short), stats.Missing)
		n := rec.Sampler.HardNegatives
		var avoided int
		masked := rec.Sampler.FalseNegatives == "mask"
		deal := smp.Batch
		if refreshing {
			miner := newRefreshMiner(ctx, rec, ds, tok, m, loss.Cosine(), passages, dir, lg, o.Out)
			defer miner.close()
			deal = miner.batch
		}
		next := func(step int) (dense.PairBatch, error) {
			b, st, err := deal(step)
			avoided += st.FalseNegativesAvoided + st.MaskedFalseNegatives
			pb := dense.PairBatch{Queries: b.Queries, Passages: append(append([]string(nil), b.Positives...), b.Negatives...)}
			if masked {
				pb.Mask = b.Mask
			}
			if err == nil && teacher != nil {
				pb.Teacher, err = teacher.batchScores(b)
			}
			return pb, err
		}
		inner, err := newTrainTask(m, tok, tr, tr.BatchSize*(1+n), lens, loss, masked, seed, next)
		if err != nil {
			return dir, err
		}
		task := &lossTap{trainTask: inner}
		ph := phase("train", tr.Steps, startStep, task, rec.Train.WarmupSteps)
		ph.EvalEvery = tr.EvalEvery
		ph.State = func(done int, ts *checkpoints.TrainerState) {
			// Batches are a function of the step: the sampler's position is done·B examples
			// into its stream of seeded epochs.
			ts.Epoch, ts.SamplerPosition = smp.Epoch(done), done*tr.BatchSize
		}
		if sel != nil {
			sel.lastLoss = func() float64 { return task.last }
			ph.Select = sel.check
			st := ph.State
			ph.State = func(done int, ts *checkpoints.TrainerState) { st(done, ts); sel.record(ts) }
		}
		_, _, err = env.RunPhase(ctx, ph)
		if bt, ok := inner.(*dense.BucketedBiTask); ok {
			var shapes []string
			for _, l := range bt.Cached() {
				shapes = append(shapes, fmt.Sprintf("%d/%d", l.Query, l.Passage))
			}
			fmt.Fprintf(o.Out, "train: dynamic padding: %d training graphs built; cached at the end: %s (query/passage tokens)\n", bt.Built(), strings.Join(shapes, ", "))
		}
		if ct, ok := inner.(*dense.CachedBiTask); ok && ct.Dynamic {
			fmt.Fprintf(o.Out, "train: dynamic padding: %d chunk graph pairs built besides the maximum lengths'\n", ct.Built())
		}
		task.Close()
		if err != nil {
			return dir, err
		}
		if masked {
			fmt.Fprintf(o.Out, "sampler: %d judged-relevant in-batch candidates masked out of other queries' softmax\n", avoided)
		} else {
			fmt.Fprintf(o.Out, "sampler: %d examples deferred to keep judged-relevant passages out of other queries' negatives\n", avoided)
		}
	}

	seconds := trainSeconds()
	trainSteps := rec.Train.Steps
	if sel != nil && sel.StoppedAt > 0 {
		trainSteps = sel.StoppedAt
	}
	examples := rec.Pretrain.Steps*rec.Pretrain.BatchSize + trainSteps*rec.Train.BatchSize
	metrics := map[string]float64{"train/seconds": seconds}
	if refreshing && rec.Train.Steps > 0 {
		if err := miningMetrics(dir, trainSteps, metrics); err != nil {
			return dir, err
		}
	}
	if sel != nil && rec.Train.Steps > 0 {
		if err := sel.finish(metrics); err != nil {
			return dir, err
		}
	}
	if seconds > 0 {
		metrics["train/examples_per_second"] = float64(examples) / seconds
	}
	if err := evaluateRetriever(rec, ds, tok, m, zeroShotRuns, sel, loss.Cosine(), bm25, passages, stream, dir, metrics, o.Out, o.Progress); err != nil {
		return dir, err
	}
	return dir, experiment.WriteMetrics(dir, metrics)
}

// trainTask is the supervised phase's bi-encoder task.
type trainTask interface {
	trainer.Task
	experiment.TruncReporter
	Close()
}

// lossTap is the train task, keeping the loss of the batch of the last step run (the
// train_loss of each dev evaluation's log line).
type lossTap struct {
	trainTask
	last float64
}

func (t *lossTap) Step(step int) (float64, int, error) {
	loss, n, err := t.trainTask.Step(step)
	t.last = loss
	return loss, n, err
}

// newTrainTask builds the supervised phase's task for batches of tr.BatchSize queries and N
// passages: one graph over the batch, one graph per padded shape (train.dynamic_padding), or
// gradient caching over chunks of train.mini_batch_size.
func newTrainTask(m *model.BiEncoder, tok *tokenize.Tokenizer, tr configs.Train, N int, lens dense.Lengths, loss dense.ContrastiveLoss,
	masked bool, seed uint64, next func(step int) (dense.PairBatch, error)) (trainTask, error) {
	if tr.MiniBatchSize > 0 {
		t, err := dense.NewCachedBiTask(m, tok, tr.BatchSize, N, tr.MiniBatchSize, lens, loss, masked, seed, dense.StreamTrain, next)
		if err != nil {
			return nil, err
		}
		t.Dynamic = tr.DynamicPadding
		return t, nil
	}
	if tr.DynamicPadding {
		return dense.NewBucketedBiTask(m, tok, tr.BatchSize, N, lens, loss, masked, seed, dense.StreamTrain, next, dense.BucketOptions{})
	}
	return dense.NewBiTask(m, tok, tr.BatchSize, N, lens, loss, masked, seed, dense.StreamTrain, next)
}

// rankFunc returns the ids of the n best passages for a query, best first.
type rankFunc func(qid, text string, n int) ([]string, error)

// hitIDs returns the document ids of hits, in order.
func hitIDs(hits []index.Hit) []string {
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.DocID
	}
	return ids
}

// interleave merges two rankings (sampler.negative_source = "bm25+dense"): a's first, b's
// first, a's second, ..., skipping a passage already listed, cut to n.
func interleave(a, b rankFunc) rankFunc {
	return func(qid, text string, n int) ([]string, error) {
		x, err := a(qid, text, n)
		if err != nil {
			return nil, err
		}
		y, err := b(qid, text, n)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		var out []string
		for i := 0; i < max(len(x), len(y)) && len(out) < n; i++ {
			for _, r := range [][]string{x, y} {
				if i < len(r) && !seen[r[i]] && len(out) < n {
					seen[r[i]] = true
					out = append(out, r[i])
				}
			}
		}
		return out, nil
	}
}

// retrieverSampler mines BM25 hard negatives for the training queries and returns the batch
// sampler over the resulting examples.
// The passage texts are passages, or text(i) when passages is nil (a streamed corpus).
func retrieverSampler(rec *configs.Recipe, ds *data.Dataset, rank rankFunc, passages []string, text func(int) string, seed uint64) (*sampler.Sampler, sampler.MineStats, error) {
	qrels := ds.Qrels[rec.Data.TrainSplit]
	lo, hi := rec.Sampler.NegativeWindow[0], rec.Sampler.NegativeWindow[1]
	ranking := map[string][]string{}
	queries := map[string]string{}
	for _, qid := range qrels.QueryIDs() {
		text, _ := ds.Queries.Text(qid)
		queries[qid] = text
		ids, err := rank(qid, text, hi)
		if err != nil {
			return nil, sampler.MineStats{}, err
		}
		ranking[qid] = ids
	}
	examples, stats, err := sampler.Mine(qrels, ranking, sampler.MineOptions{
		Negatives: rec.Sampler.HardNegatives, Lo: lo, Hi: hi, Strategy: sampler.Strategy(rec.Sampler.NegativeStrategy), Seed: seed})
	if err != nil {
		return nil, stats, err
	}
	smp, err := sampler.New(sampler.Collection{Queries: queries, DocIDs: ds.Corpus.IDs, DocTexts: passages, DocText: text, Qrels: qrels},
		examples, sampler.Options{BatchSize: rec.Train.BatchSize, HardNegatives: rec.Sampler.HardNegatives, Seed: seed,
			MaskFalseNegatives: rec.Sampler.FalseNegatives == "mask"})
	return smp, stats, err
}

// evaluateRetriever ranks every evaluation split's queries with BM25, the dense bi-encoder and
// their RRF, writes the TREC runs, fills metrics and prints one table per split.
// A non-nil sel holding the chosen checkpoint's corpus index (built when it was chosen, with
// the weights m now holds) serves instead of encoding the corpus again. A non-nil stream (the
// corpus on disk; passages is then nil) is encoded into embedding shards in the run directory
// and searched shard by shard, or, from index.ann_threshold passages on, read back into an HNSW
// graph in memory (dense.NewShardSearcher).
func evaluateRetriever(rec *configs.Recipe, ds *data.Dataset, tok *tokenize.Tokenizer, m *model.BiEncoder, zeroShot map[string]eval.Run, sel *selector, cosine bool,
	bm25 *index.BM25, passages []string, stream *streamedCorpus, dir string, metrics map[string]float64, out, progress io.Writer) error {
	var searcher *dense.Searcher
	var encodeSeconds float64
	if sel != nil && sel.searcher != nil {
		searcher, encodeSeconds = sel.searcher, sel.encodeSeconds
		sel.searcher = nil
	} else {
		start := time.Now()
		var err error
		if stream != nil {
			opt := dense.SearchOptions{Len: dense.Lengths{Query: rec.Tokenizer.QueryLength(), Passage: rec.Tokenizer.MaxLength},
				Cosine: cosine, Dynamic: rec.Tokenizer.DynamicPadding, ANNThreshold: rec.Index.ANNThreshold, ANN: annParams(rec)}
			searcher, err = dense.NewShardSearcher(m, tok, opt, stream.Tokens, filepath.Join(dir, StreamDir, ShardsDir), shardMeta(m), StreamShardSize)
		} else {
			searcher, err = newEvalSearcher(rec, m, tok, cosine, ds.Corpus.IDs, passages, progress)
		}
		if err != nil {
			return err
		}
		encodeSeconds = time.Since(start).Seconds()
	}
	defer searcher.Close()
	experiment.ReportTruncation(out, "eval corpus", searcher.Len.Passage, experiment.TruncPart{Name: "passages", Count: &searcher.PassageCut})
	reportSearch(out, "dense", searcher)
	if h := searcher.HNSW(); h != nil { // only then, so an exact run's metrics.json is unchanged
		p := h.Params()
		metrics["dense/hnsw_passages"] = float64(h.Len())
		metrics["dense/hnsw_m"] = float64(p.M)
		metrics["dense/hnsw_ef_construction"] = float64(p.EfConstruction)
		metrics["dense/hnsw_ef_search"] = float64(p.EfSearch)
		metrics["dense/hnsw_build_seconds"] = searcher.BuildSeconds
	}
	metrics["dense/encode_passages_per_second"] = float64(ds.Corpus.Len()) / encodeSeconds
	depth := rec.Eval.Depth
	for _, split := range rec.Eval.Splits {
		qrels := ds.Qrels[split]
		qids := qrels.QueryIDs()
		texts := make([]string, len(qids))
		for i, q := range qids {
			texts[i], _ = ds.Queries.Text(q)
		}
		searcher.QueryCut = experiment.TruncCount{}
		denseHits, prefixHits, err := searcher.SearchPrefixes(texts, depth)
		if err != nil {
			return err
		}
		experiment.ReportTruncation(out, "eval "+split, searcher.Len.Query, experiment.TruncPart{Name: "queries", Count: &searcher.QueryCut})
		runs := map[string]eval.Run{"bm25": {}, "dense": {}}
		for i, hits := range denseHits {
			runs["dense"][qids[i]] = hits
			runs["bm25"][qids[i]] = bm25.Search(texts[i], depth)
		}
		runs["finetuned"] = runs["dense"]
		if zr, ok := zeroShot[split]; ok {
			runs["zeroshot"] = zr
		}
		runs["rrf"] = index.RRF(rec.Eval.RRFK, depth, runs["bm25"], runs["dense"])
		for q, hits := range runs["rrf"] { // the fused list of two depth-d lists is cut to d
			runs["rrf"][q] = hits[:min(len(hits), depth)]
		}
		var systems []experiment.System
		for _, s := range rec.Eval.Systems {
			r, ok := runs[s]
			if !ok {
				return fmt.Errorf("eval.systems: %q is not a system of a retriever recipe (bm25, dense, finetuned, zeroshot, rrf)", s)
			}
			systems = append(systems, experiment.System{Name: s, Run: r})
		}
		// A Matryoshka model is also evaluated at each smaller prefix of loss.dims, after the
		// listed systems (bm25, rrf and the full vectors keep their names and numbers).
		for _, base := range []string{"dense", "finetuned"} {
			if !slices.Contains(rec.Eval.Systems, base) {
				continue
			}
			for _, d := range evalPrefixes(rec, m.Query.Dim()) {
				r := eval.Run{}
				for i, hits := range prefixHits[d] {
					r[qids[i]] = hits
				}
				systems = append(systems, experiment.System{Name: PrefixSystem(base, d), File: PrefixFile(base, d), Run: r})
			}
		}
		rows, err := experiment.EvaluateSystems(dir, split, split == rec.Data.TestSplit, qrels, systems, rec.Eval.Metrics, metrics)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\n%s split, %d queries (%s):\n%s", split, len(qids), filepath.Base(rec.Data.Dir), eval.FormatTable(rec.Eval.Metrics, rows))
	}
	return nil
}
