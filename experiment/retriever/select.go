package retriever

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/dense"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
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
func newSearcher(rec *configs.Recipe, m *model.BiEncoder, tok *tokenize.Tokenizer, cosine bool, ids, passages []string, progress io.Writer) (*dense.Searcher, error) {
	return dense.NewSearcher(m, tok, dense.SearchOptions{
		Len:    dense.Lengths{Query: rec.Tokenizer.QueryLength(), Passage: rec.Tokenizer.MaxLength},
		Cosine: cosine, Dynamic: rec.Tokenizer.DynamicPadding, Progress: progress,
	}, ids, passages)
}

// newEvalSearcher is newSearcher for the trained model, which also indexes the Matryoshka
// prefixes evaluated (evalPrefixes).
func newEvalSearcher(rec *configs.Recipe, m *model.BiEncoder, tok *tokenize.Tokenizer, cosine bool, ids, passages []string, progress io.Writer) (*dense.Searcher, error) {
	return dense.NewSearcher(m, tok, dense.SearchOptions{
		Len:    dense.Lengths{Query: rec.Tokenizer.QueryLength(), Passage: rec.Tokenizer.MaxLength},
		Cosine: cosine, Dynamic: rec.Tokenizer.DynamicPadding, Progress: progress, Prefixes: evalPrefixes(rec, m.Query.Dim()),
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

// selector is model selection on the dev split (eval.select_metric): at every regular
// checkpoint of the train phase the corpus is encoded with the current weights, the dev
// queries ranked, and the best checkpoint so far copied to <run>/best/.
type selector struct {
	rec      *configs.Recipe
	m        *model.BiEncoder
	tok      *tokenize.Tokenizer
	cosine   bool
	ids      []string
	passages []string
	env      *experiment.Env
	cfg      model.BiEncoderConfig
	qids     []string
	texts    []string
	qrels    map[string]map[string]int
	metric   string

	best     float64
	bestStep int // 0: none yet
	resumed  checkpoints.TrainerState
	// searcher is the corpus index of the best checkpoint when this segment of the run built it
	// (encodeSeconds its encoding time), so the final evaluation need not encode the corpus again.
	searcher      *dense.Searcher
	encodeSeconds float64
}

// bestStepCounter is the TrainerState counter holding the chosen step.
const bestStepCounter = "select_best_step"

// newSelector returns nil when the recipe selects nothing. state is the checkpoint the run
// resumes from (zero for a fresh run): it carries the best so far.
func newSelector(rec *configs.Recipe, ds *data.Dataset, tok *tokenize.Tokenizer, m *model.BiEncoder, cosine bool, passages []string,
	env *experiment.Env, cfg model.BiEncoderConfig, state checkpoints.TrainerState) *selector {
	if rec.Eval.SelectMetric == "" {
		return nil
	}
	qrels := ds.Qrels[rec.Data.DevSplit]
	s := &selector{rec: rec, m: m, tok: tok, cosine: cosine, ids: ds.Corpus.IDs, passages: passages, env: env, cfg: cfg,
		qrels: qrels, metric: rec.Eval.SelectMetric, resumed: state}
	for _, q := range qrels.QueryIDs() {
		text, _ := ds.Queries.Text(q)
		s.qids = append(s.qids, q)
		s.texts = append(s.texts, text)
	}
	if state.BestMetricName == s.metric {
		s.best, s.bestStep = state.BestMetric, state.Counters[bestStepCounter]
	}
	return s
}

// record writes the best so far into a checkpoint's trainer state.
func (s *selector) record(ts *checkpoints.TrainerState) {
	if s.bestStep == 0 {
		return
	}
	ts.BestMetric, ts.BestMetricName = s.best, s.metric
	if ts.Counters == nil {
		ts.Counters = map[string]int{}
	}
	ts.Counters[bestStepCounter] = s.bestStep
}

// check evaluates the weights after done steps on the dev split and keeps them in BestDir when
// they beat the best so far (ties keep the earlier step).
func (s *selector) check(done int, ts *checkpoints.TrainerState) error {
	start := time.Now()
	sr, err := newEvalSearcher(s.rec, s.m, s.tok, s.cosine, s.ids, s.passages, s.env.Opts.Progress)
	if err != nil {
		return err
	}
	enc := time.Since(start).Seconds()
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
	scores, err := eval.Evaluate(run, s.qrels, []string{s.metric})
	if err != nil {
		return err
	}
	v := scores[s.metric]
	better := s.bestStep == 0 || v > s.best
	mark := ""
	if better {
		s.best, s.bestStep = v, done
		mark = " (best so far; saved to " + BestDir + "/)"
		bs := checkpoints.TrainerState{Step: done, Phase: "train", Seed: s.env.Seed, BestMetric: v, BestMetricName: s.metric}
		if err := s.env.Save(filepath.Join(s.env.Dir, BestDir), s.m.Params(), s.cfg, nil, bs); err != nil {
			return fmt.Errorf("select: saving the best checkpoint: %w", err)
		}
		if s.searcher != nil {
			s.searcher.Close()
		}
		s.searcher, s.encodeSeconds, kept = sr, enc, true
	}
	fmt.Fprintf(s.env.Opts.Out, "select: train step %d: %s %s = %.4f%s\n", done, s.rec.Data.DevSplit, s.metric, v, mark)
	if s.env.Log != nil {
		if err := s.env.Log.Write(map[string]any{"phase": "select", "step": done, s.rec.Data.DevSplit + "/" + s.metric: v, "best": better}); err != nil {
			return err
		}
		ts.LogBytes = s.env.Log.Size() // the line belongs to this checkpoint
	}
	s.record(ts)
	return nil
}

// finish loads the chosen weights into the model, saves them as the run's latest checkpoint
// (phase "selected") and reports the choice in metrics ("select/step", "select/<split>/<metric>").
func (s *selector) finish(metrics map[string]float64) error {
	if s.bestStep == 0 {
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
		ts := checkpoints.TrainerState{Step: s.bestStep, Phase: selectedPhase, Seed: s.env.Seed}
		if s.env.Log != nil {
			ts.LogBytes = s.env.Log.Size()
		}
		s.record(&ts)
		if err := s.env.Save(s.env.Dir, s.m.Params(), s.cfg, nil, ts); err != nil {
			return err
		}
	}
	fmt.Fprintf(s.env.Opts.Out, "select: train step %d chosen on %s (%s %.4f)\n", s.bestStep, s.rec.Data.DevSplit, s.metric, s.best)
	metrics["select/step"] = float64(s.bestStep)
	metrics["select/"+s.rec.Data.DevSplit+"/"+s.metric] = s.best
	return nil
}

// writeExamples writes the mined training examples to path (ExamplesFile), atomically.
func writeExamples(path string, examples []sampler.Example, ds *data.Dataset, title bool) error {
	text := func(id string) string {
		i, _ := ds.Corpus.Index(id)
		return ds.Corpus.Passage(i, title)
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, ex := range examples {
			q, _ := ds.Queries.Text(ex.QueryID)
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
