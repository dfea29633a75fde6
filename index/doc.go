// Package index holds the first-stage retrievers the toolkit evaluates and mines hard negatives
// with: a Lucene-4.10-compatible English analyzer and BM25 over an in-memory inverted index
// with delta- and varint-compressed postings (built from slices, or passage by passage with a
// BM25Builder so a streamed corpus need not be held), exact top-k inner-product search over
// float32 embeddings (Flat; Dot and TopK let other searchers, such as package index/shard's
// sharded search, return exactly its hits), and Reciprocal Rank Fusion of several runs (RRF).
//
// Every searcher returns []Hit sorted by Score descending, ties broken by DocID ascending, so
// results are deterministic whatever the insertion order or the number of goroutines.
//
// BM25 reproduces Lucene 4.10.4's BM25Similarity to the float: Lucene idf, the lossy one-byte
// length norm (SmallFloat.floatToByte315) and float32 arithmetic, so that a run matches the
// reference Lucene runs score for score. BM25Params.ExactLengths switches to the textbook
// formula in float64 with exact document lengths.
//
// Not for: approximate nearest-neighbour search (Flat is exhaustive, O(N·dim) per query),
// phrase or field queries, incremental updates (indexes are built once from a full corpus),
// or persistence of BM25 (rebuild from the corpus; index_refresh wraps rebuilding during
// training). Embeddings persist as shards: package index/shard.
package index

// Hit is one retrieved document: its id and its score under the searcher that produced it.
// Lists of hits are sorted by Score descending, ties by DocID ascending.
type Hit struct {
	DocID string
	Score float64
}
