package reranker

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/crossenc"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// The reranker recipe (kind = "reranker") trains one cross-encoder per loss of rerank.losses,
// each from the same initialisation (seed), on lists of the first stage's candidates for the
// training queries, then reranks the first stage's top-k of every evaluated query:
//
//	<first>                  the first stage alone (e.g. "bm25"), its top-k
//	<first>+<loss>           the top-k ordered by the reranker trained with that loss
//	<first>+<loss>+interp    alpha * s_first + (1 - alpha) * s_rerank, both min-max normalised
//	                         per query, alpha in {0, 0.1, ..., 1} chosen by nDCG@10 on the dev split
//
// The models start from the seed's initialisation with the term-matching prior of
// rerank.match_init and rerank.match_word_scale (model.CrossEncoder.InitMatching), or from the
// weights of model.init_from (a cross-encoder export, a BertForSequenceClassification directory
// or a reranker model directory; export.OpenCrossEncoder), or from a pretrained encoder body
// there (a BertModel or sentence-transformers directory such as all-MiniLM-L6-v2, or a
// shared-tower bi-encoder): its encoder and BERT's pooler when it has one, the classifier (and a
// missing pooler) from the seed, without the term-matching prior (refused). The directory fixes
// the architecture: [model] sizes the recipe leaves out are taken from it, those it sets must
// agree (initfrom.go). With pretrain.steps > 0 these weights
// are first trained with the listwise loss on cropping lists of the corpus (sampler.CropLists:
// a span of a passage as the query, the passage as its positive, BM25 hits of the span as its
// negatives), and every loss starts from the result.
//
// Besides the files of every run, the run directory holds reranker-<loss>/, the finished model of
// each loss, and reranker-pretrain/ (checkpoint directories with latest, as checkpoints.Save
// writes them), so a resumed run does not retrain them. `train export -run RUN/reranker-<loss>`
// writes one as a Hugging Face BertForSequenceClassification.

// alphaMetric chooses the interpolation weight on the dev split.
const alphaMetric = "nDCG@10"

// FinalModelDir is the directory, inside a run directory, of the finished reranker of a loss.
func FinalModelDir(runDir, loss string) string { return filepath.Join(runDir, "reranker-"+loss) }

// The reranker kind: configs.Load accepts the sections it reads and the losses of
// rerank.losses.
func init() {
	experiment.Register("reranker", runReranker, configs.KindSpec{
		Sections: []string{"data", "tokenizer", "model", "pretrain", "train", "index", "eval", "rerank"},
		Losses:   rerankLosses,
		Own:      []configs.Section{section},
	})
}

// runReranker runs a reranker recipe as named stages, methods of rerankRun, which carries the
// run's state from one to the next. Everything that can be refused (the first stage, the
// init_from directory, the tokenizer, the memory estimate) is read before the run directory
// exists, so a bad input leaves nothing behind.
func runReranker(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	r := &rerankRun{rec: rec, o: o, rr: Of(rec), resume: o.ResumeDir != ""}
	defer r.close()
	err := experiment.RunStages(
		r.check,                              // a cross-encoder; eval.metrics within rerank.candidates
		r.load,                               // the judged splits, the passages, BM25 and the first stage
		r.initFrom,                           // model.init_from: its architecture, checked against the recipe
		r.open,                               // the tokenizer, the memory estimate, the seed's model, the run directory
		r.mine,                               // training lists of the first stage's hits; cropping lists
		r.restore,                            // a resumed run's latest checkpoint, the log
		func() error { return r.train(ctx) }, // the pretrained start, then one model per loss of rerank.losses
		r.evaluate,                           // the first stage reranked on the eval splits; metrics.json
	)
	return r.dir, err
}

// rerankRun is the state a reranker run hands from stage to stage.
type rerankRun struct {
	rec    *configs.Recipe // a copy holding model.init_from's architecture once initFrom has run
	o      experiment.Options
	rr     *Config
	resume bool

	ds       *data.Dataset
	passages []string
	bm25     *index.BM25
	first    *firstStage
	initDir  *export.CrossEncoderDir // model.init_from, nil for none
	tok      *tokenize.Tokenizer
	encCfg   model.EncoderConfig
	seed     *model.CrossEncoder // the seed's model, with init_from's weights or the matching prior
	dir      string
	tr       *rerankTrainer
	models   map[string]*model.CrossEncoder // the trained model of each loss
	lg       *trainer.Log
}

// check refuses what a reranker cannot run: a bi-encoder's encoder, a metric deeper than the
// reranked candidates.
func (r *rerankRun) check() error {
	if r.rec.Model.Encoder != model.EncoderTransformer {
		return fmt.Errorf(`model.encoder = %q: a reranker is a cross-encoder and needs "transformer"`, r.rec.Model.Encoder)
	}
	for _, name := range r.rec.Eval.Metrics {
		if _, k, err := configs.ParseMetric(name); err == nil && k > r.rr.Candidates {
			return fmt.Errorf("eval.metrics: %q needs %d hits but a reranker ranks rerank.candidates = %d", name, k, r.rr.Candidates)
		}
	}
	return nil
}

