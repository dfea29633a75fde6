package retriever

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// MiningDir is the run directory's folder of re-mined negatives (sampler.negative_source =
// "dense_refresh"): one step-<s>.json per refresh, the examples mined at training step s with
// the index version that mined them and what the false-negative filters dropped.
const MiningDir = "mining"

// refreshMiner deals the training batches of sampler.negative_source = "dense_refresh" (ANCE,
// Xiong et al. 2021): at every [train] step that is a multiple of sampler.refresh_every, before
// that step's batch, an index_refresh.Refresher (sync) re-encodes the corpus with the passage
// tower being trained, the training queries are encoded with the query tower, and the hard
// negatives are mined again from that ranking (sampler.negative_window, the false-negative
// filters sampler.negative_margin and negative_relative on the same index's scores). Every batch
// is dealt from the examples of one index version, logged with it. A resumed run reads the
// examples of the refresh it stopped after from MiningDir instead of re-mining them with the
// later parameters.
type refreshMiner struct {
	ctx      context.Context
	rec      *configs.Recipe
	ds       *data.Dataset
	tok      *tokenize.Tokenizer
	m        *model.BiEncoder
	cosine   bool
	passages []string
	dir      string
	lg       *trainer.Log
	out      io.Writer
	every    int

	ref     *indexrefresh.Refresher
	smp     *sampler.Sampler
	version indexrefresh.Version
	mined   int // the step whose examples smp deals; -1 before the first
}

// miningFile is one refresh's record in MiningDir.
type miningFile struct {
	Step            int               `json:"step"`
	IndexStep       int               `json:"index_step"`
	IndexHash       string            `json:"index_hash"`
	DroppedMargin   int               `json:"dropped_margin"`
	DroppedRelative int               `json:"dropped_relative"`
	Examples        []sampler.Example `json:"examples"`
}

func newRefreshMiner(ctx context.Context, rec *configs.Recipe, ds *data.Dataset, tok *tokenize.Tokenizer, m *model.BiEncoder, cosine bool,
	passages []string, dir string, lg *trainer.Log, out io.Writer) *refreshMiner {
	return &refreshMiner{ctx: ctx, rec: rec, ds: ds, tok: tok, m: m, cosine: cosine, passages: passages, dir: dir, lg: lg, out: out,
		every: rec.Sampler.RefreshEvery, mined: -1}
}

// batch returns step's batch, re-mining first when step is a refresh step.
func (r *refreshMiner) batch(step int) (sampler.Batch, sampler.Stats, error) {
	due := step - step%r.every // the refresh whose examples serve step
	if r.mined != due {
		var err error
		if due == step {
			err = r.refresh(step)
		} else {
			err = r.load(due)
		}
		if err != nil {
			return sampler.Batch{}, sampler.Stats{}, err
		}
	}
	b, st, err := r.smp.Batch(step)
	if err == nil {
		err = r.lg.Write(map[string]any{"phase": "train", "step": step, "mining": "batch", "index_step": r.version.Step, "index_hash": r.version.ParamHash})
	}
	return b, st, err
}

