package retriever

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/curve"
	"github.com/ragtrain/ragtrain/index/ann"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// Files of a retriever run directory, beside those of every run.
const (
	// ExamplesFile lists the training examples as mined (one JSON object per line: query_id,
	// query, positive_id, positive, negative_ids, negatives), so that a peer (e.g.
	// sentence-transformers, tools/peer) trains on the same hard negatives.
	ExamplesFile = "train_examples.jsonl"
	// BestDir holds the checkpoint eval.select_metric chose on the dev split.
	BestDir = "best"
)

// selectedPhase names the checkpoint that holds the chosen model after training (the run's
// latest, so `train export` and a resumed run read it).
const selectedPhase = "selected"

// newSearcher encodes the passages with m's passage tower as the recipe says: passages cut
// to tokenizer.max_length, queries to tokenizer.query_max_length, each batch padded to its
// longest text with tokenizer.dynamic_padding (else to the maximum, as every recipe before
// SciFact ran), with a progress bar on progress (nil: none). The caller closes it.
// From index.ann_threshold passages on the corpus is searched with an HNSW graph (annParams).
func newSearcher(rec *configs.Recipe, m *model.BiEncoder, tok *tokenize.Tokenizer, cosine bool, ids, passages []string, progress io.Writer) (*biencoder.Searcher, error) {
	return biencoder.NewSearcher(m, tok, biencoder.SearchOptions{
		Len:    biencoder.Lengths{Query: rec.Tokenizer.QueryLength(), Passage: rec.Tokenizer.MaxLength},
		Cosine: cosine, Dynamic: rec.Tokenizer.DynamicPadding, Progress: progress,
		ANNThreshold: rec.Index.ANNThreshold, ANN: annParams(rec),
	}, ids, passages)
}

// annParams are the HNSW parameters of the recipe's index.ann_* keys, levels drawn with the
// recipe's seed.
func annParams(rec *configs.Recipe) ann.Params {
	return ann.Params{M: rec.Index.ANNM, EfConstruction: rec.Index.ANNEfConstruction, EfSearch: rec.Index.ANNEfSearch, Seed: uint64(rec.Seed)}
}

// reportSearch prints, when sr searches with HNSW, "<what>: HNSW over N passages (M, efC,
// efSearch), built in X s; the ranking is approximate" on out, so a reader of the run knows;
// exact search prints nothing (the output of every recipe without index.ann_threshold is
// unchanged).
func reportSearch(out io.Writer, what string, sr *biencoder.Searcher) {
	if sr.HNSW() != nil {
		fmt.Fprintf(out, "%s: %s; the ranking is approximate (index.ann_threshold)\n", what, sr.Describe())
	}
}

// newEvalSearcher is newSearcher for the trained model, which also indexes the Matryoshka
// prefixes evaluated (evalPrefixes).
func newEvalSearcher(rec *configs.Recipe, m *model.BiEncoder, tok *tokenize.Tokenizer, cosine bool, ids, passages []string, progress io.Writer) (*biencoder.Searcher, error) {
	return biencoder.NewSearcher(m, tok, biencoder.SearchOptions{
		Len:    biencoder.Lengths{Query: rec.Tokenizer.QueryLength(), Passage: rec.Tokenizer.MaxLength},
		Cosine: cosine, Dynamic: rec.Tokenizer.DynamicPadding, Progress: progress, Prefixes: evalPrefixes(rec, m.Query.Dim()),
		ANNThreshold: rec.Index.ANNThreshold, ANN: annParams(rec),
	}, ids, passages)
}

// evalPrefixes are the embedding sizes below the full h that a Matryoshka recipe evaluates
// beside it: loss.dims without h (nil for other losses).
func evalPrefixes(rec *configs.Recipe, h int) []int {
	if rec.Loss.Name != "matryoshka_infonce" {
		return nil
	}
	var out []int
	for _, d := range rec.Loss.Dims {
		if d < h {
			out = append(out, d)
		}
	}
	return out
}