// load reads the judged splits (training, dev for the interpolation, evaluated), the passages,
// BM25 and the first stage: a bad run file or retriever checkpoint stops the run here.
func (r *rerankRun) load() error {
	rec := r.rec
	splits := []string{rec.Data.TrainSplit}
	if r.rr.Interpolate {
		splits = append(splits, rec.Data.DevSplit)
	}
	for _, s := range rec.Eval.Splits {
		if !slices.Contains(splits, s) {
			splits = append(splits, s)
		}
	}
	var err error
	if r.ds, err = data.LoadJudged(rec.Data.Dir, splits...); err != nil {
		return err
	}
	corpus := r.ds.Corpus
	r.passages = make([]string, corpus.Len())
	for i := range r.passages {
		r.passages[i] = corpus.Passage(i, rec.Data.TitleField)
	}
	start := time.Now()
	r.bm25 = index.NewBM25(corpus.IDs, r.passages, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	if r.first, err = newFirstStage(rec, r.ds, r.bm25, r.passages); err != nil {
		return err
	}
	if err := checkRerankSystems(rec, r.first.name); err != nil {
		return err
	}
	fmt.Fprintf(r.o.Out, "first stage: %s, ready in %.2fs\n", r.first.describe(), time.Since(start).Seconds())
	return nil
}

// initFrom opens model.init_from, refuses the matching prior on a pretrained body and takes the
// architecture the recipe leaves out from the directory, into a copy of the recipe (the run
// directory's resolved recipe records it).
func (r *rerankRun) initFrom() error {
	if r.rec.Model.InitFrom == "" {
		return nil
	}
	var err error
	if r.initDir, err = export.OpenCrossEncoder(r.rec.Model.InitFrom); err != nil {
		return fmt.Errorf("model.init_from: %w", err)
	}
	keys := keysOf(r.rec)
	if err := refuseMatchInit(r.rr, r.initDir, keys); err != nil {
		return err
	}
	rec := *r.rec
	r.rec = &rec
	taken, err := initArchitecture(&rec.Model, r.initDir, keys)
	if err != nil {
		return err
	}
	if len(taken) > 0 {
		fmt.Fprintf(r.o.Out, "init_from: architecture of %s: %s; from it, as the recipe does not set them: %s\n",
			r.initDir.Dir, describeArch(r.initDir), strings.Join(taken, ", "))
	}
	if L := rec.Tokenizer.MaxLength; L > rec.Model.MaxPosition {
		return fmt.Errorf("%stokenizer.max_length = %d exceeds the %d positions of model.init_from %s", keys.where("tokenizer.max_length"), L, rec.Model.MaxPosition, r.initDir.Dir)
	}
	return nil
}

// open reads the tokenizer, checks the memory estimate, builds the seed's model (init_from's
// weights or the term-matching prior), then makes the run directory and saves the tokenizer.
func (r *rerankRun) open() error {
	rec := r.rec
	tok, err := prepareRerankTokenizer(rec, r.o.ResumeDir, r.initDir, r.passages, r.o.Out)
	if err != nil {
		return err
	}
	r.encCfg = biencoder.EncoderConfig(rec, tok.VocabSize())
	if err := experiment.CheckMemory(rec, r.o.Out, Memory(rec, r.encCfg)); err != nil {
		return err
	}
	if r.seed, err = model.NewCrossEncoder(r.encCfg, uint64(rec.Seed)); err != nil {
		return err
	}
	if r.initDir != nil {
		if err := r.initDir.Init(r.seed); err != nil {
			return fmt.Errorf("model.init_from: %w", err)
		}
	} else if err := r.seed.InitMatching(r.rr.MatchInit, r.rr.MatchWordScale); err != nil {
		return fmt.Errorf("rerank.match_init, rerank.match_word_scale: %w", err)
	}
	dir, tok, tokPath, err := experiment.OpenRunDir(rec, r.o, tok)
	if err != nil {
		return err
	}
	r.dir, r.tok = dir, tok
	if r.initDir != nil {
		shapes := map[string][]int{}
		for _, p := range r.seed.Params() {
			shapes[p.Name] = p.Value.Shape()
		}
		reportInit(r.o.Out, r.initDir, len(r.seed.Params()), rec.Seed, shapes)
	}
	cfg := model.CrossEncoderConfig{Kind: model.KindCrossEncoder, Encoder: r.encCfg, MaxLength: rec.Tokenizer.MaxLength,
		FirstStage: r.first.source, TrainDepth: r.rr.TrainDepth, ListSize: r.rr.ListSize, DropAboveFirstPositive: r.rr.DropAboveFirstPositive,
		PretrainSteps: rec.Pretrain.Steps, PretrainDepth: r.rr.PretrainDepth, PretrainWindow: r.rr.PretrainWindow,
		InitFrom: rec.Model.InitFrom, MatchInit: r.rr.MatchInit, MatchWordScale: r.rr.MatchWordScale}
	r.tr = &rerankTrainer{Env: experiment.Env{Rec: rec, Opts: r.o, Dir: r.dir, Seed: uint64(rec.Seed), TokenizerPath: tokPath}, tok: tok, cfg: cfg}
	return nil
}

// mine makes the training lists, the first stage's top rerank.train_depth of every training
// query, and with pretrain.steps > 0 the cropping lists, whose negatives BM25 draws whatever the
// first stage (a run file cannot rank pseudo-queries, and BM25 is what their positives must beat).
func (r *rerankRun) mine() error {
	rec, rr, corpus := r.rec, r.rr, r.ds.Corpus
	qrels := r.ds.Qrels[rec.Data.TrainSplit]
	trainQIDs := qrels.QueryIDs()
	queryText := map[string]string{}
	texts := make([]string, len(trainQIDs))
	for i, q := range trainQIDs {
		texts[i], _ = r.ds.Queries.Text(q)
		queryText[q] = texts[i]
	}
	trainHits, err := r.first.rank(trainQIDs, texts, rr.TrainDepth)
	if err != nil {
		return err
	}
	ranking := map[string][]string{}
	for i, q := range trainQIDs {
		ranking[q] = hitIDs(trainHits[i])
	}
	lists, st, err := sampler.NewLists(sampler.Collection{Queries: queryText, DocIDs: corpus.IDs, DocTexts: r.passages, Qrels: qrels},
		ranking, sampler.ListOptions{Size: rr.ListSize, BatchSize: rec.Train.BatchSize, Seed: uint64(rec.Seed),
			DropAboveFirstPositive: rr.DropAboveFirstPositive})
	if err != nil {
		return err
	}
	r.tr.lists = lists
	fmt.Fprintf(r.o.Out, "lists: %d training queries, %d %s candidates (top %d), %d judged relevant; %d dropped as suspected false negatives; %d queries without a relevant candidate; %d short of %d negatives\n",
		st.Queries, st.Candidates, r.first.name, rr.TrainDepth, st.Relevant, st.Dropped, len(st.NoRelevant), len(st.Short), rr.ListSize-1)
	if rec.Pretrain.Steps == 0 {
		return nil
	}
	search := func(q string, n int) ([]string, error) { return hitIDs(r.bm25.Search(q, n)), nil }
	pt := rec.Pretrain
	r.tr.crops, err = sampler.NewCropLists(sampler.Collection{DocIDs: corpus.IDs, DocTexts: r.passages}, search,
		sampler.CropListOptions{Size: rr.ListSize, BatchSize: pt.BatchSize, MinLen: pt.CropMin, MaxLen: pt.CropMax,
			Depth: rr.PretrainDepth, Window: rr.PretrainWindow, Seed: uint64(rec.Seed)})
	return err
}

// restore reads a resumed run's latest checkpoint (the phase and step it continues from) and
// opens the run's log.
func (r *rerankRun) restore() error {
	if r.resume && !experiment.HasCheckpoint(r.dir) {
		fmt.Fprintf(r.o.Out, "resume: %s has no checkpoint yet; starting from the first phase\n", r.dir)
	} else if r.resume {
		ck, err := checkpoints.Load(r.dir)
		if err != nil {
			return err
		}
		r.tr.resumeFrom = ck
		fmt.Fprintf(r.o.Out, "resume: %s at %s step %d\n", ck.Dir, ck.Trainer.Phase, ck.Trainer.Step)
	}
	var err error
	if r.lg, err = experiment.OpenRunLog(r.dir, r.resume); err != nil {
		return err
	}
	r.tr.Log = r.lg
	return nil
}

// train trains the start every loss shares (the seed's model, pretrained on cropping lists with
// pretrain.steps > 0), then one model per loss of rerank.losses from it.
func (r *rerankRun) train(ctx context.Context) error {
	init, err := r.tr.initial(ctx, r.seed)
	if err != nil {
		return err
	}
	r.models = map[string]*model.CrossEncoder{}
	for _, loss := range r.rr.Losses {
		m, err := r.tr.train(ctx, rerankPhase{name: loss, loss: loss, steps: r.rec.Train.Steps, batch: r.rec.Train.BatchSize, next: r.tr.lists.Batch}, init)
		if err != nil {
			return err
		}
		r.models[loss] = m
	}
	return nil
}

// evaluate reranks the first stage's top rerank.candidates on the eval splits with every model
// (and interpolated with the first stage), and writes metrics.json.
func (r *rerankRun) evaluate() error {
	tr := r.tr
	metrics := map[string]float64{"train/seconds": tr.seconds, "train/pairs": float64(tr.pairs), "train/passages_cut": float64(tr.cut)}
	if tr.seconds > 0 {
		metrics["train/examples_per_second"] = float64(tr.pairs) / tr.seconds
	}
	ev := &rerankEval{rec: r.rec, o: r.o, dir: r.dir, ds: r.ds, tok: r.tok, first: r.first, models: r.models, metrics: metrics}
	if err := ev.run(); err != nil {
		return err
	}
	return experiment.WriteMetrics(r.dir, metrics)
}

// close closes the run's log.
func (r *rerankRun) close() {
	if r.lg != nil {
		r.lg.Close()
	}
}

// prepareRerankTokenizer returns the run's tokenizer without writing anything (experiment.PrepareTokenizer),
// except that with model.init_from and no tokenizer.file it is the init_from directory's: the
// weights come with their vocabulary.
func prepareRerankTokenizer(rec *configs.Recipe, resumeDir string, initDir *export.CrossEncoderDir, passages []string, out io.Writer) (*tokenize.Tokenizer, error) {
	if resumeDir != "" || rec.Tokenizer.File != "" || initDir == nil {
		return experiment.PrepareTokenizer(rec, resumeDir, passages, out)
	}
	if initDir.Tokenizer == "" {
		return nil, fmt.Errorf("model.init_from: %s has no %s; name the tokenizer its weights were trained with in tokenizer.file", initDir.Dir, export.TokenizerFile)
	}
	fmt.Fprintf(out, "tokenizer: %s (from model.init_from; tokenizer.train is not used)\n", initDir.Tokenizer)
	return tokenize.Load(initDir.Tokenizer)
}

// checkRerankSystems checks eval.systems: a reranker recipe reports its first stage and its
// rerankings, so the list holds "rerank" and at most the first stage's name.
func checkRerankSystems(rec *configs.Recipe, firstName string) error {
	if !slices.Contains(rec.Eval.Systems, "rerank") {
		return fmt.Errorf(`eval.systems: a reranker recipe reports its rerankings: list "rerank" (and %q, the first stage, which is always shown)`, firstName)
	}
	for _, s := range rec.Eval.Systems {
		if s != "rerank" && s != firstName {
			return fmt.Errorf(`eval.systems: %q is not a system of a reranker recipe whose first stage is %s (%q, "rerank")`, s, firstName, firstName)
		}
	}
	return nil
}

func hitIDs(hits []index.Hit) []string {
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.DocID
	}
	return ids
}

