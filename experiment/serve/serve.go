// Package serve answers queries from the indexes runs save, without re-running their recipes:
// a SPLADE run's inverted index (index/splade), a ColBERT run's PLAID-style index (plaid/), a
// retriever run's embedding shards (corpus/shards, which a streamed run encodes and a loaded
// run writes from the vectors it searched; exact or HNSW, as the run searched them), and BM25
// over a run's corpus. Each encodes the queries with the run's own model and settings, so that
// Search of a split's queries at k = eval.depth writes the run's own TREC file for that
// system, byte for byte (`train search`).
package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	cb "github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment/colbert"
	"github.com/ragtrain/ragtrain/experiment/retriever"
	"github.com/ragtrain/ragtrain/experiment/splade"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// Search ranks every query of the BEIR queries file queries (k passages each) with the index
// in dir and writes the TREC run out (atomically), tagged with the system name the run's own
// evaluation gives that ranking: a directory whose manifest.json is a PLAID-style index
// (colbert_plaid), embedding shards (dense), a SPLADE index (splade), or a run directory without an index manifest
// (bm25: BM25 over data.dir's corpus with the run's index.k1 and index.b, rebuilt in memory).
// What it did is reported to log.
func Search(dir, queries, out string, k int, log io.Writer) error {
	if k < 1 {
		return fmt.Errorf("k = %d, want >= 1", k)
	}
	s, err := open(dir)
	if err != nil {
		return err
	}
	defer s.Close()
	qs, err := data.LoadQueries(queries)
	if err != nil {
		return err
	}
	texts := make([]string, len(qs.IDs))
	for i, id := range qs.IDs {
		texts[i], _ = qs.Text(id)
	}
	hits, err := s.searchAll(texts, k)
	if err != nil {
		return err
	}
	run := eval.Run{}
	for i, id := range qs.IDs {
		run[id] = hits[i]
	}
	if err := eval.WriteTREC(out, run, s.tag()); err != nil {
		return err
	}
	fmt.Fprintf(log, "search: %d queries over %d passages of %s (%s) -> %s\n", len(qs.IDs), s.passages(), dir, s.tag(), out)
	s.report(log, len(qs.IDs))
	return nil
}

// searcher ranks query texts with one saved index; tag is the TREC run's tag, the system name
// the run's own evaluation gave the same ranking (so the file is that run's, byte for byte).
type searcher interface {
	searchAll(texts []string, k int) ([][]index.Hit, error)
	tag() string
	passages() int
	report(w io.Writer, queries int) // truncation and the like, after the search
	Close() error
}

// open opens dir by what it holds: a run directory (recipe.resolved.toml, no index
// manifest) is served by BM25, a manifest.json of format shard.FormatName by the retriever's
// dense searcher, of format cb.PlaidFormat by the ColBERT searcher, any other by the SPLADE
// searcher (whose reader names a manifest of another format).
func open(dir string) (searcher, error) {
	mpath := filepath.Join(dir, cb.ManifestFile)
	mb, err := bounded.ReadFile(mpath, 1<<20)
	if errors.Is(err, os.ErrNotExist) {
		if _, rerr := os.Stat(filepath.Join(dir, export.RecipeFile)); rerr == nil {
			return openBM25(dir)
		}
	}
	var head struct {
		Format string `json:"format"`
	}
	if err == nil && json.Unmarshal(mb, &head) == nil && head.Format == shard.FormatName {
		s, err := retriever.OpenSearcher(dir)
		if err != nil {
			return nil, err
		}
		return denseSearcher{s}, nil
	}
	if err == nil && head.Format == cb.PlaidFormat {
		s, err := colbert.OpenSearcher(dir)
		if err != nil {
			return nil, err
		}
		return plaidSearcher{s}, nil
	}
	s, err := splade.OpenSearcher(dir)
	if err != nil {
		return nil, err
	}
	return spladeSearcher{s}, nil
}

type spladeSearcher struct{ *splade.Searcher }

