package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// BM25Params configures a BM25 index.
type BM25Params struct {
	// K1 saturates term frequency (>= 0); B scales length normalisation (0..1).
	K1, B float64
	// ExactLengths scores with exact document lengths in float64 (the textbook formula).
	// The zero value, false, reproduces Lucene 4.10: lengths go through the lossy one-byte
	// norm and the arithmetic is float32, as BM25Similarity does.
	ExactLengths bool
	// Analyzer turns passages and queries into terms; nil means EnglishAnalyzer().
	Analyzer *Analyzer
}

// DefaultBM25Params are Lucene's defaults: k1 = 1.2, b = 0.75, Lucene norms, English analysis.
func DefaultBM25Params() BM25Params {
	return BM25Params{K1: 1.2, B: 0.75}
}

// Postings are stored compressed, every term's list concatenated in one byte slice: for each
// passage d holding the term, in ascending order, uvarint(Δ<<1 | one) where Δ = d minus the
// previous passage of the list (the first counts from 0) and one = 1 when tf(t, d) = 1,
// followed by uvarint(tf) when tf > 1. Most postings take one or two bytes instead of eight.

// BM25 is an in-memory inverted index scored with Okapi BM25 as Lucene 4.10's
// BM25Similarity computes it (Robertson and Zaragoza, "The Probabilistic Relevance Framework:
// BM25 and Beyond", 2009):
//
//	score(q, d) = sum over query terms t of idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 - b + b·dl(d)/avgdl))
//	idf(t)      = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))
//
// with N the number of passages, n(t) the number holding t, dl(d) the number of terms of d
// after analysis (stop words excluded) and avgdl the mean of dl. A query is the OR of its
// analyzed terms, each with boost 1, so a term repeated in the query counts twice. With Lucene
// norms, dl(d) is replaced by 1/f² where f = byte315ToFloat(floatToByte315(1/sqrt(dl(d)))),
// which keeps 3 significant bits of 1/sqrt(dl): lengths 10, 40 and 100 count as 10.24, 40.96
// and 113.78.
//
// The postings are delta- and varint-compressed in one byte slice (about 1.5 bytes a posting);
// memory is that, the term table, the ids and 16 bytes a passage, plus 9 bytes a passage for
// each search in flight (accumulators kept in a pool between searches).
//
// A BM25 is read-only after NewBM25 and safe for concurrent searches.
type BM25 struct {
	ids      []string
	params   BM25Params
	analyzer *Analyzer
	terms    map[string]int32 // term -> row of postings
	post     []byte           // postings of every row, compressed (see above), docs ascending
	postOff  []uint64         // row r's postings are post[postOff[r]:postOff[r+1]]
	df       []int32          // df[r] = passages holding the term of row r
	docLen   []int32          // terms per passage after analysis
	idRank   []int32          // idRank[d] = position of ids[d] in ascending id order
	byRank   []int32          // byRank[r] = passage whose id comes r-th in ascending order
	avgdl    float64          // exact mean of docLen

	// Lucene mode: lenNorm[d] = k1·(1 - b + b·decodedLength(d)/avgdl) in float32.
	lenNorm32 []float32
	// Exact mode: lenNorm[d] = k1·(1 - b + b·dl(d)/avgdl) in float64.
	lenNorm64 []float64

	scratch sync.Pool // of *scratch, one per search in flight
}

// NewBM25 indexes texts[i] under ids[i]. It panics when the slices differ in length, an id is
// repeated or empty, or K1 < 0 or B is outside [0, 1]: those are programming errors, not data
// errors (data errors are caught when the corpus is read). To index a corpus without holding
// its texts, add them one by one to a BM25Builder: the index is the same.
func NewBM25(ids, texts []string, p BM25Params) *BM25 {
	if len(ids) != len(texts) {
		panic(fmt.Sprintf("index: NewBM25: %d ids but %d texts", len(ids), len(texts)))
	}
	checkParams("NewBM25", p)
	checkIDs("NewBM25", ids)
	b := NewBM25Builder(p)
	b.ids = make([]string, 0, len(ids))
	b.docLen = make([]int32, 0, len(ids))
	for d, text := range texts {
		b.Add(ids[d], text)
	}
	return b.Build()
}