// firstStage ranks the corpus for queries: BM25, a dense retriever's checkpoint or a run file.
type firstStage struct {
	name   string // system name: "bm25", "dense" or "run"
	source string // "bm25", the checkpoint directory or the run file
	// rank returns the depth best hits of each query (ids and texts parallel), best first.
	rank func(qids, texts []string, depth int) ([][]index.Hit, error)
}

func (f *firstStage) describe() string {
	if f.source == f.name {
		return f.name
	}
	return f.name + " (" + f.source + ")"
}

func newFirstStage(rec *configs.Recipe, ds *data.Dataset, bm25 *index.BM25, passages []string) (*firstStage, error) {
	src := Of(rec).FirstStage
	if src == "bm25" {
		return &firstStage{name: "bm25", source: "bm25", rank: func(_, texts []string, depth int) ([][]index.Hit, error) {
			out := make([][]index.Hit, len(texts))
			for i, t := range texts {
				out[i] = bm25.Search(t, depth)
			}
			return out, nil
		}}, nil
	}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("rerank.first_stage: %w", err)
	}
	if !fi.IsDir() {
		run, err := readFirstStageRun(src, ds)
		if err != nil {
			return nil, err
		}
		return &firstStage{name: "run", source: src, rank: func(qids, _ []string, depth int) ([][]index.Hit, error) {
			out := make([][]index.Hit, len(qids))
			for i, q := range qids {
				hits, ok := run[q]
				if !ok {
					return nil, fmt.Errorf("%s: first-stage run: no ranking for query %q", src, q)
				}
				out[i] = hits[:min(depth, len(hits))]
			}
			return out, nil
		}}, nil
	}
	return denseFirstStage(src, ds, passages)
}

