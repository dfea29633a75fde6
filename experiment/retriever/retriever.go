package retriever

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
)

// The retriever kind: configs.Load accepts the sections it reads and the losses that train a
// bi-encoder: InfoNCE, its Matryoshka sum over embedding prefixes (loss.dims), and distillation
// of a cross-encoder teacher (loss.teacher) by margins or by the softmax over each query's
// candidates.
func init() {
	experiment.Register("retriever", runRetriever, configs.KindSpec{
		Sections: []string{"data", "tokenizer", "model", "loss", "sampler", "pretrain", "train", "index", "eval"},
		Losses:   []string{"infonce", "matryoshka_infonce", "margin_mse", "kl_distill"},
		// the bi-encoder's keys of the shared sections, which the other kinds do not read
		Keys: []string{"train.mini_batch_size", "train.dynamic_padding", "train.eval_every", "train.patience",
			"eval.dev_corpus_sample", "index.stream_above", "index.ann_threshold", configs.DenseRefreshKey},
		Check: configs.WarmupWithinSteps,
	})
}

// trainTask is the supervised phase's bi-encoder task.
type trainTask = biencoder.Task

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
// graph in memory (biencoder.NewShardSearcher). A loaded corpus's vectors are searched in
// memory and written as the same shards (biencoder.Searcher.WriteShards), so `train search`
// serves either run's <run>/corpus/shards.
func evaluateRetriever(rec *configs.Recipe, ds *data.Dataset, tok *tokenize.Tokenizer, m *model.BiEncoder, zeroShot map[string]eval.Run, sel *selector, cosine bool,
	bm25 *index.BM25, passages []string, stream *streamedCorpus, dir string, metrics map[string]float64, out, progress io.Writer) error {
	var searcher *biencoder.Searcher
	var encodeSeconds float64
	if sel != nil && sel.searcher != nil {
		searcher, encodeSeconds = sel.searcher, sel.encodeSeconds
		sel.searcher = nil
	} else {
		start := time.Now()
		var err error
		if stream != nil {
			opt := biencoder.SearchOptions{Len: biencoder.Lengths{Query: rec.Tokenizer.QueryLength(), Passage: rec.Tokenizer.MaxLength},
				Cosine: cosine, Dynamic: rec.Tokenizer.DynamicPadding, ANNThreshold: rec.Index.ANNThreshold, ANN: annParams(rec)}
			searcher, err = biencoder.NewShardSearcher(m, tok, opt, stream.Tokens, filepath.Join(dir, StreamDir, ShardsDir), shardMeta(m), StreamShardSize)
		} else {
			searcher, err = newEvalSearcher(rec, m, tok, cosine, ds.Corpus.IDs, passages, progress)
		}
		if err != nil {
			return err
		}
		encodeSeconds = time.Since(start).Seconds()
	}
	defer searcher.Close()
	if stream == nil { // a loaded corpus: its vectors saved as a streamed run's shards, for train search
		if _, err := searcher.WriteShards(filepath.Join(dir, StreamDir, ShardsDir), shardMeta(m), StreamShardSize); err != nil {
			return err
		}
	}
	tokenize.ReportTruncation(out, "eval corpus", searcher.Len.Passage, tokenize.TruncPart{Name: "passages", Count: &searcher.PassageCut})
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
		searcher.QueryCut = tokenize.TruncCount{}
		denseHits, prefixHits, err := searcher.SearchPrefixes(texts, depth)
		if err != nil {
			return err
		}
		tokenize.ReportTruncation(out, "eval "+split, searcher.Len.Query, tokenize.TruncPart{Name: "queries", Count: &searcher.QueryCut})
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