// refresh re-encodes the corpus at step, re-mines and writes the refresh's file and log line.
func (r *refreshMiner) refresh(step int) error {
	L := r.rec.Tokenizer.MaxLength
	if r.ref == nil {
		workers := biencoder.PassageWorkers{Cfg: r.m.Cfg, Shared: r.m.Shared, Seed: uint64(r.rec.Seed),
			Batch: r.tok.EncodeBatch(r.passages, L), B: 64, Cosine: r.cosine}
		opts := indexrefresh.Options{Mode: indexrefresh.ModeSync, Every: r.every, Workers: 1, ShardSize: 8 * workers.B, NewWorker: workers.New,
			ANNThreshold: r.rec.Index.ANNThreshold, ANN: annParams(r.rec)}
		var err error
		if r.ref, err = indexrefresh.NewEncoded(r.ctx, r.ds.Corpus.IDs, r.m.Passage.Dim(), r.m.Passage.Params(), step, opts); err != nil {
			return fmt.Errorf("sampler: dense_refresh at step %d: %w", step, err)
		}
	} else if _, err := r.ref.MaybeRefresh(r.ctx, step, r.m.Passage.Params()); err != nil {
		return fmt.Errorf("sampler: dense_refresh at step %d: %w", step, err)
	}
	if v := r.ref.Serving(); v.Step != step {
		return fmt.Errorf("sampler: dense_refresh at step %d: the index serving is that of step %d", step, v.Step)
	}
	qrels := r.ds.Qrels[r.rec.Data.TrainSplit]
	qids := qrels.QueryIDs()
	texts := make([]string, len(qids))
	for i, q := range qids {
		texts[i], _ = r.ds.Queries.Text(q)
	}
	qv, err := biencoder.EncodeTexts(r.m.Query, r.tok, texts, r.rec.Tokenizer.QueryLength(), nil)
	if err != nil {
		return err
	}
	H := r.m.Query.Dim()
	if r.cosine {
		biencoder.NormalizeRows(qv, H)
	}
	s := r.rec.Sampler
	hits, v := r.ref.SearchBatch(qv, s.NegativeWindow[1])
	ranking := map[string][]string{}
	row := map[string]int{}
	for i, q := range qids {
		ranking[q], row[q] = hitIDs(hits[i]), i
	}
	var filter *sampler.Filter
	if s.NegativeMargin > 0 || s.NegativeRelative > 0 {
		filter = &sampler.Filter{Margin: s.NegativeMargin, Relative: s.NegativeRelative, Score: func(q, d string) (float64, error) {
			sc, sv, ok := r.ref.Score(qv[row[q]*H:(row[q]+1)*H], d)
			if !ok || sv != v {
				return 0, fmt.Errorf("passage %q not in the index of %s", d, v)
			}
			return sc, nil
		}}
	}
	examples, st, err := sampler.Mine(qrels, ranking, sampler.MineOptions{Negatives: s.HardNegatives, Lo: s.NegativeWindow[0], Hi: s.NegativeWindow[1],
		Strategy: sampler.Strategy(s.NegativeStrategy), Seed: uint64(r.rec.Seed), Filter: filter})
	if err != nil {
		return err
	}
	f := miningFile{Step: step, IndexStep: v.Step, IndexHash: v.ParamHash, DroppedMargin: st.DroppedMargin, DroppedRelative: st.DroppedRelative, Examples: examples}
	if err := r.use(f); err != nil {
		return err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(r.dir, MiningDir), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(miningPath(r.dir, step), b); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "mining: step %d: negatives re-mined from the index of %s; the false-negative filters dropped %d candidates by negative_margin, %d by negative_relative\n",
		step, v, st.DroppedMargin, st.DroppedRelative)
	line := map[string]any{"phase": "train", "step": step, "mining": "refresh", "index_step": v.Step, "index_hash": v.ParamHash,
		"examples": len(examples), "dropped_margin": st.DroppedMargin, "dropped_relative": st.DroppedRelative, "short_queries": len(st.Short)}
	if n, t := len(r.ds.Corpus.IDs), r.rec.Index.ANNThreshold; t > 0 && n >= t { // ann.New's rule
		p := annParams(r.rec)
		fmt.Fprintf(r.out, "mining: step %d: the index is HNSW over %d passages (M %d, efConstruction %d, efSearch %d); the ranking is approximate (index.ann_threshold)\n",
			step, n, p.M, p.EfConstruction, p.EfSearch)
		line["search"] = "hnsw"
	}
	return r.lg.Write(line)
}

// load reads the examples of the refresh at step back from MiningDir (a resumed run).
func (r *refreshMiner) load(step int) error {
	f, err := readMining(miningPath(r.dir, step))
	if err != nil {
		return fmt.Errorf("resume: dense_refresh negatives of step %d: %w", step, err)
	}
	return r.use(f)
}

// use makes f's examples the ones dealt.
func (r *refreshMiner) use(f miningFile) error {
	qrels := r.ds.Qrels[r.rec.Data.TrainSplit]
	queries := map[string]string{}
	for _, q := range qrels.QueryIDs() {
		queries[q], _ = r.ds.Queries.Text(q)
	}
	smp, err := sampler.New(sampler.Collection{Queries: queries, DocIDs: r.ds.Corpus.IDs, DocTexts: r.passages, Qrels: qrels},
		f.Examples, sampler.Options{BatchSize: r.rec.Train.BatchSize, HardNegatives: r.rec.Sampler.HardNegatives, Seed: uint64(r.rec.Seed),
			MaskFalseNegatives: r.rec.Sampler.FalseNegatives == "mask"})
	if err != nil {
		return fmt.Errorf("sampler: dense_refresh negatives of step %d: %w", f.Step, err)
	}
	r.smp, r.mined = smp, f.Step
	r.version = indexrefresh.Version{Step: f.IndexStep, ParamHash: f.IndexHash}
	return nil
}

// close ends the refresher.
func (r *refreshMiner) close() {
	if r.ref != nil {
		r.ref.Close()
	}
}

func miningPath(dir string, step int) string {
	return filepath.Join(dir, MiningDir, fmt.Sprintf("step-%d.json", step))
}

func readMining(path string) (miningFile, error) {
	var f miningFile
	b, err := bounded.ReadFile(path, bounded.RunState)
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	return f, err
}

// miningMetrics sums the refreshes of MiningDir before step steps: "mining/refreshes",
// "mining/dropped_margin" and "mining/dropped_relative" (the same for a resumed run, whose
// earlier refreshes are files of the same directory).
func miningMetrics(dir string, steps int, metrics map[string]float64) error {
	paths, err := filepath.Glob(filepath.Join(dir, MiningDir, "step-*.json"))
	if err != nil {
		return err
	}
	slices.Sort(paths)
	var n, margin, relative int
	for _, p := range paths {
		s, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "step-"), ".json"))
		if err != nil || s >= steps {
			continue
		}
		f, err := readMining(p)
		if err != nil {
			return err
		}
		n, margin, relative = n+1, margin+f.DroppedMargin, relative+f.DroppedRelative
	}
	metrics["mining/refreshes"] = float64(n)
	metrics["mining/dropped_margin"] = float64(margin)
	metrics["mining/dropped_relative"] = float64(relative)
	return nil
}