// denseFirstStage loads the latest checkpoint of a retriever run directory with its tokenizer
// and encodes the corpus.
func denseFirstStage(runDir string, ds *data.Dataset, passages []string) (*firstStage, error) {
	ck, err := checkpoints.Load(runDir)
	if err != nil {
		return nil, fmt.Errorf("rerank.first_stage: %w", err)
	}
	var cfg model.BiEncoderConfig
	if err := ck.DecodeConfig(&cfg); err != nil {
		return nil, fmt.Errorf("rerank.first_stage: %w", err)
	}
	if cfg.Kind != model.KindBiEncoder {
		return nil, fmt.Errorf("rerank.first_stage: %s holds a %q, want a bi-encoder", filepath.Join(ck.Dir, checkpoints.ConfigFile), cfg.Kind)
	}
	m, err := model.NewBiEncoder(cfg.Encoder, cfg.SharedTowers, 0)
	if err != nil {
		return nil, fmt.Errorf("rerank.first_stage: %s: %w", ck.Dir, err)
	}
	if err := experiment.SetParams(m.Params(), ck.Params); err != nil {
		return nil, fmt.Errorf("rerank.first_stage: %s: %w", ck.Dir, err)
	}
	tok, err := tokenize.Load(filepath.Join(ck.Dir, checkpoints.TokenizerFile))
	if err != nil {
		return nil, fmt.Errorf("rerank.first_stage: %w", err)
	}
	sim, err := losses.ParseSimilarity(cfg.Similarity)
	if err != nil {
		return nil, fmt.Errorf("rerank.first_stage: %s: %w", filepath.Join(ck.Dir, checkpoints.ConfigFile), err)
	}
	searcher, err := biencoder.NewSearcher(m, tok, biencoder.SearchOptions{
		Len: biencoder.Lengths{Query: cfg.MaxLength, Passage: cfg.MaxLength}, Cosine: sim == losses.Cosine,
	}, ds.Corpus.IDs, passages)
	if err != nil {
		return nil, err
	}
	return &firstStage{name: "dense", source: ck.Dir, rank: func(_, texts []string, depth int) ([][]index.Hit, error) {
		// The query graphs are released after each ranking (the first stage has no end).
		defer searcher.Close()
		return searcher.Search(texts, depth)
	}}, nil
}