func checkParams(fn string, p BM25Params) {
	if p.K1 < 0 || math.IsNaN(p.K1) || !(p.B >= 0 && p.B <= 1) {
		panic(fmt.Sprintf("index: %s: k1 = %v must be >= 0 and b = %v in [0, 1]", fn, p.K1, p.B))
	}
}

// BM25Builder indexes passages one at a time, so that a corpus can be streamed into a BM25
// without its texts in memory: NewBM25Builder, Add for every passage in order, then Build.
// While building it holds the ids, the compressed postings (with up to 2× growth slack) and
// the term table. A builder is not safe for concurrent use.
type BM25Builder struct {
	params   BM25Params
	analyzer *Analyzer
	ids      []string
	docLen   []int32
	terms    map[string]int32
	rows     [][]byte // compressed postings per row
	last     []int32  // last passage added to each row
	df       []int32
	total    int64
	tf       map[string]int32
	stems    map[string]string
	built    bool
}

// NewBM25Builder returns an empty builder. It panics when K1 < 0 or B is outside [0, 1].
func NewBM25Builder(p BM25Params) *BM25Builder {
	checkParams("NewBM25Builder", p)
	a := p.Analyzer
	if a == nil {
		a = EnglishAnalyzer()
	}
	return &BM25Builder{
		params: p, analyzer: a, terms: make(map[string]int32),
		tf: make(map[string]int32), stems: make(map[string]string),
	}
}

// Len returns the number of passages added.
func (b *BM25Builder) Len() int { return len(b.ids) }

// Add indexes text as the next passage, under id. It panics when id is empty or Build was
// called; a repeated id panics in Build.
func (b *BM25Builder) Add(id, text string) {
	if b.built {
		panic("index: BM25Builder.Add after Build")
	}
	if id == "" {
		panic(fmt.Sprintf("index: BM25Builder.Add: empty id at position %d", len(b.ids)))
	}
	d := int32(len(b.ids))
	clear(b.tf)
	terms := b.analyzer.analyze(text, b.stems)
	for _, t := range terms {
		b.tf[t]++
	}
	// Insert in first-occurrence order so the term table does not depend on map order.
	for _, t := range terms {
		n, ok := b.tf[t]
		if !ok {
			continue
		}
		delete(b.tf, t)
		row, seen := b.terms[t]
		if !seen {
			row = int32(len(b.rows))
			b.terms[t] = row
			b.rows = append(b.rows, nil)
			b.last = append(b.last, 0)
			b.df = append(b.df, 0)
		}
		b.rows[row] = appendPosting(b.rows[row], d-b.last[row], n)
		b.last[row] = d
		b.df[row]++
	}
	b.ids = append(b.ids, id)
	b.docLen = append(b.docLen, int32(len(terms)))
	b.total += int64(len(terms))
}

// appendPosting appends one compressed posting: the gap to the previous passage and the tf.
func appendPosting(buf []byte, gap, tf int32) []byte {
	if tf == 1 {
		return binary.AppendUvarint(buf, uint64(gap)<<1|1)
	}
	buf = binary.AppendUvarint(buf, uint64(gap)<<1)
	return binary.AppendUvarint(buf, uint64(tf))
}

// nextPosting decodes the posting at the start of buf following passage prev, and returns the
// passage, its tf and the rest of buf.
func nextPosting(buf []byte, prev int32) (doc, tf int32, rest []byte) {
	v, n := binary.Uvarint(buf)
	doc, buf = prev+int32(v>>1), buf[n:]
	if v&1 == 1 {
		return doc, 1, buf
	}
	f, n := binary.Uvarint(buf)
	return doc, int32(f), buf[n:]
}

