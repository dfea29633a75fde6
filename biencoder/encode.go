package biencoder

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/schollz/progressbar/v3"
)

// EncodeBatchSize is B, the number of texts an Encoder runs through its inference graph at a
// time (the last partial batch is padded with empty rows).
const EncodeBatchSize = 64

// EncodeTokens bounds a dynamic-padding batch to about this many padded tokens: rows =
// EncodeTokens / L, between 8 and EncodeBatchSize (64 rows up to L 64, 16 at L 256, 8 at 512).
// An inference graph's memory grows with rows x L: its ops share their output buffers
// (model.ShareBuffers), so it holds a few [rows*L, FFN] and [rows*L, H] activations at a time
// (MiniLM at 16 x 256: 57 MB, whatever the depth).
const EncodeTokens = 64 * 64

// closeFrom is the padded length from which a dynamic Encode closes a bucket's graph once the
// lengths fall below it.
const closeFrom = 128

// dynamicRows is the batch size of a dynamic-padding batch padded to L.
func dynamicRows(L int) int { return max(8, min(EncodeBatchSize, EncodeTokens/L)) }

// PadMultiple is the granularity of dynamic padding, in tokens: a batch is padded to its
// longest text rounded up to a multiple of PadMultiple, capped at the maximum length
// (PaddedLen). Every padded length gets its own graph, so 32 keeps the graphs few (at most 8 for
// a maximum length of 256, 16 for 512) while a row wastes fewer than 32 positions. Graphs are
// not free: each keeps the buffers its ops share between runs (see EncodeTokens). A multiple of
// 32 is also a multiple of the kernels' vector width (8) and of the matrix product's 16-column
// panels.
const PadMultiple = 32

// PaddedLen is the length dynamic padding pads a batch to whose longest text has n tokens
// ([CLS] and [SEP] included): n rounded up to a multiple of PadMultiple, at most maxLen.
func PaddedLen(n, maxLen int) int {
	return min((n+PadMultiple-1)/PadMultiple*PadMultiple, maxLen)
}

// Encoder encodes texts with one tower for inference, EncodeBatchSize texts at a time, each
// text cut to MaxLen tokens ([CLS] and [SEP] included) as tokenize.EncodeBatch cuts it. A call
// of fewer texts than a batch runs a graph of that many rows rounded up to a power of two
// (graphRows), so a lone query does not pay for 64.
//
// Without Dynamic, every text is padded to MaxLen and one B x MaxLen graph encodes them all, as
// EncodeTexts always has. With Dynamic (dynamic padding), the texts are sorted by length
// (longest first; ties keep the input order), cut into batches of B in that order, and each
// batch is padded only to PaddedLen of its longest text; a graph is built once per padded
// length and row count and cached for the Encoder's life. Padding is masked out of attention and pooling, so
// the vectors are those of fixed padding (to float32 rounding; bit for bit in the tests).
//
// Close releases the graphs. Not safe for concurrent use.
type Encoder struct {
	tower   *model.Tower
	tok     *tokenize.Tokenizer
	maxLen  int
	dynamic bool
	runners map[graphKey]*model.EncoderRunner
	used    []int // padded lengths of the last Encode
	// Progress, when set, receives a progress bar over the texts of each dynamic-padding
	// Encode, described by Name (e.g. "encode passages").
	Progress io.Writer
	Name     string
}

// NewEncoder returns an Encoder of texts with tower t, cut to maxLen tokens (at least 2: [CLS]
// and [SEP]); dynamic turns on dynamic padding. Graphs are built when first needed.
func NewEncoder(t *model.Tower, tok *tokenize.Tokenizer, maxLen int, dynamic bool) (*Encoder, error) {
	if maxLen < 2 {
		return nil, fmt.Errorf("dense: encoder: max length %d leaves no room for [CLS] and [SEP]", maxLen)
	}
	return &Encoder{tower: t, tok: tok, maxLen: maxLen, dynamic: dynamic, runners: map[graphKey]*model.EncoderRunner{}}, nil
}

// MaxLen is the length texts are cut to, in tokens.
func (e *Encoder) MaxLen() int { return e.maxLen }

// Dynamic reports whether the Encoder pads each batch to its own length.
func (e *Encoder) Dynamic() bool { return e.dynamic }

// PaddedLengths returns the padded lengths the last Encode ran graphs for, ascending. A
// dynamic Encode keeps one graph at a time (the batches come longest first; a bucket's graph is
// closed when the lengths fall below it), so that memory holds one graph's activations.
func (e *Encoder) PaddedLengths() []int {
	ls := slices.Clone(e.used)
	slices.Sort(ls)
	return ls
}

// graphKey names a cached inference graph: Rows texts of L tokens.
type graphKey struct{ Rows, L int }

