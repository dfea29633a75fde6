package replug

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/study"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/tokenize"
)

// kind = "replug": RePlug LSR (Shi et al. 2023) on the garden world. After the rag pipeline's
// preparation (experiment/internal/study), each system of replug.systems trains from the same start:
//
//   - "supervised": both towers with InfoNCE on the gold entries (passage labels; the ceiling);
//   - "replug": the retriever alone, from the frozen fine-tuned reader: for each question its
//     K dense candidates z_k, the reader's log p(y | z_k, x) of the answer (computed in batches
//     with the reader's graph, no gradient, cached per question, passage and reader hash) and
//     losses.RePlugKL between the reader's preference and the retriever's distribution. The
//     query tower trains (replug.towers = "query"; the index stays exact) or both towers
//     ("both"; the index is refreshed by [index_refresh]). No passage label is used.
//
// Each system is then evaluated with a freshly encoded index (Recall@1/5 and the reader over
// the top passage).
func init() {
	// replug reads realm.checkpoint_every (its phase's resume points) and [index_refresh] with
	// replug.towers = "both".
	experiment.Register("replug", runReplug, configs.KindSpec{Sections: ragkit.Sections("realm", "index_refresh"), Own: []configs.Section{section}, Losses: []string{"infonce"}})
}

func runReplug(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	train := func(s *study.Study, ctx context.Context, _, phase string, qs []ragjoint.Question, startStep int, opt *checkpoints.OptimizerState, before float64) error {
		return trainReplug(s, ctx, phase, qs, startStep, opt, before)
	}
	p := Of(rec)
	return study.RunStudy(ctx, rec, o, p.Systems, false, train, func(s *study.Study) {
		s.RetrievalNote = fmt.Sprintf("RePlug: candidates %s, K = %d, tau_lm = %g, towers %s", rec.RAG.CandidateSource, p.TopK, p.TauLM, p.Towers)
		s.Metrics["replug/top_k"] = float64(p.TopK)
		s.Metrics["replug/tau_lm"] = p.TauLM
	})
}

// trainReplug trains the retriever by RePlug from the frozen reader.
func trainReplug(s *study.Study, ctx context.Context, phase string, qs []ragjoint.Question, startStep int, opt *checkpoints.OptimizerState, before float64) error {
	p := Of(s.Rec)
	if p.Steps == 0 || len(qs) == 0 {
		return nil
	}
	hash, err := indexrefresh.HashParams(s.Reader.Params())
	if err != nil {
		return err
	}
	scorer, err := ragreader.NewScorer(s.Reader, s.Format, p.ScoreBatch, false)
	if err != nil {
		return err
	}
	defer scorer.Close()
	o := replugOptions{B: p.BatchSize, K: p.TopK, Source: s.Rec.RAG.CandidateSource, BM25Depth: s.Rec.RAG.BM25Depth,
		TauLM: p.TauLM, Similarity: s.Loss.Similarity, Both: p.Towers == "both"}
	return s.TrainFromReader(ctx, study.ReaderTraining{Phase: phase, Steps: p.Steps, LR: p.LR, Start: startStep, Optimizer: opt, SecondsBefore: before,
		Both:     o.Both,
		Retrieve: func(li *study.LiveIndex) ragjoint.RetrieveFunc { return li.Retrieve(p.TopK) },
		NewTask: func(retrieve ragjoint.RetrieveFunc) (study.TeacherTask, error) {
			o.Retrieve = retrieve
			return newReplugTask(s.Encoder, s.Tok, s.Index, scorer, hash, qs, o, func(step int) []int {
				return ragreader.Cycle(len(qs), p.BatchSize, step, s.Seed^streamReplug)
			})
		}})
}

// streamReplug is the batch stream of RePlug training (XORed into the seed).
const streamReplug = 0x72706c67 // "rplg"