// PrefixSystem names the system of base ("finetuned" or "dense") searched with the first m
// coordinates of every vector: "finetuned@256" in metrics.json and the results table, and
// PrefixFile's "finetuned_d256" in runs/<split>.finetuned_d256.trec.
func PrefixSystem(base string, m int) string { return fmt.Sprintf("%s@%d", base, m) }

// PrefixFile is the file-safe name of PrefixSystem(base, m): "finetuned_d256".
func PrefixFile(base string, m int) string { return fmt.Sprintf("%s_d%d", base, m) }

// CurveFile is the run directory's plot of the training loss and the dev metric against the
// step (experiment/internal/curve), redrawn at every dev evaluation and when training ends.
const CurveFile = "training_curve.png"

// selector is model selection on the dev split (eval.select_metric): at every dev evaluation
// of the train phase (every train.eval_every steps, else at its regular checkpoints) the
// corpus, or eval.dev_corpus_sample's sample of it, is encoded with the current weights, the
// dev queries ranked, the best checkpoint so far copied to <run>/best/, the evaluation logged
// and the curve redrawn; train.patience evaluations in a row without a gain stop the phase.
type selector struct {
	rec      *configs.Recipe
	m        *model.BiEncoder
	tok      *tokenize.Tokenizer
	cosine   bool
	ids      []string // the passages the dev queries are ranked against
	passages []string
	sampled  bool // ids is a sample of the corpus (eval.dev_corpus_sample)
	env      *experiment.Env
	cfg      model.BiEncoderConfig
	qids     []string
	texts    []string
	qrels    map[string]map[string]int
	metric   string

	experiment.Selection
	resumed checkpoints.TrainerState
	// lastLoss is the training loss of the batch of the step just completed (the train task's).
	lastLoss func() float64
	// searcher is the corpus index of the best checkpoint when this segment of the run built it
	// over the whole corpus (encodeSeconds its encoding time), so the final evaluation need not
	// encode the corpus again.
	searcher      *biencoder.Searcher
	encodeSeconds float64
}

// newSelector returns nil when the recipe selects nothing. state is the checkpoint the run
// resumes from (zero for a fresh run): it carries the best so far and the patience spent.
func newSelector(rec *configs.Recipe, ds *data.Dataset, tok *tokenize.Tokenizer, m *model.BiEncoder, cosine bool, passages []string,
	env *experiment.Env, cfg model.BiEncoderConfig, state checkpoints.TrainerState) *selector {
	if rec.Eval.SelectMetric == "" {
		return nil
	}
	qrels := ds.Qrels[rec.Data.DevSplit]
	s := &selector{rec: rec, m: m, tok: tok, cosine: cosine, ids: ds.Corpus.IDs, passages: passages, env: env, cfg: cfg,
		qrels: qrels, metric: rec.Eval.SelectMetric, resumed: state,
		Selection: experiment.RestoreSelection(state, rec.Eval.SelectMetric, rec.Train.Patience)}
	for _, q := range qrels.QueryIDs() {
		text, _ := ds.Queries.Text(q)
		s.qids = append(s.qids, q)
		s.texts = append(s.texts, text)
	}
	if n := rec.Eval.DevCorpusSample; n > 0 {
		keep := DevSample(ds.Corpus.IDs, qrels, n, uint64(rec.Seed))
		s.ids, s.passages = nil, nil
		for _, i := range keep {
			s.ids = append(s.ids, ds.Corpus.IDs[i])
			s.passages = append(s.passages, passages[i])
		}
		s.sampled = len(keep) < len(ds.Corpus.IDs)
		fmt.Fprintf(env.Opts.Out, "select: %s queries ranked against %d of the %d passages (eval.dev_corpus_sample = %d: every judged one and %d drawn with the seed); the final evaluation ranks all\n",
			rec.Data.DevSplit, len(keep), len(ds.Corpus.IDs), n, len(keep)-judgedCount(ds.Corpus.IDs, qrels))
	}
	return s
}