// Build returns the index of the passages added. It panics when an id was added twice, or
// when called twice.
func (b *BM25Builder) Build() *BM25 {
	if b.built {
		panic("index: BM25Builder.Build called twice")
	}
	b.built = true
	ids := b.ids
	x := &BM25{
		ids:      ids,
		params:   b.params,
		analyzer: b.analyzer,
		terms:    b.terms,
		df:       b.df,
		docLen:   b.docLen,
	}
	var size uint64
	for _, r := range b.rows {
		size += uint64(len(r))
	}
	x.post = make([]byte, 0, size)
	x.postOff = make([]uint64, len(b.rows)+1)
	for i, r := range b.rows {
		x.post = append(x.post, r...)
		x.postOff[i+1] = uint64(len(x.post))
		b.rows[i] = nil // free as we go
	}
	b.rows, b.last, b.tf, b.stems = nil, nil, nil, nil
	if len(ids) > 0 {
		x.avgdl = float64(b.total) / float64(len(ids))
	}
	x.computeNorms(b.total)
	order := make([]int32, len(ids))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return strings.Compare(ids[a], ids[b]) })
	for r := 1; r < len(order); r++ {
		if ids[order[r]] == ids[order[r-1]] {
			panic(fmt.Sprintf("index: BM25Builder.Build: id %q repeated (positions %d and %d)",
				ids[order[r]], order[r-1], order[r]))
		}
	}
	x.byRank = order
	x.idRank = make([]int32, len(ids))
	for r, d := range order {
		x.idRank[d] = int32(r)
	}
	return x
}

func checkIDs(fn string, ids []string) {
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if id == "" {
			panic(fmt.Sprintf("index: %s: empty id at position %d", fn, i))
		}
		if seen[id] {
			panic(fmt.Sprintf("index: %s: id %q repeated (position %d)", fn, id, i))
		}
		seen[id] = true
	}
}

// computeNorms precomputes the length part of the BM25 denominator for every passage.
func (x *BM25) computeNorms(total int64) {
	n := len(x.ids)
	k1, b := x.params.K1, x.params.B
	if x.params.ExactLengths {
		x.lenNorm64 = make([]float64, n)
		for d, dl := range x.docLen {
			x.lenNorm64[d] = k1 * (1 - b + b*float64(dl)/x.avgdl)
		}
		return
	}
	// BM25Similarity.avgFieldLength: (float) (sumTotalTermFreq / (double) maxDoc), 1 if empty.
	avgdl := float32(1)
	if total > 0 {
		avgdl = float32(float64(total) / float64(n))
	}
	k1f, bf := float32(k1), float32(b)
	var cache [256]float32 // BM25Similarity's per-query cache, indexed by norm byte
	for i := range cache {
		bDL := float32(bf * luceneDecodeLength(byte(i)))
		cache[i] = k1f * float32(float32(1-bf)+float32(bDL/avgdl))
	}
	x.lenNorm32 = make([]float32, n)
	for d, dl := range x.docLen {
		x.lenNorm32[d] = cache[luceneEncodeLength(int(dl))]
	}
}

// luceneEncodeLength is BM25Similarity.encodeNormValue(boost 1, length):
// SmallFloat.floatToByte315(1 / (float) Math.sqrt(length)).
func luceneEncodeLength(length int) byte {
	return floatToByte315(float32(1) / float32(math.Sqrt(float64(length))))
}

// luceneDecodeLength is BM25Similarity.decodeNormValue: 1 / (f·f) for f = byte315ToFloat(b).
func luceneDecodeLength(b byte) float32 {
	f := byte315ToFloat(b)
	return 1 / float32(f*f)
}

// floatToByte315 is Lucene's SmallFloat.floatToByte315: a float in one byte with 3 mantissa
// bits and zero exponent point 15, rounding down; values too small give 0 (or 1 for tiny
// positives), values too large give 255.
func floatToByte315(f float32) byte {
	bits := int32(math.Float32bits(f))
	small := bits >> (24 - 3)
	if small <= (63-15)<<3 {
		if bits <= 0 {
			return 0
		}
		return 1
	}
	if small >= (63-15)<<3+0x100 {
		return 255
	}
	return byte(small - (63-15)<<3)
}

// byte315ToFloat is Lucene's SmallFloat.byte315ToFloat, the inverse of floatToByte315.
func byte315ToFloat(b byte) float32 {
	if b == 0 {
		return 0
	}
	bits := uint32(b) << (24 - 3)
	bits += (63 - 15) << 24
	return math.Float32frombits(bits)
}