// graphRows is the number of rows of the graph that encodes a call's n texts padded to L
// tokens: the full batch (EncodeBatchSize, or dynamicRows(L) with dynamic padding) when n fills
// it, else n rounded up to a power of two. A lone query thus runs a 1-row graph, not a 64-row
// one padded with 63 empty texts (318 ms a SciFact query before, on one Zen 5 core), while a
// stream of calls of varying sizes builds at most log2(full)+1 graphs per length. A text's
// vector does not depend on the rows beside it: the same bits from a graph of 1, 2, ... or 64
// rows on every kernel path (TestEncoderRowsDoNotChangeVectors).
func (e *Encoder) graphRows(n, L int) int {
	full := EncodeBatchSize
	if e.dynamic {
		full = dynamicRows(L)
	}
	rows := 1
	for rows < n && rows < full {
		rows *= 2
	}
	return min(rows, full)
}

// runner returns the cached graph for a call of n texts padded to L tokens (graphRows rows),
// building it the first time.
func (e *Encoder) runner(n, L int) (*model.EncoderRunner, error) {
	k := graphKey{Rows: e.graphRows(n, L), L: L}
	if r, ok := e.runners[k]; ok {
		return r, nil
	}
	r, err := model.NewEncoderRunner(e.tower, k.Rows, L)
	if err != nil {
		return nil, err
	}
	e.runners[k] = r
	return r, nil
}

// Encode returns the vectors of texts, len(texts) x H float32 values (H = the tower's Dim), row
// i that of texts[i]. c, when not nil, counts what truncation to MaxLen cut (the same counts
// with or without Dynamic).
func (e *Encoder) Encode(texts []string, c *tokenize.TruncCount) ([]float32, error) {
	return e.encode(len(texts), func(lo, hi int) tokenize.Batch { return e.tok.EncodeBatch(texts[lo:hi], e.maxLen) }, c)
}

// EncodeTokenized is Encode for passages tokenized beforehand: tokens[i] is Tokenizer.Encode
// of text i (before [CLS], [SEP] and truncation), as a tokenized passage store
// (tokenize/tokstore) keeps it. It returns Encode's vectors for those texts, bit for bit, and
// the same truncation counts.
func (e *Encoder) EncodeTokenized(tokens [][]int, c *tokenize.TruncCount) ([]float32, error) {
	return e.encode(len(tokens), func(lo, hi int) tokenize.Batch { return e.tok.BatchOf(tokens[lo:hi], e.maxLen) }, c)
}

// encode encodes n texts, batch(lo, hi) giving rows lo..hi-1 as EncodeBatch pads them to MaxLen.
func (e *Encoder) encode(n int, batch func(lo, hi int) tokenize.Batch, c *tokenize.TruncCount) ([]float32, error) {
	e.used = e.used[:0]
	if !e.dynamic {
		e.used = append(e.used, e.maxLen)
		r, err := e.runner(n, e.maxLen)
		if err != nil {
			return nil, err
		}
		b := c.Add(batch(0, n))
		return r.Encode(b.IDs, b.Mask, b.Types, n)
	}
	return e.encodeDynamic(n, batch, c)
}

// encodeDynamic is encode with dynamic padding.
func (e *Encoder) encodeDynamic(n int, batch func(lo, hi int) tokenize.Batch, c *tokenize.TruncCount) ([]float32, error) {
	// Each text as EncodeBatch encodes it (cut, [CLS] ... [SEP]), kept without its padding (the
	// mask is 1 exactly there), types alike.
	ids, types := make([][]int, n), make([][]int, n)
	for i := range n {
		b := c.Add(batch(i, i+1))
		n := 0
		for n < b.L && b.Mask[n] != 0 {
			n++
		}
		ids[i], types[i] = b.IDs[:n], b.Types[:n]
	}
	return e.encodeSeqs(ids, types)
}

// DynamicBatch is one batch of a dynamic-padding Encode: the texts Rows (indices into the
// input, longest first) padded to L tokens.
type DynamicBatch struct {
	L    int   `json:"L"`
	Rows []int `json:"rows"`
}

// DynamicBatches is the plan of a dynamic-padding Encode of texts of these lengths in tokens
// ([CLS] and [SEP] included, at most maxLen): the texts sorted by length, longest first (ties
// keep the input order), cut into batches of dynamicRows(L) rows, each padded to PaddedLen of
// its longest text. Another toolkit timed against this one (package bench) runs the same plan.
func DynamicBatches(lengths []int, maxLen int) []DynamicBatch {
	order := make([]int, len(lengths))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(lengths[b], lengths[a]) })
	var plan []DynamicBatch
	for lo := 0; lo < len(order); {
		L := PaddedLen(lengths[order[lo]], maxLen) // the longest comes first
		rows := order[lo:min(lo+dynamicRows(L), len(order))]
		lo += len(rows)
		plan = append(plan, DynamicBatch{L: L, Rows: rows})
	}
	return plan
}