// readFirstStageRun reads a TREC run file with eval.ReadTREC and checks it against the
// collection: a doc id missing from the corpus or a query id missing from queries.jsonl is an
// error naming the file and line. Each query's hits are sorted by score (as trec_eval reads a run).
func readFirstStageRun(path string, ds *data.Dataset) (eval.Run, error) {
	run, err := eval.ReadTREC(path)
	if err != nil {
		return nil, err
	}
	f, err := bounded.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if _, ok := ds.Corpus.Index(fields[2]); !ok {
			return nil, fmt.Errorf("%s:%d: first-stage run: doc %q is not in the corpus (%s)", path, line, fields[2], filepath.Join(ds.Dir, "corpus.jsonl"))
		}
		if _, ok := ds.Queries.Index(fields[0]); !ok {
			return nil, fmt.Errorf("%s:%d: first-stage run: query %q is not in %s", path, line, fields[0], filepath.Join(ds.Dir, "queries.jsonl"))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, hits := range run {
		index.SortHits(hits)
	}
	return run, nil
}

// rerankTrainer trains the cross-encoders of a run, one loss at a time.
type rerankTrainer struct {
	experiment.Env
	tok        *tokenize.Tokenizer
	cfg        model.CrossEncoderConfig
	lists      *sampler.Lists
	crops      *sampler.CropLists      // cropping lists of the pretraining phase; nil without one
	initDir    *export.CrossEncoderDir // model.init_from, nil for none (or when resuming)
	resumeFrom *checkpoints.Checkpoint // the run's latest checkpoint when resuming

	seconds    float64
	pairs, cut int
}

// PretrainPhase names the cropping-list phase of a reranker run (its checkpoints and log lines,
// and its finished model, reranker-pretrain/).
const PretrainPhase = "pretrain"

// rerankPhase is one training phase: a loss on a source of lists, for a number of steps.
type rerankPhase struct {
	name  string // "pretrain" or the loss
	loss  string // "pairwise", "listwise" or "pointwise"
	steps int
	batch int // lists per step
	next  func(step int) (sampler.ListBatch, error)
}

// initial returns the weights every loss starts from: m (the seed's initialisation, or the
// model.init_from weights), trained on cropping lists when pretrain.steps > 0.
func (t *rerankTrainer) initial(ctx context.Context, m *model.CrossEncoder) (*model.CrossEncoder, error) {
	pt := t.Rec.Pretrain
	if pt.Steps == 0 {
		return m, nil
	}
	return t.train(ctx, rerankPhase{name: PretrainPhase, loss: "listwise", steps: pt.Steps, batch: pt.BatchSize, next: t.crops.Batch}, m)
}

// train returns the cross-encoder of a phase: loaded from its finished model when a resumed run
// has one, else trained from init's weights (or from the resumed checkpoint when it is this
// phase's) and saved.
func (t *rerankTrainer) train(ctx context.Context, ph rerankPhase, init *model.CrossEncoder) (*model.CrossEncoder, error) {
	rec := t.Rec
	seed := uint64(rec.Seed)
	cfg := t.cfg
	cfg.Loss = ph.loss
	m, err := model.NewCrossEncoder(cfg.Encoder, seed)
	if err != nil {
		return nil, err
	}
	if err := experiment.SetParams(m.Params(), experiment.ParamTensors(init.Params())); err != nil {
		return nil, err
	}
	final := FinalModelDir(t.Dir, ph.name)
	startStep := 0
	var optState *checkpoints.OptimizerState
	if ck := t.resumeFrom; ck != nil {
		if done, err := checkpoints.Load(final); err == nil && done.Trainer.Phase == ph.name && done.Trainer.Step == ph.steps {
			if err := experiment.SetParams(m.Params(), done.Params); err != nil {
				return nil, fmt.Errorf("%s: %w", done.Dir, err)
			}
			fmt.Fprintf(t.Opts.Out, "%s: finished model loaded from %s\n", ph.name, done.Dir)
			return m, nil
		}
		if ck.Trainer.Phase == ph.name {
			if err := experiment.SetParams(m.Params(), ck.Params); err != nil {
				return nil, fmt.Errorf("%s: %w", ck.Dir, err)
			}
			startStep, optState = ck.Trainer.Step, ck.Optimizer
		}
	}
	if startStep < ph.steps {
		task, err := newRerankTask(m, t.tok, ph.loss, ph.batch, Of(rec).ListSize, rec.Tokenizer.MaxLength, seed, phaseStream(ph.name), ph.next)
		if err != nil {
			return nil, err
		}
		res, _, err := t.RunPhase(ctx, experiment.Phase{Name: ph.name, Steps: ph.steps, Task: task, LR: rec.Train.LR,
			Warmup: experiment.ShortWarmup(rec.Train.WarmupSteps, ph.steps), CheckpointEvery: rec.Train.CheckpointEvery,
			Params: m.Params(), Config: cfg, Start: startStep, Optimizer: optState})
		task.Close()
		if err != nil {
			return nil, err
		}
		t.seconds += res.Seconds
		t.pairs += res.Examples
		t.cut += task.cut
	}
	return m, t.Save(final, m.Params(), cfg, nil, checkpoints.TrainerState{Step: ph.steps, Phase: ph.name, Seed: seed})
}

// phaseStream is the dropout stream of a training phase, XORed into the seed.
func phaseStream(phase string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(phase))
	return h.Sum64()
}

