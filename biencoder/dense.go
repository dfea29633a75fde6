package biencoder

import (
	"fmt"
	"io"
	"time"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/index/ann"
	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/tokenize/tokstore"
)

// EncoderConfig is the encoder configuration of the recipe's [model] for a vocabulary of vocab
// tokens.
func EncoderConfig(rec *configs.Recipe, vocab int) model.EncoderConfig {
	return model.EncoderConfig{
		Encoder: rec.Model.Encoder, Vocab: vocab, Hidden: rec.Model.Hidden, Layers: rec.Model.Layers,
		Heads: rec.Model.Heads, FFN: rec.Model.FFN, MaxPosition: rec.Model.MaxPosition,
		Dropout: rec.Model.Dropout, Pooling: rec.Model.Pooling,
	}
}

// Dropout streams per phase (XORed into the seed) so the phases draw independent masks.
const (
	StreamPretrain = 0x70726574 // "pret"
	StreamTrain    = 0x74726169 // "trai"
)

// Lengths are the maximum lengths of a bi-encoder's two sides, in tokens with [CLS] and [SEP]:
// the queries are cut to Query tokens, the passages to Passage tokens (tokenize.EncodeBatch), and
// a fixed-shape graph pads each side to its length. Today's recipes give both
// tokenizer.max_length.
type Lengths struct {
	Query, Passage int
}

// SearchOptions configure a Searcher. The zero Dynamic is the fixed padding the shipped recipes
// ran with (their numbers unchanged).
type SearchOptions struct {
	Len Lengths // the queries' and the passages' maximum lengths
	// Cosine L2-normalises both sides' vectors (cosine similarity as inner product).
	Cosine bool
	// Dynamic pads each batch of length-sorted texts to its own length bucket (Encoder) instead
	// of every text to its side's maximum length; the vectors are the same to float32 rounding.
	Dynamic bool
	// Progress, when set, shows a progress bar while the passages are encoded (dynamic padding).
	Progress io.Writer
	// Prefixes are embedding sizes m below the full one also indexed (Matryoshka evaluation):
	// every vector cut to its first m coordinates, then L2-normalised with Cosine. Nil for none.
	// Prefix indexes are always exact (index.Flat).
	Prefixes []int
	// ANNThreshold, when > 0, indexes a corpus of at least this many passages in an HNSW graph
	// of parameters ANN (ann.New) instead of index.Flat: approximate rankings. 0 is exact
	// search (recipe key index.ann_threshold).
	ANNThreshold int
	// ANN are the HNSW parameters (zero fields take ann.DefaultParams').
	ANN ann.Params
}

// Searcher ranks a corpus for queries with a bi-encoder: the passages are encoded once
// into an inner-product index, exact (index.Flat) or, from SearchOptions.ANNThreshold
// passages on, an HNSW graph (ann.HNSW); with cosine similarity both sides are L2-normalised.
// It keeps the query tower's graphs between searches; Close releases them.
type Searcher struct {
	m     *model.BiEncoder
	opt   SearchOptions
	query *Encoder
	flat  ann.Searcher // index.Flat or *ann.HNSW
	// BuildSeconds is the wall-clock time spent building the index from the vectors (the
	// HNSW graph, or Flat's copy), without encoding; for an HNSW graph built from embedding
	// shards (NewShardSearcher), reading the shards included.
	BuildSeconds float64
	// shards, instead of flat, holds the corpus on disk (NewShardSearcher, exact).
	shards *shard.Reader
	// fromShards is the number of embedding shards an HNSW graph was built from (0: none).
	fromShards int
	// prefix holds the index of each SearchOptions.Prefixes size.
	prefix map[int]*index.Flat
	// Len holds the lengths queries and passages are cut to (SearchOptions.Len).
	Len Lengths
	// PassageCut counts what truncation to Len.Passage cut of the corpus, QueryCut what
	// truncation to Len.Query cut of the queries searched.
	PassageCut, QueryCut tokenize.TruncCount
}

