package colbert

import (
	"fmt"
	"path/filepath"

	cb "github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index"
)

// Searcher serves the PLAID-style index a run wrote (<run>/plaid) with that run's model: the
// queries are encoded as the run's evaluation encoded them (query_length tokens, [MASK]
// expansion, colbert.encode_batch texts a pass) and searched with the run's [colbert] ncells,
// centroid_score_threshold and ndocs (those chosen on dev when the run chose them), so that
// SearchAll of a split's queries at k = eval.depth gives the run's own colbert_plaid ranking.
// Not safe for concurrent use.
type Searcher struct {
	X        *cb.Plaid
	Manifest *cb.PlaidManifest
	// Params are the run's search settings.
	Params cb.SearchParams
	// Run is the run directory whose latest checkpoint encodes the queries.
	Run  string
	enc  *cb.Encoder
	qlen int
}

// OpenSearcher opens the PLAID-style index in dir (its manifest, size and sha256 verified) and
// the run it belongs to, the directory above dir. The run's latest checkpoint must be the model
// whose passage vectors the index holds (the manifest's model_hash): a run trained further or
// an index copied beside another run is refused, since its queries would be encoded by another
// model than its passages.
func OpenSearcher(dir string) (*Searcher, error) {
	x, man, err := cb.OpenPlaid(dir)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	run := filepath.Dir(abs)
	r, err := export.OpenRun(run)
	if err != nil {
		return nil, fmt.Errorf("%s: the run of the index (the directory above it): %w", dir, err)
	}
	m, err := r.ColBERT()
	if err != nil {
		return nil, err
	}
	if h := modelHash(m); h != man.ModelHash {
		return nil, fmt.Errorf("%s: model_hash %s, but the latest checkpoint of %s (%s) hashes to %s: the index was not built by it",
			filepath.Join(dir, cb.ManifestFile), man.ModelHash, run, r.Checkpoint.Dir, h)
	}
	if m.Cfg.Dim != x.Dim {
		return nil, fmt.Errorf("%s: an index of %d-wide vectors, the run's model makes %d", dir, x.Dim, m.Cfg.Dim)
	}
	if r.Recipe == nil {
		return nil, fmt.Errorf("%s: the run's recipe (its [colbert] search settings): %w", run, r.RecipeErr)
	}
	c := Of(r.Recipe)
	tok, err := r.Tokenizer()
	if err != nil {
		return nil, err
	}
	enc, err := cb.NewEncoder(m, tok, c.EncodeBatch)
	if err != nil {
		return nil, err
	}
	params := cb.SearchParams{NCells: c.NCells, CentroidScoreThreshold: c.CentroidScoreThreshold, NDocs: c.NDocs}
	if c.selecting() { // the settings chosen on dev, as the run's metrics.json records them
		mt, err := experiment.ReadMetrics(run)
		if err != nil {
			return nil, fmt.Errorf("%s: the PLAID-style search settings chosen on dev: %w", run, err)
		}
		nc, ok1 := mt["colbert_plaid/ncells"]
		nd, ok2 := mt["colbert_plaid/ndocs"]
		th, ok3 := mt["colbert_plaid/centroid_score_threshold"]
		if !ok1 || !ok2 || !ok3 || nc < 1 || nd < 4 || nc != float64(int(nc)) || nd != float64(int(nd)) {
			return nil, fmt.Errorf("%s: %s lacks valid colbert_plaid/ncells, ndocs and centroid_score_threshold (the settings chosen on dev)", run, experiment.MetricsFile)
		}
		params = cb.SearchParams{NCells: int(nc), NDocs: int(nd), CentroidScoreThreshold: th}
	}
	return &Searcher{X: x, Manifest: man, Params: params, Run: run, enc: enc, qlen: m.Cfg.QueryLength}, nil
}

// SearchAll encodes the query texts (one pass of encode_batch texts at a time, as the run's
// evaluation) and returns the k best passages of each, in the texts' order.
func (s *Searcher) SearchAll(texts []string, k int) ([][]index.Hit, error) {
	qv, err := s.enc.Queries(texts)
	if err != nil {
		return nil, err
	}
	out := make([][]index.Hit, len(texts))
	for i := range texts {
		out[i] = s.X.Search(qv.Rows(i), k, s.Params)
	}
	return out, nil
}

// QueryLength is the tokens every query is encoded to ([CLS] and the marker included).
func (s *Searcher) QueryLength() int { return s.qlen }

// Truncated is the number of queries cut to QueryLength tokens so far.
func (s *Searcher) Truncated() int {
	_, cut, _, _ := s.enc.QueryCut.Counts()
	return cut
}

// Close releases the query encoder.
func (s *Searcher) Close() error {
	s.enc.Close()
	return nil
}
