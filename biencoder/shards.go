package biencoder

import (
	"fmt"

	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/tokenize/tokstore"
)

// EncodeStore encodes every passage of a tokenized passage store with enc, shardSize passages
// at a time, L2-normalising the vectors when cosine, and writes chunk i as shard i of meta in
// dir (shard.WriteShard), then commits the version (shard.CommitManifest). No passage text is
// in memory, and at most shardSize×H vectors and their token ids at a time. With fixed padding
// the vectors are those Encode gives the passages' texts, bit for bit; with dynamic padding
// each chunk is length-sorted on its own (the same vectors to float32 rounding). c, when not
// nil, counts truncation. It fails when meta.Dim is not the tower's H or shardSize < 1, or as
// WriteShard and CommitManifest do.
func EncodeStore(enc *Encoder, s *tokstore.Store, dir string, meta shard.Meta, shardSize int, cosine bool, c *tokenize.TruncCount) (*shard.Manifest, error) {
	h := enc.tower.Dim()
	if meta.Dim != h {
		return nil, fmt.Errorf("dense: encode store into %s: dim %d, the tower's is %d", dir, meta.Dim, h)
	}
	if shardSize < 1 {
		return nil, fmt.Errorf("dense: encode store into %s: shard size %d, want >= 1", dir, shardSize)
	}
	n := s.Len()
	nShards := max(1, (n+shardSize-1)/shardSize)
	for i := range nShards {
		lo, hi := min(i*shardSize, n), min((i+1)*shardSize, n)
		ids := make([]string, 0, hi-lo)
		tokens := make([][]int, 0, hi-lo)
		for p := lo; p < hi; p++ {
			ids = append(ids, s.ID(p))
			tokens = append(tokens, s.Tokens(nil, p))
		}
		var vecs []float32
		if len(tokens) > 0 {
			var err error
			if vecs, err = enc.EncodeTokenized(tokens, c); err != nil {
				return nil, fmt.Errorf("dense: encode passages %d..%d: %w", lo, hi-1, err)
			}
		}
		if cosine {
			NormalizeRows(vecs, h)
		}
		if _, err := shard.WriteShard(dir, meta, i, ids, vecs); err != nil {
			return nil, err
		}
	}
	return shard.CommitManifest(dir, meta, nShards)
}

// WriteShards writes the passage vectors of a searcher built in memory (NewSearcher: the
// N×H rows its index holds, L2-normalised with Cosine, in corpus order) as the embedding shards
// of meta in dir, shardSize passages a shard, and commits them (shard.WriteAll; meta.Dim is
// set to the passage tower's H). OpenShardSearcher of dir with the same model and options then
// ranks every query as d does, hit for hit: exact search over the same float32 rows gives
// index.Flat's hits (package shard, Exactness), and from opt.ANNThreshold passages on the
// HNSW graph is rebuilt from the same rows in the same order with the same parameters. It
// fails for a searcher that searches its shards on disk (NewShardSearcher or
// OpenShardSearcher below opt.ANNThreshold: its vectors are in shards already) and as WriteAll
// does.
func (d *Searcher) WriteShards(dir string, meta shard.Meta, shardSize int) (*shard.Manifest, error) {
	if d.flat == nil {
		return nil, fmt.Errorf("dense: write shards to %s: the searcher's vectors are in shards already", dir)
	}
	meta.Dim = d.m.Passage.Dim()
	ids, vecs := d.flat.Rows()
	return shard.WriteAll(dir, meta, ids, vecs, shardSize)
}