// rerankTask trains a cross-encoder on batches of B lists of K passages: one Gorgonia graph
// scoring the B*K pairs (L tokens each) and the loss over the [B,K] scores, built once.
type rerankTask struct {
	m      *model.CrossEncoder
	tok    *tokenize.Tokenizer
	loss   losses.Spec
	B, K   int
	L      int
	seed   uint64
	stream uint64
	next   func(step int) (sampler.ListBatch, error)
	vm     gorgonia.VM
	in     *model.Inputs
	out    *gorgonia.Node // the loss
	labels *tensor.Dense  // [B,K] labels of a loss that reads them (graded or binary); else nil
	trainer.GraphParams
	cut   int                 // pairs whose passage was cut, over the steps run
	pairs tokenize.TruncCount // what truncation to L cut of the pairs, over the steps run
}

func (t *rerankTask) Truncation() (int, []tokenize.TruncPart) {
	return t.L, []tokenize.TruncPart{{Name: "pairs", Count: &t.pairs}}
}

// newRerankTask builds the training graph: the B*K pair scores and the loss of the losses
// table named loss, which must train on lists.
func newRerankTask(m *model.CrossEncoder, tok *tokenize.Tokenizer, loss string, B, K, L int, seed, stream uint64,
	next func(step int) (sampler.ListBatch, error)) (*rerankTask, error) {
	spec, err := losses.Lookup(loss)
	if err != nil {
		return nil, fmt.Errorf("rerank.losses: %w", err)
	}
	if spec.Batch != losses.Lists {
		return nil, fmt.Errorf("rerank.losses: %q trains on %s batches, a cross-encoder on lists", loss, spec.Batch)
	}
	t := &rerankTask{m: m, tok: tok, loss: spec, B: B, K: K, L: L, seed: seed, stream: stream, next: next}
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	t.in = model.NewInputs(g, B*K, L, "pair")
	s, err := m.Score(b, t.in, true) // [B*K]
	if err != nil {
		return nil, err
	}
	if spec.Labels != losses.NoLabels {
		t.labels = tensor.New(tensor.WithShape(B, K), tensor.Of(tensor.Float32))
	}
	if t.out, err = spec.Build(losses.Inputs{Scores: s, B: B, K: K, Labels: t.labels}); err != nil {
		return nil, err
	}
	if _, err := gorgonia.Grad(t.out, b.Nodes()...); err != nil {
		return nil, fmt.Errorf("gradient graph: %w", err)
	}
	model.ShareBuffers(g, t.out) // only the loss and the gradients are read after a run
	t.vm = gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...))
	t.GraphParams = trainer.NewGraphParams(b, t.vm)
	return t, nil
}