// EncodeIDs is Encode of texts already tokenized: seqs[i] is text i's token ids as EncodeBatch
// writes them before padding ([CLS] ... [SEP], at most MaxLen), all of segment 0. With Dynamic
// the batches are those of DynamicBatches; without, every text is padded to MaxLen.
func (e *Encoder) EncodeIDs(seqs [][]int) ([]float32, error) {
	e.used = e.used[:0]
	types := make([][]int, len(seqs))
	for i, s := range seqs {
		if len(s) > e.maxLen {
			return nil, fmt.Errorf("dense: encoder: text %d has %d tokens, more than the maximum length %d", i, len(s), e.maxLen)
		}
		types[i] = make([]int, len(s))
	}
	if e.dynamic {
		return e.encodeSeqs(seqs, types)
	}
	e.used = append(e.used, e.maxLen)
	r, err := e.runner(len(seqs), e.maxLen)
	if err != nil {
		return nil, err
	}
	bIDs, bTypes, bMask := e.pad(seqs, types, nil, e.maxLen)
	return r.Encode(bIDs, bMask, bTypes, len(seqs))
}

// pad lays out rows (all of ids when nil) as a len(rows) x L batch, padding with the
// tokenizer's [PAD] (0 without a tokenizer, as BERT's vocabulary has it) under a zero mask.
func (e *Encoder) pad(ids, types [][]int, rows []int, L int) ([]int, []int, []float32) {
	if rows == nil {
		rows = make([]int, len(ids))
		for i := range rows {
			rows[i] = i
		}
	}
	pad := 0
	if e.tok != nil {
		pad = e.tok.PadID()
	}
	bIDs, bTypes, bMask := make([]int, len(rows)*L), make([]int, len(rows)*L), make([]float32, len(rows)*L)
	for k, i := range rows {
		row := bIDs[k*L : (k+1)*L]
		n := copy(row, ids[i])
		for j := n; j < L; j++ {
			row[j] = pad
		}
		copy(bTypes[k*L:], types[i][:n])
		for j := range n {
			bMask[k*L+j] = 1
		}
	}
	return bIDs, bTypes, bMask
}

// encodeSeqs encodes unpadded sequences with dynamic padding (DynamicBatches).
func (e *Encoder) encodeSeqs(ids, types [][]int) ([]float32, error) {
	lengths := make([]int, len(ids))
	for i, s := range ids {
		lengths[i] = len(s)
	}
	h := e.tower.Dim()
	out := make([]float32, len(ids)*h)
	var bar *progressbar.ProgressBar
	if e.Progress != nil {
		name := e.Name
		if name == "" {
			name = "encode"
		}
		bar = progressbar.NewOptions(len(ids), progressbar.OptionSetWriter(e.Progress),
			progressbar.OptionSetDescription(name), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("texts"), progressbar.OptionSetWidth(24),
			progressbar.OptionThrottle(500*time.Millisecond), progressbar.OptionOnCompletion(func() { fmt.Fprintln(e.Progress) }))
		defer bar.Finish()
	}
	done := 0
	for _, batch := range DynamicBatches(lengths, e.maxLen) {
		L, rows := batch.L, batch.Rows
		done += len(rows)
		// Lengths only fall from here, so the graphs of longer buckets are done with: close
		// the large ones, keeping one large graph's buffers in memory. Small graphs stay
		// cached between calls: building graphs again
		// and again is what costs memory (a query encoder rebuilding its 32 and 64 graphs on
		// every other call grew to 10 GB in 100 calls).
		for k, old := range e.runners {
			if k.L > L && k.L >= closeFrom {
				old.Close()
				delete(e.runners, k)
			}
		}
		r, err := e.runner(len(rows), L)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(e.used, L) {
			e.used = append(e.used, L)
		}
		bIDs, bTypes, bMask := e.pad(ids, types, rows, L)
		v, err := r.Encode(bIDs, bMask, bTypes, len(rows))
		if err != nil {
			return nil, fmt.Errorf("texts %d..%d of the length order: %w", done-len(rows), done-1, err)
		}
		for k, i := range rows {
			copy(out[i*h:(i+1)*h], v[k*h:(k+1)*h])
		}
		if bar != nil {
			_ = bar.Add(len(rows))
		}
	}
	return out, nil
}

// Close releases the Encoder's graphs; it can be used again afterwards (graphs are rebuilt).
func (e *Encoder) Close() error {
	var first error
	for k, r := range e.runners {
		if err := r.Close(); err != nil && first == nil {
			first = err
		}
		delete(e.runners, k)
	}
	return first
}

// EncodeTexts encodes texts with one tower, EncodeBatchSize at a time, each padded to L tokens,
// and returns len(texts) x H values. c, when not nil, counts what truncation to L cut. It is an
// Encoder without dynamic padding, used once.
func EncodeTexts(t *model.Tower, tok *tokenize.Tokenizer, texts []string, L int, c *tokenize.TruncCount) ([]float32, error) {
	e, err := NewEncoder(t, tok, L, false)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	return e.Encode(texts, c)
}