// replugOptions are the settings of a RePlug task.
type replugOptions struct {
	B, K       int    // questions per step, candidates per question
	Source     string // "dense" or "bm25+dense" (rag.candidate_source; dense only with Both)
	BM25Depth  int    // BM25 hits rescored under "bm25+dense"
	TauLM      float64
	Similarity losses.Similarity
	Both       bool // train the passage tower too (over the candidates' texts, in the graph)
	// Retrieve, if set, returns the candidates at step (the refresher's index); nil: x's
	// dense top K.
	Retrieve ragjoint.RetrieveFunc
}

// replugTask trains the retriever with losses.RePlugKL: per step, B questions, each with its K
// candidates retrieved with the current query tower; the retrieval logits s [B,K]
// (ragjoint.ReaderRetrieval) against the frozen reader's log-likelihoods of the answer given
// each candidate, lm [B,K] (a constant). It is a study.StatefulTeacherTask: the cache of the
// reader's scores and its counters are checkpointed with the steps, so a resumed phase hits
// the cache and counts as the uninterrupted one does.
type replugTask struct {
	*ragjoint.RePlugTask
	sc    *ragreader.Scorer
	hash  string // indexrefresh.HashParams of the reader that sc runs
	cache map[replugKey]float64

	hits, misses int // cache hits and reader-scored pairs
}

// replugKey names one cached reader likelihood: question, datastore row, reader parameters.
type replugKey struct {
	q, row int
	reader string // indexrefresh.HashParams of the reader
}

func newReplugTask(m *model.BiEncoder, tok *tokenize.Tokenizer, x *ragjoint.Index, sc *ragreader.Scorer, hash string, qs []ragjoint.Question, o replugOptions,
	next func(step int) []int) (*replugTask, error) {
	B, K := o.B, o.K
	t := &replugTask{sc: sc, hash: hash, cache: map[replugKey]float64{}}
	r := ragjoint.ReaderRetrieval{JointBatch: ragjoint.JointBatch{Name: "replug", M: m, Tok: tok, Index: x, Qs: qs, Next: next, Retrieve: o.Retrieve,
		B: B, K: K, Source: o.Source, BM25Depth: o.BM25Depth}}
	var err error
	if t.RePlugTask, err = ragjoint.NewRePlugTask(r, o.Both, o.Similarity, o.TauLM, t.fill); err != nil {
		return nil, err
	}
	return t, nil
}

// fill writes the reader's log-likelihoods of the step's candidates into lm [B*K]: cached
// pairs, the others scored in batches.
func (t *replugTask) fill(batch []int, cands [][]int, lm []float32) error {
	var todo []ragreader.ScorePair
	var where []int
	for b, qi := range batch {
		for k, row := range cands[b] {
			if v, ok := t.cache[replugKey{qi, row, t.hash}]; ok {
				lm[b*t.K+k] = float32(v)
				t.hits++
				continue
			}
			q := t.Qs[qi]
			todo = append(todo, ragreader.ScorePair{Passage: t.Index.Texts[row], Prompt: q.Prompt, Answer: q.Answer})
			where = append(where, b*t.K+k)
		}
	}
	if len(todo) > 0 {
		ll, _, err := t.sc.Score(todo)
		if err != nil {
			return err
		}
		for i, v := range ll {
			j := where[i]
			lm[j] = float32(v)
			t.cache[replugKey{batch[j/t.K], cands[j/t.K][j%t.K], t.hash}] = v
		}
		t.misses += len(todo)
	}
	return nil
}

// The replug task's checkpoint counters and state tensors: the cache of the reader's
// log-likelihoods, in (question, datastore row) order, and the hash of the reader that scored
// them.
const (
	counterHits   = "reader_cache_hits"
	counterScored = "reader_scored"
	cacheKeys     = "replug.cache.keys"   // I64 [n, 2]: question, datastore row
	cacheLogLik   = "replug.cache.loglik" // F64 [n]: log p(answer | passage, question)
	cacheReader   = "replug.cache.reader" // U8: indexrefresh.HashParams of the reader
)

