package splade

import (
	"fmt"
	"path/filepath"

	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Searcher serves a SPLADE index written by a run (<run>/index/splade): the index, and the
// run's encoder (its latest checkpoint, named in the index's manifest) to encode the queries as
// the run did (query_max_length tokens, top_k_query terms). Not safe for concurrent use.
type Searcher struct {
	X        *index.Sparse
	Manifest index.SparseManifest
	s        *model.Splade
	tok      *tokenize.Tokenizer
	cfg      export.SpladeConfig
	runner   *model.SpladeRunner
	// Truncated counts the queries Search cut to query_max_length tokens (as the run's
	// evaluation did; `train search` reports it).
	Truncated int
}

// QueryMaxLength is the tokens a query is cut to, [CLS] and [SEP] included.
func (s *Searcher) QueryMaxLength() int { return s.cfg.QueryMaxLength }

// OpenSearcher opens the index directory dir (manifest and files verified) and its run's
// model.
func OpenSearcher(dir string) (*Searcher, error) {
	x, m, err := index.OpenSparse(dir)
	if err != nil {
		return nil, err
	}
	run, _ := m.Meta["run"].(string)
	if run == "" {
		return nil, fmt.Errorf("%s: the manifest names no run (meta.run) whose encoder made the index", filepath.Join(dir, "manifest.json"))
	}
	r, err := export.OpenRun(run)
	if err != nil {
		return nil, fmt.Errorf("%s: meta.run: %w", filepath.Join(dir, "manifest.json"), err)
	}
	s, cfg, err := r.Splade()
	if err != nil {
		return nil, err
	}
	// the index records the steps of the encoder that built it: a run whose latest checkpoint
	// is another one would encode the queries with another encoder than the passages
	if steps, ok := m.Meta["steps"].(float64); ok && int(steps) != r.Checkpoint.Trainer.Step {
		return nil, fmt.Errorf("%s: meta.steps %d, but the run's latest checkpoint %s is at step %d: the index was not built by it",
			filepath.Join(dir, "manifest.json"), int(steps), r.Checkpoint.Dir, r.Checkpoint.Trainer.Step)
	}
	if s.Dim() != m.Vocab {
		return nil, fmt.Errorf("%s: an index of %d terms, but the run's encoder has %d", dir, m.Vocab, s.Dim())
	}
	tok, err := r.Tokenizer()
	if err != nil {
		return nil, err
	}
	runner, err := model.NewSpladeRunner(s, 1, cfg.QueryMaxLength)
	if err != nil {
		return nil, err
	}
	return &Searcher{X: x, Manifest: m, s: s, tok: tok, cfg: cfg, runner: runner}, nil
}

// Search encodes the query text, prunes it to top_k_query terms and returns the k best
// passages.
func (s *Searcher) Search(text string, k int) ([]index.Hit, error) {
	bt := s.tok.EncodeBatch([]string{text}, s.cfg.QueryMaxLength)
	s.Truncated += bt.Truncated
	w, err := s.runner.Encode(bt.IDs, bt.Mask, 1)
	if err != nil {
		return nil, err
	}
	hits, _ := s.X.Search(index.Prune(w, s.cfg.TopKQuery), k)
	return hits, nil
}

// Close releases the query encoder.
func (s *Searcher) Close() error { return s.runner.Close() }