// Len returns the number of indexed passages.
func (x *BM25) Len() int { return len(x.ids) }

// DocID returns the id of passage i (0-based, in NewBM25's order).
func (x *BM25) DocID(i int) string { return x.ids[i] }

// DocLen returns the number of terms passage i has after analysis.
func (x *BM25) DocLen(i int) int { return int(x.docLen[i]) }

// AvgDocLen returns the exact mean passage length in terms (Lucene rounds it to float32).
func (x *BM25) AvgDocLen() float64 { return x.avgdl }

// DocFreq returns the number of passages holding the analyzed term t.
func (x *BM25) DocFreq(t string) int {
	row, ok := x.terms[t]
	if !ok {
		return 0
	}
	return int(x.df[row])
}

// Analyzer returns the analyzer used for passages and queries.
func (x *BM25) Analyzer() *Analyzer { return x.analyzer }

// IDF returns Lucene's idf for a term held by n of the N passages:
// ln(1 + (N - n + 0.5) / (n + 0.5)).
func IDF(N, n int) float64 {
	return math.Log(1 + (float64(N)-float64(n)+0.5)/(float64(n)+0.5))
}

// Search analyzes query and returns the k best passages with a positive score (fewer when
// fewer match; none when k < 1).
func (x *BM25) Search(query string, k int) []Hit {
	return x.SearchTerms(x.analyzer.Analyze(query), k)
}

// SearchTerms scores already analyzed query terms (a repeated term counts once per
// occurrence) and returns the k best passages with a positive score.
//
// In Lucene mode each term's contribution is computed in float32 as BM25DocScorer.score does,
// summed in float64 and rounded to float32, as BooleanScorer's buckets do; on Cranfield and
// CISI every score of the reference Lucene 4.10 runs is reproduced bit for bit.
func (x *BM25) SearchTerms(terms []string, k int) []Hit {
	if k < 1 {
		return nil
	}
	sc := x.getScratch()
	defer x.putScratch(sc)
	acc := sc.acc
	if x.params.ExactLengths {
		for _, t := range terms {
			row, ok := x.terms[t]
			if !ok {
				continue
			}
			w := IDF(len(x.ids), int(x.df[row])) * (x.params.K1 + 1)
			buf, doc := x.postings(row), int32(0)
			for range x.df[row] {
				var n int32
				doc, n, buf = nextPosting(buf, doc)
				sc.touch(doc)
				tf := float64(n)
				acc[doc] += w * tf / (tf + x.lenNorm64[doc])
			}
		}
		return x.top(sc.touched, func(d int32) float64 { return acc[d] }, k)
	}
	for _, t := range terms {
		row, ok := x.terms[t]
		if !ok {
			continue
		}
		w := x.weight32(int(x.df[row]))
		buf, doc := x.postings(row), int32(0)
		for range x.df[row] {
			var n int32
			doc, n, buf = nextPosting(buf, doc)
			sc.touch(doc)
			acc[doc] += float64(score32(w, n, x.lenNorm32[doc]))
		}
	}
	touched := sc.touched
	// Positive float32 scores order like their bits: one uint64 key per passage, (inverted score
	// bits, id rank), sorts score descending then id ascending without a comparison function.
	keys := make([]uint64, 0, len(touched))
	for _, d := range touched {
		if s := float32(acc[d]); s > 0 {
			keys = append(keys, uint64(^math.Float32bits(s))<<32|uint64(x.idRank[d]))
		}
	}
	slices.Sort(keys)
	keys = keys[:min(k, len(keys))]
	hits := make([]Hit, len(keys))
	for i, key := range keys {
		hits[i] = Hit{
			DocID: x.ids[x.byRank[uint32(key)]],
			Score: float64(math.Float32frombits(^uint32(key >> 32))),
		}
	}
	return hits
}

// scratch is one search's accumulators, kept between searches (sync.Pool) so that a search
// costs the passages it touches rather than zeroing N of each.
type scratch struct {
	acc     []float64 // score per passage; 0 outside touched
	seen    []bool    // false outside touched
	touched []int32   // passages with a posting, in first-touch order
}