func (s spladeSearcher) searchAll(texts []string, k int) ([][]index.Hit, error) {
	out := make([][]index.Hit, len(texts))
	for i, t := range texts {
		var err error
		if out[i], err = s.Search(t, k); err != nil {
			return nil, fmt.Errorf("query %d: %w", i+1, err)
		}
	}
	return out, nil
}
func (s spladeSearcher) tag() string   { return "splade" }
func (s spladeSearcher) passages() int { return s.X.Len() }
func (s spladeSearcher) report(w io.Writer, n int) {
	if s.Truncated > 0 {
		fmt.Fprintf(w, "search: truncation: %d of %d queries cut to %d tokens (the run's query_max_length)\n", s.Truncated, n, s.QueryMaxLength())
	}
}

// denseSearcher serves a retriever run's embedding shards (tag dense).
type denseSearcher struct{ *retriever.Searcher }

func (s denseSearcher) searchAll(texts []string, k int) ([][]index.Hit, error) {
	return s.Search(texts, k)
}
func (s denseSearcher) tag() string   { return "dense" }
func (s denseSearcher) passages() int { return s.Passages }
func (s denseSearcher) report(w io.Writer, n int) {
	how := "exact, shard by shard"
	if h := s.HNSW(); h != nil {
		p := h.Params()
		how = fmt.Sprintf("HNSW (M %d, efConstruction %d, efSearch %d; the run's index.ann_*)", p.M, p.EfConstruction, p.EfSearch)
	}
	fmt.Fprintf(w, "search: dense: %s\n", how)
	if _, cut, _, _ := s.QueryCut.Counts(); cut > 0 {
		fmt.Fprintf(w, "search: truncation: %d of %d queries cut to %d tokens (the run's query_max_length)\n", cut, n, s.Len.Query)
	}
}

type plaidSearcher struct{ *colbert.Searcher }

func (s plaidSearcher) searchAll(texts []string, k int) ([][]index.Hit, error) {
	return s.SearchAll(texts, k)
}
func (s plaidSearcher) tag() string   { return "colbert_plaid" }
func (s plaidSearcher) passages() int { return len(s.X.IDs) }
func (s plaidSearcher) report(w io.Writer, n int) {
	fmt.Fprintf(w, "search: PLAID-style: ncells %d, centroid_score_threshold %g, ndocs %d (the run's [colbert])\n",
		s.Params.NCells, s.Params.CentroidScoreThreshold, s.Params.NDocs)
	if c := s.Truncated(); c > 0 {
		fmt.Fprintf(w, "search: truncation: %d of %d queries cut to %d tokens (the run's colbert.query_length)\n", c, n, s.QueryLength())
	}
}

// bm25Searcher is BM25 over a run's corpus: data.dir's corpus.jsonl (titles as data.title_field
// says), index.k1 and index.b of the run's recipe.resolved.toml.
type bm25Searcher struct{ x *index.BM25 }

func openBM25(run string) (searcher, error) {
	path := filepath.Join(run, export.RecipeFile)
	rec, err := configs.Load(path)
	if err != nil {
		return nil, err
	}
	if rec.Data.Dir == "" {
		return nil, fmt.Errorf("%s: data.dir: empty, no corpus to rank with BM25", path)
	}
	c, err := data.LoadCorpus(filepath.Join(rec.Data.Dir, "corpus.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("%s: data.dir: %w", path, err)
	}
	texts := make([]string, c.Len())
	for i := range texts {
		texts[i] = c.Passage(i, rec.Data.TitleField)
	}
	return bm25Searcher{index.NewBM25(c.IDs, texts, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})}, nil
}

func (s bm25Searcher) searchAll(texts []string, k int) ([][]index.Hit, error) {
	out := make([][]index.Hit, len(texts))
	for i, t := range texts {
		out[i] = s.x.Search(t, k)
	}
	return out, nil
}
func (s bm25Searcher) tag() string   { return "bm25" }
func (s bm25Searcher) passages() int { return s.x.Len() }
func (s bm25Searcher) report(w io.Writer, n int) {
	fmt.Fprintln(w, "search: BM25 rebuilt from the run's corpus (index.k1, index.b)")
}
func (s bm25Searcher) Close() error { return nil }