// State keeps the task's counts so far in the checkpoint.
func (t *replugTask) State(_ int, ts *checkpoints.TrainerState) {
	ts.Counters = map[string]int{counterHits: t.hits, counterScored: t.misses}
}

// Extra returns the counts as metrics and reports them on out.
func (t *replugTask) Extra(phase string, out io.Writer) map[string]float64 {
	fmt.Fprintf(out, "%s: the reader scored %d (question, passage) pairs, %d more came from the cache\n", phase, t.misses, t.hits)
	return map[string]float64{counterScored: float64(t.misses), counterHits: float64(t.hits)}
}

// Tensors returns the cache as checkpoint state tensors; nil when it is empty.
func (t *replugTask) Tensors(int) []checkpoints.RawTensor {
	keys := make([]replugKey, 0, len(t.cache))
	for k := range t.cache {
		if k.reader == t.hash {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(a, b replugKey) int { return cmp.Or(cmp.Compare(a.q, b.q), cmp.Compare(a.row, b.row)) })
	ids, ll := make([]int64, 0, 2*len(keys)), make([]float64, 0, len(keys))
	for _, k := range keys {
		ids, ll = append(ids, int64(k.q), int64(k.row)), append(ll, t.cache[k])
	}
	return []checkpoints.RawTensor{
		checkpoints.I64Raw(cacheKeys, []int{len(keys), 2}, ids),
		checkpoints.F64Raw(cacheLogLik, []int{len(keys)}, ll),
		{Name: cacheReader, DType: checkpoints.U8, Shape: []int{len(t.hash)}, Data: []byte(t.hash)},
	}
}

// Restore puts the counters and the cache of the checkpoint ck back, which must have been
// scored by this task's reader.
func (t *replugTask) Restore(ck *checkpoints.Checkpoint) error {
	path := filepath.Join(ck.Dir, checkpoints.StateFile)
	t.hits, t.misses = ck.Trainer.Counters[counterHits], ck.Trainer.Counters[counterScored]
	var ids []int64
	var ll []float64
	reader := ""
	for _, st := range ck.State {
		var err error
		switch st.Name {
		case cacheKeys:
			ids, err = st.Int64()
		case cacheLogLik:
			ll, err = st.Float64()
		case cacheReader:
			if st.DType != checkpoints.U8 {
				err = fmt.Errorf("dtype %s, want U8", st.DType)
			}
			reader = string(st.Data)
		default:
			err = fmt.Errorf("not a tensor of the replug cache (%s, %s, %s)", cacheKeys, cacheLogLik, cacheReader)
		}
		if err != nil {
			return fmt.Errorf("%s: tensor %s: %w", path, st.Name, err)
		}
	}
	if len(ck.State) == 0 {
		if t.misses > 0 {
			return fmt.Errorf("%s: missing: %s counts %d pairs scored by the reader, but the checkpoint holds no cache of them",
				path, filepath.Join(ck.Dir, checkpoints.TrainerFile), t.misses)
		}
		return nil
	}
	if reader != t.hash {
		return fmt.Errorf("%s: the cache was scored by reader %q, this run's reader is %q", path, reader, t.hash)
	}
	if len(ids) != 2*len(ll) {
		return fmt.Errorf("%s: %s holds %d values for %d log-likelihoods in %s, want 2 per log-likelihood", path, cacheKeys, len(ids), len(ll), cacheLogLik)
	}
	for i, v := range ll {
		q, row := int(ids[2*i]), int(ids[2*i+1])
		if q < 0 || q >= len(t.Qs) || row < 0 || row >= len(t.Index.Texts) {
			return fmt.Errorf("%s: %s entry %d is question %d, row %d: out of range (%d questions, %d rows)", path, cacheKeys, i, q, row, len(t.Qs), len(t.Index.Texts))
		}
		t.cache[replugKey{q, row, t.hash}] = v
	}
	return nil
}

var _ study.StatefulTeacherTask = (*replugTask)(nil)
