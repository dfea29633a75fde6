package retriever

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/index"
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
func interleave(a, b experiment.RankFunc) experiment.RankFunc {
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

// evaluateSplits ranks every evaluation split's queries with BM25, the dense bi-encoder and
// their RRF, writes the TREC runs, fills metrics and prints one table per split.
func (r *retrieverRun) evaluateSplits(metrics map[string]float64) error {
	rec, out := r.rec, r.o.Out
	searcher, encodeSeconds, err := r.finalIndex()
	if err != nil {
		return err
	}
	defer searcher.Close()
	if err := r.corpus.keep(searcher, r.m, r.dir); err != nil { // the vectors as shards, for train search
		return err
	}
	tokenize.ReportTruncation(out, "eval corpus", searcher.Len.Passage, tokenize.TruncPart{Name: "passages", Count: &searcher.PassageCut})
	reportSearch(out, "dense", searcher)
	for _, name := range denseSystems(rec.Eval.Systems) {
		metrics[name+"/index_bytes"] = float64(searcher.IndexBytes())
	}
	if h := searcher.HNSW(); h != nil { // only then, so an exact run's metrics.json is unchanged
		p := h.Params()
		metrics["dense/hnsw_passages"] = float64(h.Len())
		metrics["dense/hnsw_m"] = float64(p.M)
		metrics["dense/hnsw_ef_construction"] = float64(p.EfConstruction)
		metrics["dense/hnsw_ef_search"] = float64(p.EfSearch)
		metrics["dense/hnsw_build_seconds"] = searcher.BuildSeconds
	}
	metrics["dense/encode_passages_per_second"] = float64(r.ds.Corpus.Len()) / encodeSeconds
	for _, split := range rec.Eval.Splits {
		if err := r.evaluateSplit(split, searcher, metrics); err != nil {
			return err
		}
	}
	return nil
}

// finalIndex is the trained model's corpus index and the seconds its encoding took: the one
// the selector built for the chosen checkpoint (with the weights m now holds), else the
// corpus encoded now (corpus.index).
func (r *retrieverRun) finalIndex() (*biencoder.Searcher, float64, error) {
	if sel := r.sel; sel != nil && sel.searcher != nil {
		searcher := sel.searcher
		sel.searcher = nil
		return searcher, sel.encodeSeconds, nil
	}
	start := time.Now()
	searcher, err := r.corpus.index(r.rec, r.m, r.tok, r.loss.Cosine(), r.dir, r.o.Progress)
	return searcher, time.Since(start).Seconds(), err
}

// evaluateSplit ranks the queries of one eval split with each system of eval.systems (and a
// Matryoshka model's prefixes), writes their TREC runs and fills metrics.
func (r *retrieverRun) evaluateSplit(split string, searcher *biencoder.Searcher, metrics map[string]float64) error {
	rec, ds, out := r.rec, r.ds, r.o.Out
	depth := rec.Eval.Depth
	qrels := ds.Qrels[split]
	qids := qrels.QueryIDs()
	texts := queryTexts(ds, qids)
	searcher.QueryCut = tokenize.TruncCount{}
	denseHits, prefixHits, err := searcher.SearchPrefixes(texts, depth)
	if err != nil {
		return err
	}
	tokenize.ReportTruncation(out, "eval "+split, searcher.Len.Query, tokenize.TruncPart{Name: "queries", Count: &searcher.QueryCut})
	runs := map[string]eval.Run{"bm25": {}, "dense": {}}
	start := time.Now()
	for i, hits := range denseHits {
		runs["dense"][qids[i]] = hits
		runs["bm25"][qids[i]] = r.bm25.Search(texts[i], depth)
	}
	bm25Sec := time.Since(start).Seconds()
	denseMS, err := queryLatency(searcher, texts, depth)
	if err != nil {
		return err
	}
	sysKey := func(s string) string { // EvaluateSystems' names: "<system>" on test, else "<system>.<split>"
		if split == rec.Data.TestSplit {
			return s
		}
		return s + "." + split
	}
	metrics[sysKey("bm25")+"/query_milliseconds"] = 1000 * bm25Sec / float64(max(1, len(qids)))
	for _, name := range denseSystems(rec.Eval.Systems) {
		metrics[sysKey(name)+"/query_milliseconds"] = denseMS
	}
	runs["finetuned"] = runs["dense"]
	if zr, ok := r.zeroShotRuns[split]; ok {
		runs["zeroshot"] = zr
	}
	runs["rrf"] = index.RRF(rec.Eval.RRFK, depth, runs["bm25"], runs["dense"])
	for q, hits := range runs["rrf"] { // the fused list of two depth-d lists is cut to d
		runs["rrf"][q] = hits[:min(len(hits), depth)]
	}
	var systems []experiment.System
	for _, s := range rec.Eval.Systems {
		run, ok := runs[s]
		if !ok {
			return fmt.Errorf("eval.systems: %q is not a system of a retriever recipe (bm25, dense, finetuned, zeroshot, rrf)", s)
		}
		systems = append(systems, experiment.System{Name: s, Run: run})
	}
	// A Matryoshka model is also evaluated at each smaller prefix of loss.dims, after the
	// listed systems (bm25, rrf and the full vectors keep their names and numbers).
	for _, base := range []string{"dense", "finetuned"} {
		if !slices.Contains(rec.Eval.Systems, base) {
			continue
		}
		for _, d := range evalPrefixes(rec, r.m.Query.Dim()) {
			run := eval.Run{}
			for i, hits := range prefixHits[d] {
				run[qids[i]] = hits
			}
			systems = append(systems, experiment.System{Name: PrefixSystem(base, d), File: PrefixFile(base, d), Run: run})
		}
	}
	rows, err := experiment.EvaluateSystems(r.dir, split, split == rec.Data.TestSplit, qrels, systems, rec.Eval.Metrics, metrics)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s split, %d queries (%s):\n%s", split, len(qids), filepath.Base(rec.Data.Dir), eval.FormatTable(rec.Eval.Metrics, rows))
	fmt.Fprintf(out, "per query: dense %.2f ms (encode and search, one at a time, first %d queries), BM25 %.3f ms; dense index %.1f MiB\n",
		denseMS, min(len(texts), experiment.LatencyQueries), metrics[sysKey("bm25")+"/query_milliseconds"], float64(searcher.IndexBytes())/(1<<20))
	return nil
}

// denseSystems names the eval systems that are the trained model's dense search ("dense",
// "finetuned"), under which its index bytes and query latency are written; "dense" when
// neither is listed.
func denseSystems(systems []string) []string {
	var out []string
	for _, s := range systems {
		if s == "dense" || s == "finetuned" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		out = []string{"dense"}
	}
	return out
}

// queryLatency is the mean milliseconds of answering one query (its text encoded by the query
// tower, then the index searched to depth), timed over the first experiment.LatencyQueries of
// texts one at a time, as a server answers a request; the run's GOMAXPROCS threads serve each
// query.
func queryLatency(searcher *biencoder.Searcher, texts []string, depth int) (float64, error) {
	cut := searcher.QueryCut // the truncation report counts each query once
	defer func() { searcher.QueryCut = cut }()
	return experiment.LoneLatency(len(texts), func(i int) error {
		_, err := searcher.Search([]string{texts[i]}, depth)
		return err
	})
}