// DevSample returns the indices into ids, ascending, of the dev corpus sample
// (eval.dev_corpus_sample): every passage qrels judges (at any grade) and n of the others
// drawn uniformly without replacement with seed (all of them when fewer than n remain).
func DevSample(ids []string, qrels map[string]map[string]int, n int, seed uint64) []int {
	judged := map[string]bool{}
	for _, docs := range qrels {
		for d := range docs {
			judged[d] = true
		}
	}
	var keep, others []int
	for i, id := range ids {
		if judged[id] {
			keep = append(keep, i)
		} else {
			others = append(others, i)
		}
	}
	r := rand.New(rand.NewPCG(seed, devSampleStream))
	for _, j := range r.Perm(len(others))[:min(n, len(others))] {
		keep = append(keep, others[j])
	}
	slices.Sort(keep)
	return keep
}

// devSampleStream is the PCG stream of DevSample's draw, apart from the sampler's.
const devSampleStream = 0x6465765f73616d70 // "dev_samp"

// judgedCount is the number of ids qrels judges.
func judgedCount(ids []string, qrels map[string]map[string]int) int {
	n := 0
	for _, id := range ids {
		for _, docs := range qrels {
			if _, ok := docs[id]; ok {
				n++
				break
			}
		}
	}
	return n
}

// record writes the selection so far into a checkpoint's trainer state.
func (s *selector) record(ts *checkpoints.TrainerState) { s.Record(ts, s.metric) }

// check evaluates the weights after done steps on the dev split, keeps them in BestDir when
// they beat the best so far (ties keep the earlier step), logs the evaluation, redraws the
// curve, and returns an error wrapping trainer.ErrStop when train.patience has run out.
func (s *selector) check(done int, ts *checkpoints.TrainerState) error {
	start := time.Now()
	sr, err := newEvalSearcher(s.rec, s.m, s.tok, s.cosine, s.ids, s.passages, s.env.Opts.Progress)
	if err != nil {
		return err
	}
	enc := time.Since(start).Seconds()
	reportSearch(s.env.Opts.Out, fmt.Sprintf("select: step %d", done), sr)
	kept := false
	defer func() {
		if !kept {
			sr.Close()
		}
	}()
	hits, err := sr.Search(s.texts, s.rec.Eval.Depth)
	if err != nil {
		return err
	}
	run := eval.Run{}
	for i, h := range hits {
		run[s.qids[i]] = h
	}
	scores, err := eval.Evaluate(run, s.qrels, s.rec.Eval.Metrics)
	if err != nil {
		return err
	}
	v := scores[s.metric]
	better, stop := s.Observe(done, v)
	if stop && done >= s.rec.Train.Steps { // patience ran out at the last step: no early stop
		stop, s.StoppedAt = false, 0
	}
	mark := ""
	if better {
		mark = " (best so far; saved to " + BestDir + "/)"
		bs := checkpoints.TrainerState{Step: done, Phase: "train", Seed: s.env.Seed, BestMetric: v, BestMetricName: s.metric}
		if err := s.env.Save(filepath.Join(s.env.Dir, BestDir), s.m.Params(), s.cfg, nil, bs); err != nil {
			return fmt.Errorf("select: saving the best checkpoint: %w", err)
		}
		if s.searcher != nil {
			s.searcher.Close()
			s.searcher = nil
		}
		if !s.sampled {
			s.searcher, s.encodeSeconds, kept = sr, enc, true
		}
	} else if s.Patience > 0 {
		mark = fmt.Sprintf(" (%d of %d without a gain)", s.NoGain, s.Patience)
	}
	fmt.Fprintf(s.env.Opts.Out, "select: train step %d: %s %s = %.4f%s\n", done, s.rec.Data.DevSplit, s.metric, v, mark)
	if s.env.Log != nil {
		line := map[string]any{"phase": "select", "step": done, "best": better, "evals_without_gain": s.NoGain}
		for _, name := range s.rec.Eval.Metrics {
			line[s.rec.Data.DevSplit+"/"+name] = scores[name]
		}
		if s.lastLoss != nil {
			line["train_loss"] = s.lastLoss()
		}
		if s.sampled {
			line["dev_corpus_passages"] = len(s.ids)
		}
		if err := s.env.Log.Write(line); err != nil {
			return err
		}
		ts.LogBytes = s.env.Log.Size() // the line belongs to this checkpoint
		if err := s.drawCurve(); err != nil {
			return err
		}
	}
	s.record(ts)
	if stop {
		fmt.Fprintf(s.env.Opts.Out, "select: %d evaluations without a gain of %s (train.patience); stopping after train step %d\n", s.NoGain, s.metric, done)
		return fmt.Errorf("select: train.patience = %d evaluations without a gain: %w", s.Patience, trainer.ErrStop)
	}
	return nil
}