// NewSearcher encodes passages (ids their ids) with the passage tower of m into a Searcher, as
// opt says.
func NewSearcher(m *model.BiEncoder, tok *tokenize.Tokenizer, opt SearchOptions, ids, passages []string) (*Searcher, error) {
	q, pe, err := newEncoders(m, tok, opt)
	if err != nil {
		return nil, err
	}
	pe.Progress, pe.Name = opt.Progress, fmt.Sprintf("encode %d passages", len(passages))
	var pCut tokenize.TruncCount
	pv, err := pe.Encode(passages, &pCut)
	pe.Close()
	if err != nil {
		return nil, err
	}
	h := m.Passage.Dim()
	prefix := map[int]*index.Flat{}
	for _, d := range opt.Prefixes {
		if d < 1 || d >= h {
			return nil, fmt.Errorf("dense: prefix of %d dimensions, want 1..%d (below the full %d)", d, h-1, h)
		}
		f, err := index.NewFlat(ids, Prefix(pv, h, d, opt.Cosine), d)
		if err != nil {
			return nil, err
		}
		prefix[d] = f
	}
	if opt.Cosine {
		NormalizeRows(pv, h)
	}
	start := time.Now()
	flat, err := newIndex(ids, pv, h, opt)
	if err != nil {
		return nil, err
	}
	return &Searcher{m: m, opt: opt, query: q, flat: flat, BuildSeconds: time.Since(start).Seconds(), prefix: prefix, Len: opt.Len, PassageCut: pCut}, nil
}

// newIndex indexes the N = len(ids) rows of vecs (N×h, normalised already with Cosine) as opt
// says: index.Flat, or from opt.ANNThreshold passages on an HNSW graph of parameters opt.ANN
// (ann.New). NewSearcher and NewShardSearcher both build their index with it.
func newIndex(ids []string, vecs []float32, h int, opt SearchOptions) (ann.Searcher, error) {
	return ann.New(ids, vecs, h, opt.ANNThreshold, opt.ANN)
}