// Step trains on the lists of step; the examples it reports are the B*K pairs scored.
func (t *rerankTask) Step(step int) (float64, int, error) {
	lb, err := t.next(step)
	if err != nil {
		return 0, 0, err
	}
	if len(lb.QueryIDs) != t.B || lb.K != t.K || len(lb.Labels) != t.B*t.K {
		return 0, 0, fmt.Errorf("%d lists of %d, graph built for %d of %d", len(lb.QueryIDs), lb.K, t.B, t.K)
	}
	for i, l := range lb.Labels {
		if (i%t.K == 0) != (l > 0) {
			return 0, 0, fmt.Errorf("list %d slot %d has label %d: slot 0 must be the only judged-relevant passage", i/t.K, i%t.K, l)
		}
	}
	if t.labels != nil {
		y := t.labels.Data().([]float32)
		for i, l := range lb.Labels {
			switch {
			case t.loss.Labels == losses.GradedLabels:
				y[i] = float32(l) // the loss normalises each row
			case l > 0:
				y[i] = 1
			default:
				y[i] = 0
			}
		}
	}
	enc := t.pairs.Add(t.tok.EncodePairBatch(lb.PairQueries(), lb.Passages, t.L))
	t.cut += enc.Truncated
	if err := t.in.Let(enc.IDs, enc.Mask, enc.Types); err != nil {
		return 0, 0, err
	}
	// Dropout masks depend on (seed, phase, step) only, so a resumed run draws the same ones.
	t.m.SetRNG(rand.New(rand.NewPCG(t.seed^t.stream, uint64(step))))
	if err := t.Run(); err != nil {
		return 0, 0, err
	}
	return trainer.ScalarValue(t.out), t.B * t.K, nil
}

func (t *rerankTask) Close() { t.vm.Close() }

// rerankEval reranks the first stage's top-k of the evaluated splits with every model.
type rerankEval struct {
	rec     *configs.Recipe
	o       experiment.Options
	dir     string
	ds      *data.Dataset
	tok     *tokenize.Tokenizer
	first   *firstStage
	models  map[string]*model.CrossEncoder
	metrics map[string]float64
	done    map[string]splitRuns // splits already reranked
}

// splitRuns are the first stage's and each reranker's runs over a split's top-k, with the
// cost of scoring them.
type splitRuns struct {
	first    eval.Run
	reranked map[string]eval.Run // by loss
	pairs    int                 // (query, candidate) pairs scored per reranker
	cut      int                 // pairs whose passage was cut to fit L
	seconds  map[string]float64  // scoring time by loss
}

func (e *rerankEval) run() error {
	rr := Of(e.rec)
	alphas := map[string]float64{}
	if rr.Interpolate {
		dev := e.rec.Data.DevSplit
		runs, err := e.rerankSplit(dev)
		if err != nil {
			return err
		}
		for _, loss := range rr.Losses {
			name := e.first.name + "+" + loss + "+interp"
			alpha, curve, err := chooseAlpha(runs.first, runs.reranked[loss], e.ds.Qrels[dev])
			if err != nil {
				return err
			}
			alphas[loss] = alpha
			e.metrics[name+"/alpha"] = alpha
			e.metrics[name+"/dev_"+alphaMetric] = curve[int(math.Round(alpha*10))]
			var b strings.Builder
			for i, v := range curve {
				fmt.Fprintf(&b, " %.1f:%.4f", float64(i)/10, v)
			}
			fmt.Fprintf(e.o.Out, "%s: alpha %.1f chosen on %s (%d queries) by %s;%s\n", name, alpha, dev, len(e.ds.Qrels[dev].QueryIDs()), alphaMetric, b.String())
		}
	}
	for _, split := range e.rec.Eval.Splits {
		primary := split == e.rec.Data.TestSplit
		runs, err := e.rerankSplit(split)
		if err != nil {
			return err
		}
		key := func(system string) string { // as EvaluateSystems names a split's metrics
			if primary {
				return system
			}
			return system + "." + split
		}
		e.metrics[key("rerank")+"/pairs"] = float64(runs.pairs)
		e.metrics[key("rerank")+"/passages_cut"] = float64(runs.cut)
		for _, loss := range rr.Losses {
			e.metrics[key(e.first.name+"+"+loss)+"/pairs_per_second"] = float64(runs.pairs) / runs.seconds[loss]
		}
		systems := []experiment.System{{Name: e.first.name, Run: runs.first}}
		for _, loss := range rr.Losses {
			systems = append(systems, experiment.System{Name: e.first.name + "+" + loss, Run: runs.reranked[loss]})
		}
		if rr.Interpolate {
			for _, loss := range rr.Losses {
				systems = append(systems, experiment.System{Name: e.first.name + "+" + loss + "+interp",
					Run: interpolate(runs.first, runs.reranked[loss], alphas[loss])})
			}
		}
		rows, err := experiment.EvaluateSystems(e.dir, split, primary, e.ds.Qrels[split], systems, e.rec.Eval.Metrics, e.metrics)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.o.Out, "\n%s split, %d queries (%s), top %d of %s reranked:\n%s", split, len(e.ds.Qrels[split].QueryIDs()),
			filepath.Base(e.rec.Data.Dir), rr.Candidates, e.first.name, eval.FormatTable(e.rec.Eval.Metrics, rows))
	}
	return nil
}