// drawCurve redraws CurveFile from log.jsonl: the train phase's logged loss and the dev
// evaluations so far, the best marked.
func (s *selector) drawCurve() error {
	key := s.rec.Data.DevSplit + "/" + s.metric
	loss, dev, err := curve.FromLog(filepath.Join(s.env.Dir, experiment.LogFile), "train", "select", key)
	if err != nil {
		return err
	}
	label := s.rec.Data.DevSplit + " " + s.metric
	if s.sampled {
		label += fmt.Sprintf(" (%d-passage sample)", len(s.ids))
	}
	return curve.Write(filepath.Join(s.env.Dir, CurveFile), curve.Curves{
		Title: s.rec.Name + ": training loss and " + label, Loss: loss, LossLabel: "training loss", Dev: dev, DevLabel: label, BestStep: s.BestStep})
}

// finish loads the chosen weights into the model, saves them as the run's latest checkpoint
// (phase "selected"), draws the final curve and reports the choice in metrics ("select/step",
// "select/<split>/<metric>", "train/stopped_early_at", "select/dev_corpus_passages").
func (s *selector) finish(metrics map[string]float64) error {
	if s.BestStep == 0 {
		return fmt.Errorf("select: no train checkpoint was evaluated on %s", s.rec.Data.DevSplit)
	}
	if s.resumed.Phase != selectedPhase {
		ck, err := checkpoints.Load(filepath.Join(s.env.Dir, BestDir))
		if err != nil {
			return err
		}
		if err := experiment.SetParams(s.m.Params(), ck.Params); err != nil {
			return fmt.Errorf("%s: %w", ck.Dir, err)
		}
		ts := checkpoints.TrainerState{Step: s.BestStep, Phase: selectedPhase, Seed: s.env.Seed}
		if s.env.Log != nil {
			ts.LogBytes = s.env.Log.Size()
		}
		s.record(&ts)
		if err := s.env.Save(s.env.Dir, s.m.Params(), s.cfg, nil, ts); err != nil {
			return err
		}
	}
	if s.env.Log != nil {
		if err := s.drawCurve(); err != nil {
			return err
		}
	}
	fmt.Fprintf(s.env.Opts.Out, "select: train step %d chosen on %s (%s %.4f)\n", s.BestStep, s.rec.Data.DevSplit, s.metric, s.Best)
	metrics["select/step"] = float64(s.BestStep)
	metrics["select/"+s.rec.Data.DevSplit+"/"+s.metric] = s.Best
	if s.StoppedAt > 0 {
		metrics["train/stopped_early_at"] = float64(s.StoppedAt)
	}
	if s.rec.Eval.DevCorpusSample > 0 {
		metrics["select/dev_corpus_passages"] = float64(len(s.ids))
	}
	return nil
}

// writeExamples writes the mined training examples to path (ExamplesFile), atomically.
func writeExamples(path string, examples []sampler.Example, queries *data.Queries, text func(id string) string) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, ex := range examples {
			q, _ := queries.Text(ex.QueryID)
			negs := make([]string, len(ex.NegativeIDs))
			for i, id := range ex.NegativeIDs {
				negs[i] = text(id)
			}
			if err := enc.Encode(map[string]any{"query_id": ex.QueryID, "query": q, "positive_id": ex.PositiveID, "positive": text(ex.PositiveID),
				"negative_ids": ex.NegativeIDs, "negatives": negs}); err != nil {
				return err
			}
		}
		return nil
	})
}