// LoadShards reads every shard of r in shard order into memory: the N ids and the N×H
// vectors, decoded to float32 as r's search scores them (float32 shards bit for bit; float16
// exactly; int8 as q·s in float32). It holds 4·N·H bytes of vectors (and the ids), so a
// corpus loaded this way is no longer searched in bounded memory. It fails when a shard
// cannot be read or holds a different count of vectors than of ids.
func LoadShards(r *shard.Reader) ([]string, []float32, error) {
	n, h := r.Len(), r.Dim()
	ids := make([]string, 0, n)
	vecs := make([]float32, 0, n*h)
	err := r.ForEach(func(i int, sids []string, svecs []float32) error {
		if len(svecs) != len(sids)*h {
			return fmt.Errorf("dense: load shard %d: %d values for %d ids of dim %d", i, len(svecs), len(sids), h)
		}
		ids = append(ids, sids...)
		vecs = append(vecs, svecs...)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(ids) != n {
		return nil, nil, fmt.Errorf("dense: load shards: %d passages, the manifest says %d", len(ids), n)
	}
	return ids, vecs, nil
}

// HNSW returns the searcher's HNSW graph, nil when the search is exact (index.Flat, or the
// shards of NewShardSearcher).
func (d *Searcher) HNSW() *ann.HNSW {
	h, _ := d.flat.(*ann.HNSW)
	return h
}

// IndexBytes is the size in bytes of the passage index a search reads: the HNSW graph's
// ann.HNSW.Bytes (vectors, links, ids); for an exact search the vectors alone, 4·N·dim in
// memory (index.Flat), N·dim at the stored value size in embedding shards (shard.Reader's
// VectorBytes: float32 shards give the in-memory figure). Ids and the query tower are not
// counted.
func (d *Searcher) IndexBytes() int64 {
	if h := d.HNSW(); h != nil {
		return h.Bytes()
	}
	if d.shards != nil {
		return d.shards.VectorBytes()
	}
	return 4 * int64(d.flat.Len()) * int64(d.flat.Dim())
}

// Describe says in one line how the corpus is searched: "HNSW over N passages (M m,
// efConstruction c, efSearch s), built in X s" (approximate; built from embedding shards,
// "HNSW over N passages (M m, efConstruction c, efSearch s) from K shards, built in X s, Y MiB"
// with Y the graph's ann.HNSW.Bytes) or "exact search over N passages" (index.Flat, or "... in
// shards").
func (d *Searcher) Describe() string {
	if h := d.HNSW(); h != nil {
		p := h.Params()
		if d.fromShards > 0 {
			shards := "shards"
			if d.fromShards == 1 {
				shards = "shard"
			}
			return fmt.Sprintf("HNSW over %d passages (M %d, efConstruction %d, efSearch %d) from %d %s, built in %.1f s, %.1f MiB", h.Len(), p.M, p.EfConstruction, p.EfSearch, d.fromShards, shards, d.BuildSeconds, float64(h.Bytes())/(1<<20))
		}
		return fmt.Sprintf("HNSW over %d passages (M %d, efConstruction %d, efSearch %d), built in %.1f s", h.Len(), p.M, p.EfConstruction, p.EfSearch, d.BuildSeconds)
	}
	if d.shards != nil {
		return fmt.Sprintf("exact search over %d passages in shards", d.shards.Len())
	}
	return fmt.Sprintf("exact search over %d passages", d.flat.Len())
}

// newEncoders builds the query and the passage tower's encoders of a searcher (lengths opt.Len,
// dynamic padding as opt.Dynamic says).
func newEncoders(m *model.BiEncoder, tok *tokenize.Tokenizer, opt SearchOptions) (q, p *Encoder, err error) {
	if q, err = NewEncoder(m.Query, tok, opt.Len.Query, opt.Dynamic); err != nil {
		return nil, nil, fmt.Errorf("queries: %w", err)
	}
	if p, err = NewEncoder(m.Passage, tok, opt.Len.Passage, opt.Dynamic); err != nil {
		q.Close()
		return nil, nil, fmt.Errorf("passages: %w", err)
	}
	return q, p, nil
}

// NewShardSearcher is NewSearcher for a corpus kept on disk: the passages of the tokenized
// store are encoded with the passage tower of m (EncodeStore, shardSize passages a shard, each
// shard's texts alone in memory) into the embedding shards of version meta in dir, and searched
// shard by shard (shard.Reader). meta.Dim is set to the tower's H. With fixed padding the
// rankings are NewSearcher's over the store's passages, hit for hit; with Dynamic each shard is
// length-sorted on its own (the same vectors to float32 rounding). opt.Prefixes must be empty.
//
// From opt.ANNThreshold passages on (> 0), the shards are read back into memory (LoadShards)
// and searched with an HNSW graph of parameters opt.ANN, built as NewSearcher builds it: the
// same graph, and so the same hits, as NewSearcher's over the same vectors. That lifts the
// bounded memory of shard-by-shard search: the graph holds the N×H float32 vectors
// (4·N·H bytes) and its links (about 4·N·2M bytes; ann.HNSW.Bytes), and while it is built the
// vectors read and the graph's copy of them are both held (8·N·H bytes).
func NewShardSearcher(m *model.BiEncoder, tok *tokenize.Tokenizer, opt SearchOptions, store *tokstore.Store, dir string, meta shard.Meta, shardSize int) (*Searcher, error) {
	if len(opt.Prefixes) > 0 {
		return nil, fmt.Errorf("dense: shard searcher: prefix indexes (%v) are not supported", opt.Prefixes)
	}
	q, pe, err := newEncoders(m, tok, opt)
	if err != nil {
		return nil, err
	}
	meta.Dim = m.Passage.Dim()
	var pCut tokenize.TruncCount
	_, err = EncodeStore(pe, store, dir, meta, shardSize, opt.Cosine, &pCut)
	pe.Close()
	if err != nil {
		q.Close()
		return nil, err
	}
	s, err := openShards(m, q, opt, dir)
	if err != nil {
		return nil, err
	}
	s.PassageCut = pCut
	return s, nil
}

// OpenShardSearcher is NewShardSearcher over embedding shards already in dir (written by
// NewShardSearcher with m's passage tower, e.g. a streamed run's): nothing is encoded but the
// queries, so its rankings are those of the searcher that wrote the shards, hit for hit. The
// shards must be of m's width; that they hold m's vectors is the caller's check (the manifest's
// model_hash).
func OpenShardSearcher(m *model.BiEncoder, tok *tokenize.Tokenizer, opt SearchOptions, dir string) (*Searcher, error) {
	if len(opt.Prefixes) > 0 {
		return nil, fmt.Errorf("dense: shard searcher: prefix indexes (%v) are not supported", opt.Prefixes)
	}
	q, err := NewEncoder(m.Query, tok, opt.Len.Query, opt.Dynamic)
	if err != nil {
		return nil, fmt.Errorf("queries: %w", err)
	}
	return openShards(m, q, opt, dir)
}

// openShards opens the shards of dir for the query encoder q (closed on error): searched shard
// by shard, or, from opt.ANNThreshold passages on, read into an HNSW graph.
func openShards(m *model.BiEncoder, q *Encoder, opt SearchOptions, dir string) (*Searcher, error) {
	r, err := shard.OpenVerified(dir) // checked against the manifest, as every reader of shards is
	if err != nil {
		q.Close()
		return nil, err
	}
	if r.Dim() != m.Passage.Dim() {
		r.Close()
		q.Close()
		return nil, fmt.Errorf("dense: %s: shards of %d-wide vectors, the passage tower's are %d", dir, r.Dim(), m.Passage.Dim())
	}
	s := &Searcher{m: m, opt: opt, query: q, prefix: map[int]*index.Flat{}, Len: opt.Len}
	if opt.ANNThreshold <= 0 || r.Len() < opt.ANNThreshold {
		s.shards = r
		return s, nil
	}
	start := time.Now()
	ids, vecs, err := LoadShards(r)
	s.fromShards = len(r.Manifest().Shards)
	if e := r.Close(); err == nil {
		err = e
	}
	if err != nil {
		q.Close()
		return nil, err
	}
	if s.flat, err = newIndex(ids, vecs, m.Passage.Dim(), opt); err != nil {
		q.Close()
		return nil, err
	}
	s.BuildSeconds = time.Since(start).Seconds()
	return s, nil
}

// Prefix returns the first d coordinates of each h-dimensional row of vecs, L2-normalised when
// normalize is set (a Matryoshka embedding truncated for cosine similarity); vecs is unchanged.
func Prefix(vecs []float32, h, d int, normalize bool) []float32 {
	n := len(vecs) / h
	out := make([]float32, n*d)
	for i := range n {
		copy(out[i*d:(i+1)*d], vecs[i*h:i*h+d])
	}
	if normalize {
		NormalizeRows(out, d)
	}
	return out
}

// SearchPrefixes is Search that also ranks with every prefix index (SearchOptions.Prefixes):
// the queries are encoded once, and each prefix search uses their first m coordinates
// (normalised again with Cosine). The full ranking is Search's.
func (d *Searcher) SearchPrefixes(texts []string, depth int) ([][]index.Hit, map[int][][]index.Hit, error) {
	qv, err := d.query.Encode(texts, &d.QueryCut)
	if err != nil {
		return nil, nil, err
	}
	h := d.m.Query.Dim()
	byPrefix := map[int][][]index.Hit{}
	for m, f := range d.prefix {
		byPrefix[m] = f.SearchBatch(Prefix(qv, h, m, d.opt.Cosine), depth)
	}
	if d.opt.Cosine {
		NormalizeRows(qv, h)
	}
	if d.shards != nil {
		hits, err := d.shards.SearchBatch(qv, depth)
		return hits, byPrefix, err
	}
	return d.flat.SearchBatch(qv, depth), byPrefix, nil
}

// Search returns the depth best passages of each query text.
func (d *Searcher) Search(texts []string, depth int) ([][]index.Hit, error) {
	qv, err := d.query.Encode(texts, &d.QueryCut)
	if err != nil {
		return nil, err
	}
	if d.opt.Cosine {
		NormalizeRows(qv, d.m.Query.Dim())
	}
	if d.shards != nil {
		return d.shards.SearchBatch(qv, depth)
	}
	return d.flat.SearchBatch(qv, depth), nil
}

// Close releases the query tower's graphs (a later Search builds them again) and, for a
// NewShardSearcher, unmaps its shards (no Search after that).
func (d *Searcher) Close() error {
	err := d.query.Close()
	if d.shards != nil {
		if e := d.shards.Close(); err == nil {
			err = e
		}
		d.shards = nil
	}
	return err
}

// NormalizeRows is index.NormalizeRows (cosine similarity as inner product).
var NormalizeRows = index.NormalizeRows
