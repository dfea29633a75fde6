package tokenize

import "fmt"

// Batch is B encoded rows padded to the same length L, row-major.
type Batch struct {
	B, L      int       // batch size, padded length (= maxLen given to EncodeBatch, so shapes are fixed)
	IDs       []int     // B*L token ids, row-major, padded with the [PAD] id
	Mask      []float32 // B*L, 1 for real tokens, 0 for padding
	Types     []int     // B*L segment ids (0 for single texts)
	Truncated int       // how many texts (pairs) were cut to fit L tokens
	// Tokens counts the texts' tokens before truncation and Dropped those cut off ([CLS],
	// [SEP] and padding not counted): Dropped/Tokens is the share of the text lost to L.
	Tokens, Dropped int
}

// Row returns the ids of row i (a slice of IDs, length L).
func (b Batch) Row(i int) []int { return b.IDs[i*b.L : (i+1)*b.L] }

func newBatch(rows, maxLen, padID int) Batch {
	b := Batch{
		B:     rows,
		L:     maxLen,
		IDs:   make([]int, rows*maxLen),
		Mask:  make([]float32, rows*maxLen),
		Types: make([]int, rows*maxLen),
	}
	if padID != 0 {
		for i := range b.IDs {
			b.IDs[i] = padID
		}
	}
	return b
}

// EncodeBatch encodes each text as [CLS] tokens [SEP] into a B×L batch with
// B = len(texts) and L = maxLen. A text longer than maxLen-2 tokens keeps its
// first maxLen-2 tokens and still ends with [SEP]; Truncated counts those
// texts. Shorter rows are padded with [PAD] (mask 0). Types are all 0.
// It panics if maxLen < 2.
func (t *Tokenizer) EncodeBatch(texts []string, maxLen int) Batch {
	if maxLen < 2 {
		panic(fmt.Sprintf("tokenize: EncodeBatch: maxLen %d < 2 leaves no room for [CLS] and [SEP]", maxLen))
	}
	b := newBatch(len(texts), maxLen, t.padID)
	for i, text := range texts {
		t.setRow(&b, i, t.Encode(text))
	}
	return b
}

// BatchOf builds the B×L batch (B = len(tokens), L = maxLen) that EncodeBatch builds from
// texts whose Encode are tokens[i]: token ids as Encode returns them, before [CLS], [SEP] and
// truncation, as a tokenized passage store (package tokstore) keeps them. BatchOf(ids, L)
// with ids[i] = Encode(texts[i]) equals EncodeBatch(texts, L), field for field. It panics if
// maxLen < 2.
func (t *Tokenizer) BatchOf(tokens [][]int, maxLen int) Batch {
	if maxLen < 2 {
		panic(fmt.Sprintf("tokenize: BatchOf: maxLen %d < 2 leaves no room for [CLS] and [SEP]", maxLen))
	}
	b := newBatch(len(tokens), maxLen, t.padID)
	for i, ids := range tokens {
		t.setRow(&b, i, ids)
	}
	return b
}

// setRow writes [CLS] ids [SEP] into row i of b, truncating ids to L-2 tokens.
func (t *Tokenizer) setRow(b *Batch, i int, ids []int) {
	maxLen := b.L
	b.Tokens += len(ids)
	if len(ids) > maxLen-2 {
		b.Dropped += len(ids) - (maxLen - 2)
		ids = ids[:maxLen-2]
		b.Truncated++
	}
	row := b.IDs[i*maxLen : (i+1)*maxLen]
	mask := b.Mask[i*maxLen : (i+1)*maxLen]
	row[0] = t.clsID
	copy(row[1:], ids)
	row[len(ids)+1] = t.sepID
	for j := 0; j < len(ids)+2; j++ {
		mask[j] = 1
	}
}

// EncodePairBatch encodes each (query, passage) pair as
// [CLS] query [SEP] passage [SEP] into a B×L batch, B = len(queries),
// L = maxLen, as a cross-encoder reads it: Types are 0 over [CLS] query [SEP]
// and 1 over passage [SEP], and 0 on padding.
//
// Truncation keeps the query whole and cuts the passage to the
// maxLen-3-len(query) tokens left. Only a query longer than maxLen-3 tokens
// is cut too (to maxLen-3), and its passage is then dropped entirely.
// Truncated counts the pairs where anything was cut; Tokens and Dropped count query and
// passage tokens together.
// It panics if len(passages) != len(queries) or maxLen < 3.
func (t *Tokenizer) EncodePairBatch(queries, passages []string, maxLen int) Batch {
	if len(queries) != len(passages) {
		panic(fmt.Sprintf("tokenize: EncodePairBatch: %d queries but %d passages", len(queries), len(passages)))
	}
	if maxLen < 3 {
		panic(fmt.Sprintf("tokenize: EncodePairBatch: maxLen %d < 3 leaves no room for [CLS] and two [SEP]", maxLen))
	}
	b := newBatch(len(queries), maxLen, t.padID)
	budget := maxLen - 3
	for i := range queries {
		q, p := t.Encode(queries[i]), t.Encode(passages[i])
		b.Tokens += len(q) + len(p)
		cut := false
		if len(q) > budget {
			b.Dropped += len(q) - budget
			q = q[:budget]
			cut = true
		}
		if room := budget - len(q); len(p) > room {
			b.Dropped += len(p) - room
			p = p[:room]
			cut = true
		}
		if cut {
			b.Truncated++
		}
		row := b.IDs[i*maxLen : (i+1)*maxLen]
		mask := b.Mask[i*maxLen : (i+1)*maxLen]
		types := b.Types[i*maxLen : (i+1)*maxLen]
		row[0] = t.clsID
		copy(row[1:], q)
		row[len(q)+1] = t.sepID
		second := len(q) + 2
		copy(row[second:], p)
		row[second+len(p)] = t.sepID
		n := second + len(p) + 1
		for j := 0; j < n; j++ {
			mask[j] = 1
		}
		for j := second; j < n; j++ {
			types[j] = 1
		}
	}
	return b
}
