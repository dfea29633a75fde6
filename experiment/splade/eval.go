package splade

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/schollz/progressbar/v3"
)

// EncodeTerms encodes texts with s into term weights, B sequences of L tokens per forward pass,
// and keeps each vector's k largest weights (index.Prune; k <= 0 keeps every non-zero). It
// returns the pruned vectors in text order and what truncation to L cut.
func EncodeTerms(s *model.Splade, tok *tokenize.Tokenizer, texts []string, L, B, k int) ([][]index.Term, tokenize.TruncCount, error) {
	return encodeTerms(s, tok, texts, L, B, k, nil)
}

// encodeTerms is EncodeTerms, adding each batch's texts to bar when not nil.
func encodeTerms(s *model.Splade, tok *tokenize.Tokenizer, texts []string, L, B, k int, bar *progressbar.ProgressBar) ([][]index.Term, tokenize.TruncCount, error) {
	var cut tokenize.TruncCount
	out := make([][]index.Term, 0, len(texts))
	if len(texts) == 0 {
		return out, cut, nil
	}
	r, err := model.NewSpladeRunner(s, min(B, len(texts)), L)
	if err != nil {
		return nil, cut, err
	}
	defer r.Close()
	V := s.Dim()
	for lo := 0; lo < len(texts); lo += B {
		part := texts[lo:min(lo+B, len(texts))]
		bt := cut.Add(tok.EncodeBatch(part, L))
		w, err := r.Encode(bt.IDs, bt.Mask, len(part))
		if err != nil {
			return nil, cut, err
		}
		for i := range part {
			out = append(out, index.Prune(w[i*V:(i+1)*V], k))
		}
		if bar != nil {
			_ = bar.Add(len(part))
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return out, cut, nil
}

// evalCorpus returns the passages the systems rank (EvalCorpus with the run's settings).
func (r *spladeRun) evalCorpus() ([]string, []string) {
	return EvalCorpus(r.ds, r.passages, r.rec.Eval.Splits, r.c.EvalCorpusSample, r.seed)
}

// EvalCorpus returns the ids and texts of the passages a run evaluates on: the whole corpus, or
// with n > 0 (splade.eval_corpus_sample) the passages the splits judge plus n others drawn with
// the seed, in corpus order.
func EvalCorpus(ds *data.Dataset, passages, splits []string, n int, seed uint64) ([]string, []string) {
	ids := ds.Corpus.IDs
	if n == 0 {
		return ids, passages
	}
	keep := make([]bool, len(ids))
	for _, split := range splits {
		for _, judged := range ds.Qrels[split] {
			for d := range judged {
				if i, ok := ds.Corpus.Index(d); ok {
					keep[i] = true
				}
			}
		}
	}
	var others []int
	for i, k := range keep {
		if !k {
			others = append(others, i)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x73706c616465)) // "splade"
	rng.Shuffle(len(others), func(a, b int) { others[a], others[b] = others[b], others[a] })
	for _, i := range others[:min(n, len(others))] {
		keep[i] = true
	}
	var sid, stext []string
	for i, k := range keep {
		if k {
			sid, stext = append(sid, ids[i]), append(stext, passages[i])
		}
	}
	return sid, stext
}

// ranking is the SPLADE encoder's ranking of every eval split over the (sampled) corpus, with
// its index and costs.
type ranking struct {
	x         *index.Sparse
	topK      int     // the passages' pruning of x (top_k_passage, or the dev's choice)
	encodeSec float64 // the passages' encoding
	runs      map[string]eval.Run
	stats     map[string]queryStats
}

// queryStats are one split's per-query sums: pruned terms, postings visited, the seconds of
// encoding and of searching (one query at a time).
type queryStats struct {
	n, terms, visited int
	encSec, searchSec float64
}

// rank encodes the passages ids/texts with the model's current weights into an inverted index
// and ranks every eval split's queries with it, one query at a time (the serving latency). The
// trained model's ("splade") pruning is chosen on dev when splade.select_top_k_passage is set.
func (r *spladeRun) rank(ids, texts []string, label string) (*ranking, error) {
	rec, c, o := r.rec, r.c, r.o
	selecting := label == "splade" && c.selecting()
	topK := c.TopKPassage
	if selecting {
		topK = slices.Max(c.SelectTopKPassage)
	}
	start := time.Now()
	bar := experiment.ProgressBar(o.Progress, len(texts), label+": encode passages")
	docs, cut, err := encodeTerms(r.s, r.tok, texts, r.lens.Passage, c.EncodeBatch, topK, bar)
	if err != nil {
		return nil, err
	}
	rk := &ranking{encodeSec: since(start), topK: topK, runs: map[string]eval.Run{}, stats: map[string]queryStats{}}
	tokenize.ReportTruncation(o.Out, label+" corpus", r.lens.Passage, tokenize.TruncPart{Name: "passages", Count: &cut})
	qr, err := model.NewSpladeRunner(r.s, 1, r.lens.Query)
	if err != nil {
		return nil, err
	}
	defer qr.Close()
	if selecting {
		if rk.topK, err = r.choosePruning(ids, docs, qr); err != nil {
			return nil, err
		}
		docs = pruneAll(docs, rk.topK)
	}
	if rk.x, err = index.NewSparse(ids, docs, r.s.Dim()); err != nil {
		return nil, err
	}
	for _, split := range rec.Eval.Splits {
		run, st := eval.Run{}, queryStats{}
		for _, q := range r.ds.Qrels[split].QueryIDs() {
			text, _ := r.ds.Queries.Text(q)
			t0 := time.Now()
			qt, err := r.queryTerms(qr, text)
			if err != nil {
				return nil, err
			}
			t1 := time.Now()
			hits, n := rk.x.Search(qt, rec.Eval.Depth)
			st.searchSec += time.Since(t1).Seconds()
			st.encSec += t1.Sub(t0).Seconds()
			run[q] = hits
			st.n, st.terms, st.visited = st.n+1, st.terms+len(qt), st.visited+n
		}
		rk.runs[split], rk.stats[split] = run, st
	}
	fmt.Fprintf(o.Out, "%s: encoded and indexed %d passages in %.1fs: %.1f non-zero terms per passage (top_k_passage %d), %d postings\n",
		label, rk.x.Len(), rk.encodeSec, float64(rk.x.Postings())/float64(max(1, rk.x.Len())), rk.topK, rk.x.Postings())
	return rk, nil
}

// queryTerms encodes one query with the 1-row runner qr and prunes it to splade.top_k_query.
func (r *spladeRun) queryTerms(qr *model.SpladeRunner, text string) ([]index.Term, error) {
	bt := r.tok.EncodeBatch([]string{text}, r.lens.Query)
	w, err := qr.Encode(bt.IDs, bt.Mask, 1)
	if err != nil {
		return nil, err
	}
	return index.Prune(w, r.c.TopKQuery), nil
}

// pruneAll keeps each vector's k largest weights (index.PruneTerms).
func pruneAll(docs [][]index.Term, k int) [][]index.Term {
	out := make([][]index.Term, len(docs))
	for i, d := range docs {
		out[i] = index.PruneTerms(d, k)
	}
	return out
}

// zeroShot ranks the eval splits with the model before training (eval.systems "zeroshot"): the
// init_from encoder with the initialised head.
func (r *spladeRun) zeroShot() error {
	if !slices.Contains(r.rec.Eval.Systems, "zeroshot") {
		return nil
	}
	ids, texts := r.evalCorpus()
	var err error
	r.zero, err = r.rank(ids, texts, "zeroshot")
	return err
}

// evaluate indexes the (sampled) corpus with the trained encoder, writes the index, ranks every
// eval split's queries with BM25, the model before training (when asked) and the trained one,
// writes runs/<split>.<system>.trec and metrics.json.
func (r *spladeRun) evaluate() error {
	rec, c, o := r.rec, r.c, r.o
	ids, texts := r.evalCorpus()
	metrics := map[string]float64{"eval/corpus_passages": float64(len(ids))}
	if c.EvalCorpusSample > 0 {
		fmt.Fprintf(o.Out, "eval: %d of %d passages (every judged passage of %v and %d drawn with the seed; splade.eval_corpus_sample): not comparable with a full-corpus ranking\n",
			len(ids), r.ds.Corpus.Len(), rec.Eval.Splits, c.EvalCorpusSample)
	}
	rk, err := r.rank(ids, texts, "splade")
	if err != nil {
		return err
	}
	x := rk.x
	dir := filepath.Join(r.dir, IndexDir)
	if err := os.RemoveAll(dir); err != nil { // an earlier evaluation of a resumed run
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(r.dir)
	if err != nil {
		return err
	}
	if err := x.Write(dir, map[string]any{"kind": KindName, "run": abs, "top_k_passage": rk.topK, "top_k_query": c.TopKQuery,
		"max_length": r.lens.Passage, "query_max_length": r.lens.Query, "steps": rec.Train.Steps}); err != nil {
		return err
	}
	indexBytes, err := dirBytes(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "splade: index written to %s (%d bytes)\n", dir, indexBytes)
	metrics["splade/index_bytes"], metrics["train/seconds"] = float64(indexBytes), r.trainSec
	metrics["splade/passage_terms"] = float64(x.Postings()) / float64(max(1, x.Len()))
	metrics["splade/encode_passage_seconds"] = rk.encodeSec
	if c.selecting() {
		metrics["splade/top_k_passage"] = float64(rk.topK)
	}
	bm25 := index.NewBM25(ids, texts, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	for _, split := range rec.Eval.Splits {
		qids := r.ds.Qrels[split].QueryIDs()
		bmRun := eval.Run{}
		start := time.Now()
		for _, q := range qids {
			text, _ := r.ds.Queries.Text(q)
			bmRun[q] = bm25.Search(text, rec.Eval.Depth)
		}
		bmSec := since(start)
		key := func(k string) string {
			if split == rec.Data.TestSplit {
				return k
			}
			return split + "/" + k
		}
		systems := []experiment.System{{Name: "bm25", Run: bmRun}}
		if r.zero != nil {
			systems = append(systems, experiment.System{Name: "zeroshot", File: "splade_zeroshot", Run: r.zero.runs[split]})
			r.costs(metrics, key, "zeroshot", r.zero, split)
		}
		systems = append(systems, experiment.System{Name: "splade", Run: rk.runs[split]})
		st := r.costs(metrics, key, "splade", rk, split)
		nq := float64(max(1, len(qids)))
		metrics[key("bm25/query_ms")] = 1000 * bmSec / nq
		rows, err := experiment.EvaluateSystems(r.dir, split, split == rec.Data.TestSplit, r.ds.Qrels[split], systems, rec.Eval.Metrics, metrics)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "\n%s (%d queries, %d passages):\n%s", split, len(qids), x.Len(), eval.FormatTable(rec.Eval.Metrics, rows))
		fmt.Fprintf(o.Out, "splade: %.1f non-zero terms per query (top_k_query %d), %.1f postings visited per query (FLOPS %.4f); per query: encode %.2f ms + search %.3f ms, BM25 %.3f ms (one query at a time, GOMAXPROCS as run)\n",
			float64(st.terms)/nq, c.TopKQuery, float64(st.visited)/nq, metrics[key("splade/flops")],
			metrics[key("splade/query_encode_ms")], metrics[key("splade/query_search_ms")], metrics[key("bm25/query_ms")])
	}
	return experiment.WriteMetrics(r.dir, metrics)
}

// costs records a ranking's sizes and costs of split under "<name>/...": the pruned terms per
// query and per passage, the FLOPS (postings visited per query over the passages: the mean
// fraction of the corpus a query term's posting lists touch, summed over its terms, SPLADE's
// FLOPS) and the per-query encode and search milliseconds.
func (r *spladeRun) costs(metrics map[string]float64, key func(string) string, name string, rk *ranking, split string) queryStats {
	st := rk.stats[split]
	nq := float64(max(1, st.n))
	metrics[key(name+"/query_terms")] = float64(st.terms) / nq
	metrics[key(name+"/passage_terms")] = float64(rk.x.Postings()) / float64(max(1, rk.x.Len()))
	metrics[key(name+"/flops")] = float64(st.visited) / nq / float64(max(1, rk.x.Len()))
	metrics[key(name+"/query_encode_ms")] = 1000 * st.encSec / nq
	metrics[key(name+"/query_search_ms")] = 1000 * st.searchSec / nq
	return st
}

// dirBytes is the size of the data files in dir (the written index's ids and postings; not its
// manifest, which names the run's path).
func dirBytes(dir string) (int64, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range es {
		info, err := e.Info()
		if err != nil {
			return 0, err
		}
		if info.Mode().IsRegular() && e.Name() != "manifest.json" {
			n += info.Size()
		}
	}
	return n, nil
}