// touch records that passage d has a posting.
func (sc *scratch) touch(d int32) {
	if !sc.seen[d] {
		sc.seen[d] = true
		sc.touched = append(sc.touched, d)
	}
}

func (x *BM25) getScratch() *scratch {
	if sc, ok := x.scratch.Get().(*scratch); ok {
		return sc
	}
	return &scratch{acc: make([]float64, len(x.ids)), seen: make([]bool, len(x.ids))}
}

// putScratch clears what the search touched and returns sc to the pool.
func (x *BM25) putScratch(sc *scratch) {
	for _, d := range sc.touched {
		sc.acc[d], sc.seen[d] = 0, false
	}
	sc.touched = sc.touched[:0]
	x.scratch.Put(sc)
}

// postings returns the compressed postings of a term row.
func (x *BM25) postings(row int32) []byte { return x.post[x.postOff[row]:x.postOff[row+1]] }

// weight32 is BM25DocScorer.weightValue = idf · boost · (k1 + 1) in float32, boost 1.
func (x *BM25) weight32(df int) float32 {
	idf := float32(IDF(len(x.ids), df))
	return idf * float32(float32(x.params.K1)+1)
}

// score32 is BM25DocScorer.score: weightValue · freq / (freq + norm), in float32.
func score32(w float32, tf int32, norm float32) float32 {
	f := float32(tf)
	return float32(w*f) / float32(f+norm)
}

// top sorts the touched passages by score and keeps the k best with a positive score (exact
// mode). Ties compare precomputed id ranks rather than strings.
func (x *BM25) top(touched []int32, score func(int32) float64, k int) []Hit {
	type cand struct {
		score float64
		rank  int32 // position of the id in ascending order
		doc   int32
	}
	cands := make([]cand, 0, len(touched))
	for _, d := range touched {
		if s := score(d); s > 0 {
			cands = append(cands, cand{s, x.idRank[d], d})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return int(a.rank - b.rank)
	})
	cands = cands[:min(k, len(cands))]
	hits := make([]Hit, len(cands))
	for i, c := range cands {
		hits[i] = Hit{DocID: x.ids[c.doc], Score: c.score}
	}
	return hits
}

// Score returns the BM25 score of passage doc (0-based index) for query, 0 when no query term
// occurs in it. It equals the Score Search reports for that passage. It decodes each query
// term's postings up to doc: O(df) a term.
func (x *BM25) Score(query string, doc int) float64 {
	if doc < 0 || doc >= len(x.ids) {
		panic(fmt.Sprintf("index: BM25.Score: passage %d out of range [0, %d)", doc, len(x.ids)))
	}
	var s float64
	for _, t := range x.analyzer.Analyze(query) {
		row, ok := x.terms[t]
		if !ok {
			continue
		}
		df := int(x.df[row])
		buf, d, tf := x.postings(row), int32(0), int32(0)
		for range df {
			if d, tf, buf = nextPosting(buf, d); d >= int32(doc) {
				break
			}
		}
		if d != int32(doc) || tf == 0 {
			continue
		}
		if x.params.ExactLengths {
			w := IDF(len(x.ids), df) * (x.params.K1 + 1)
			f := float64(tf)
			s += w * f / (f + x.lenNorm64[doc])
		} else {
			s += float64(score32(x.weight32(df), tf, x.lenNorm32[doc]))
		}
	}
	if x.params.ExactLengths {
		return s
	}
	return float64(float32(s))
}

// SortHits sorts hits by Score descending, ties by DocID ascending; NaN scores go last.
func SortHits(hits []Hit) {
	slices.SortFunc(hits, compareHits)
}

// compareHits orders a before b (negative) when a scores higher, or scores the same and has
// the smaller DocID. NaN scores sort after every number.
func compareHits(a, b Hit) int {
	an, bn := math.IsNaN(a.Score), math.IsNaN(b.Score)
	switch {
	case an && !bn:
		return 1
	case bn && !an:
		return -1
	case !an && a.Score > b.Score:
		return -1
	case !an && a.Score < b.Score:
		return 1
	}
	switch {
	case a.DocID < b.DocID:
		return -1
	case a.DocID > b.DocID:
		return 1
	}
	return 0
}
