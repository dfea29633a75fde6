package retriever

import (
	"fmt"
	"path/filepath"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index/shard"
)

// Searcher serves the embedding shards a run wrote (<run>/corpus/shards) with that
// run's bi-encoder: the queries encoded as the run's dense evaluation encoded them
// (tokenizer.query_max_length, the similarity of its loss), searched shard by shard, or from
// index.ann_threshold passages on with the HNSW graph the run built (the same parameters and
// seed), so that a split's queries at k = eval.depth give the run's own dense ranking.
type Searcher struct {
	*biencoder.Searcher
	// Run is the run directory whose latest checkpoint encodes the queries.
	Run string
	// Passages is the number of vectors in the shards.
	Passages int
}

// OpenSearcher opens the shards in dir (verified against their manifest) and the run two
// directories above it. The run's latest checkpoint (the chosen one, with checkpoint
// selection) must be the model whose vectors the shards hold (the manifest's model_hash).
func OpenSearcher(dir string) (*Searcher, error) {
	man, err := shard.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	run := filepath.Dir(filepath.Dir(abs))
	r, err := export.OpenRun(run)
	if err != nil {
		return nil, fmt.Errorf("%s: the run of the shards (two directories above): %w", dir, err)
	}
	m, meta, err := r.BiEncoder()
	if err != nil {
		return nil, err
	}
	if h := modelHash(m); h != man.ModelHash {
		return nil, fmt.Errorf("%s: model_hash %s, but the latest checkpoint of %s (%s) hashes to %s: the shards were not written by it",
			filepath.Join(dir, shard.ManifestFile), man.ModelHash, run, r.Checkpoint.Dir, h)
	}
	if r.Recipe == nil {
		return nil, fmt.Errorf("%s: the run's recipe (its query length and index settings): %w", run, r.RecipeErr)
	}
	rec := r.Recipe
	tok, err := r.Tokenizer()
	if err != nil {
		return nil, err
	}
	s, err := biencoder.OpenShardSearcher(m, tok, biencoder.SearchOptions{
		Len:    biencoder.Lengths{Query: rec.Tokenizer.QueryLength(), Passage: rec.Tokenizer.MaxLength},
		Cosine: meta.Similarity == "cosine", Dynamic: rec.Tokenizer.DynamicPadding,
		ANNThreshold: rec.Index.ANNThreshold, ANN: annParams(rec),
	}, dir)
	if err != nil {
		return nil, err
	}
	return &Searcher{Searcher: s, Run: run, Passages: int(man.Count)}, nil
}