// rerankSplit ranks the split's queries with the first stage and scores every (query,
// candidate) pair with every model (once per split: a second call returns the first's runs).
func (e *rerankEval) rerankSplit(split string) (splitRuns, error) {
	if runs, ok := e.done[split]; ok {
		return runs, nil
	}
	k := Of(e.rec).Candidates
	L := e.rec.Tokenizer.MaxLength
	qids := e.ds.Qrels[split].QueryIDs()
	texts := make([]string, len(qids))
	for i, q := range qids {
		texts[i], _ = e.ds.Queries.Text(q)
	}
	hits, err := e.first.rank(qids, texts, k)
	if err != nil {
		return splitRuns{}, err
	}
	runs := splitRuns{first: eval.Run{}, reranked: map[string]eval.Run{}, seconds: map[string]float64{}}
	var pq, pp []string
	for i, q := range qids {
		runs.first[q] = hits[i]
		for _, h := range hits[i] {
			d, _ := e.ds.Corpus.Index(h.DocID)
			pq = append(pq, texts[i])
			pp = append(pp, e.ds.Corpus.Passage(d, e.rec.Data.TitleField))
		}
	}
	var pairs tokenize.TruncCount
	enc := pairs.Add(e.tok.EncodePairBatch(pq, pp, L))
	runs.pairs, runs.cut = len(pq), enc.Truncated
	fmt.Fprintf(e.o.Out, "%s: %d queries, %d (query, passage) pairs\n", split, len(qids), len(pq))
	tokenize.ReportTruncation(e.o.Out, "eval "+split, L, tokenize.TruncPart{Name: "pairs", Count: &pairs})
	for _, loss := range Of(e.rec).Losses {
		start := time.Now()
		scores, err := scorePairs(e.models[loss], enc, len(pq), L, e.o.Progress, fmt.Sprintf("score %s %s", split, loss))
		if err != nil {
			return splitRuns{}, err
		}
		runs.seconds[loss] = max(time.Since(start).Seconds(), 1e-9)
		fmt.Fprintf(e.o.Out, "%s: %s scored %d pairs in %.1fs (%.0f pairs/s)\n", split, loss, len(pq), runs.seconds[loss], float64(len(pq))/runs.seconds[loss])
		run := eval.Run{}
		off := 0
		for i, q := range qids {
			rh := make([]index.Hit, len(hits[i]))
			for j, h := range hits[i] {
				rh[j] = index.Hit{DocID: h.DocID, Score: float64(scores[off+j])}
			}
			off += len(hits[i])
			index.SortHits(rh)
			run[q] = rh
		}
		runs.reranked[loss] = run
	}
	if e.done == nil {
		e.done = map[string]splitRuns{}
	}
	e.done[split] = runs
	return runs, nil
}

// The pair scoring of evaluation is package crossenc's (shared with the retriever's
// distillation teacher).
var (
	scorePairs = crossenc.Score
	bucketLen  = crossenc.BucketLen
)

// scoreBatch is the most pairs per inference graph run (crossenc.Batch).
const scoreBatch = crossenc.Batch

// interpolate mixes two rankings of the same candidates: per query, each run's scores are
// min-max normalised to [0, 1] (all 0 when they are all equal) and a candidate scores
// alpha * first + (1 - alpha) * rerank. Candidates missing from rerank get 0 for it.
func interpolate(first, rerank eval.Run, alpha float64) eval.Run {
	out := make(eval.Run, len(first))
	for q, fh := range first {
		fn, rn := minMax(fh), minMax(rerank[q])
		hits := make([]index.Hit, len(fh))
		for i, h := range fh {
			hits[i] = index.Hit{DocID: h.DocID, Score: alpha*fn[h.DocID] + (1-alpha)*rn[h.DocID]}
		}
		index.SortHits(hits)
		out[q] = hits
	}
	return out
}

// minMax maps each hit's doc id to (score - min) / (max - min), or 0 when max == min.
func minMax(hits []index.Hit) map[string]float64 {
	out := make(map[string]float64, len(hits))
	if len(hits) == 0 {
		return out
	}
	lo, hi := hits[0].Score, hits[0].Score
	for _, h := range hits {
		lo, hi = min(lo, h.Score), max(hi, h.Score)
	}
	for _, h := range hits {
		if hi > lo {
			out[h.DocID] = (h.Score - lo) / (hi - lo)
		} else {
			out[h.DocID] = 0
		}
	}
	return out
}

// chooseAlpha evaluates the interpolation of first and rerank at alpha = 0, 0.1, ..., 1 on
// qrels by alphaMetric and returns the best alpha (the smallest of equal ones) and the curve.
func chooseAlpha(first, rerank eval.Run, qrels map[string]map[string]int) (float64, []float64, error) {
	curve := make([]float64, 11)
	best := 0
	for i := range curve {
		m, err := eval.Evaluate(interpolate(first, rerank, float64(i)/10), qrels, []string{alphaMetric})
		if err != nil {
			return 0, nil, err
		}
		curve[i] = m[alphaMetric]
		if curve[i] > curve[best] {
			best = i
		}
	}
	return float64(best) / 10, curve, nil
}
