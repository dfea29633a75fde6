package tokenize

import (
	"container/heap"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// TrainOptions configures Train.
type TrainOptions struct {
	// VocabSize is the target V, special tokens and characters included.
	// Merging stops when it is reached. It must be at least the 5 special
	// tokens plus every character form (initial c and continuing ##c) seen in
	// the texts.
	VocabSize int
	// MinFrequency is the least number of occurrences (over all words, counted
	// with their frequency) a pair needs to be merged; 0 and 1 both mean any.
	MinFrequency int
	// Lowercase lowercases and strips accents, as bert-base-uncased does.
	Lowercase bool
}

// Train learns a WordPiece vocabulary from texts the way Hugging Face's
// WordPieceTrainer does (a BPE trainer with continuing-subword prefix "##",
// whose merged tokens become the WordPiece vocabulary; Sennrich et al. 2016,
// "Neural Machine Translation of Rare Words with Subword Units").
//
// Ids: [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4; then every character
// that starts a word, by code point; then "##c" for every character seen
// inside a word, by code point; then merged tokens in merge order. Each step
// merges the most frequent adjacent pair (ties: the pair of lower ids), the
// new token being left + right without right's "##". Words are counted after
// the BERT normalisation and pre-tokenisation the tokenizer itself uses, so
// training and encoding agree; special tokens written in the texts are not
// counted. The result depends only on texts and opts:
// the same input gives the same vocabulary, byte for byte. Train prints
// nothing.
func Train(texts []string, opts TrainOptions) (*Tokenizer, error) {
	return TrainSeq(slices.Values(texts), opts)
}

// TrainSeq is Train over a sequence of texts, read once and not kept (a corpus streamed from
// disk): only the word counts are held. The same texts give Train's vocabulary, byte for byte.
func TrainSeq(texts iter.Seq[string], opts TrainOptions) (*Tokenizer, error) {
	specials := []string{padToken, unkToken, clsToken, sepToken, maskToken}
	if opts.VocabSize <= len(specials) {
		return nil, fmt.Errorf("tokenize: Train: VocabSize %d must exceed the %d special tokens", opts.VocabSize, len(specials))
	}
	if opts.MinFrequency < 0 {
		return nil, fmt.Errorf("tokenize: Train: MinFrequency %d is negative", opts.MinFrequency)
	}
	t := &Tokenizer{
		prefix:   "##",
		unk:      unkToken,
		maxChars: 100,
		cleanup:  true,
		norm:     bertNormalizer{cleanText: true, chineseChars: true, lowercase: opts.Lowercase},
		tokens:   slices.Clone(specials),
		padID:    0, unkID: 1, clsID: 2, sepID: 3, maskID: 4,
	}
	t.buildIndex()
	for id, tok := range specials {
		t.added = append(t.added, addedToken{content: tok, id: id, special: true})
	}
	t.indexAdded()

	counts := map[string]int{}
	for text := range texts {
		t.words(text, func(w string) { counts[strings.Clone(w)]++ }, func(int) {})
	}
	if len(counts) == 0 {
		return nil, errors.New("tokenize: Train: the texts hold no words")
	}
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	sort.Strings(words)

	// The alphabet: initial and continuing forms of every character.
	initial, inner := map[rune]bool{}, map[rune]bool{}
	for _, w := range words {
		for i, r := range w {
			if i == 0 {
				initial[r] = true
			} else {
				inner[r] = true
			}
		}
	}
	for _, r := range sortedRunes(initial) {
		t.addTrained(string(r))
	}
	for _, r := range sortedRunes(inner) {
		t.addTrained(t.prefix + string(r))
	}
	if len(t.tokens) > opts.VocabSize {
		return nil, fmt.Errorf("tokenize: Train: VocabSize %d is below the %d special and character tokens the texts need", opts.VocabSize, len(t.tokens))
	}

	bpe := newMerger(t, words, counts)
	minFreq := max(opts.MinFrequency, 1)
	for len(t.tokens) < opts.VocabSize && bpe.queue.Len() > 0 {
		top := heap.Pop(&bpe.queue).(pairCount)
		cur := bpe.count[top.pair]
		if cur != top.count {
			if cur > 0 {
				heap.Push(&bpe.queue, pairCount{pair: top.pair, count: cur})
			}
			continue
		}
		if cur < minFreq {
			break
		}
		a, b := top.pair.split()
		merged := t.tokens[a] + strings.TrimPrefix(t.tokens[b], t.prefix)
		id, ok := t.vocab[merged]
		if !ok {
			id = t.addTrained(merged)
		}
		bpe.merge(top.pair, int32(id))
	}
	t.buildIndex()
	return t, nil
}

// addTrained appends a token during training (vocab only; cont is built at
// the end).
func (t *Tokenizer) addTrained(tok string) int {
	id := len(t.tokens)
	t.tokens = append(t.tokens, tok)
	t.vocab[tok] = id
	return id
}

func sortedRunes(set map[rune]bool) []rune {
	rs := make([]rune, 0, len(set))
	for r := range set {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	return rs
}

// pair is two adjacent symbol ids, left in the high 32 bits, so that
// ordering pairs as integers orders them by (left, right).
type pair uint64

func makePair(a, b int32) pair     { return pair(uint64(uint32(a))<<32 | uint64(uint32(b))) }
func (p pair) split() (a, b int32) { return int32(uint32(p >> 32)), int32(uint32(p)) }

type pairCount struct {
	pair  pair
	count int
}

// pairQueue is a max-heap on count, ties to the lower pair.
type pairQueue []pairCount

func (q pairQueue) Len() int { return len(q) }
func (q pairQueue) Less(i, j int) bool {
	if q[i].count != q[j].count {
		return q[i].count > q[j].count
	}
	return q[i].pair < q[j].pair
}
func (q pairQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *pairQueue) Push(x any)   { *q = append(*q, x.(pairCount)) }
func (q *pairQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// merger holds the BPE state: each distinct word as symbol ids, the weighted
// count of every adjacent pair, and which words hold each pair. Counts are
// kept exact; the queue may hold stale entries, which Train re-checks when
// it pops them (the lazy update of the Hugging Face trainer).
type merger struct {
	syms   [][]int32
	freq   []int
	count  map[pair]int
	where  map[pair]map[int32]struct{}
	queue  pairQueue
	change map[pair]int // scratch: count delta of one merge
}

func newMerger(t *Tokenizer, words []string, counts map[string]int) *merger {
	m := &merger{
		syms:   make([][]int32, len(words)),
		freq:   make([]int, len(words)),
		count:  map[pair]int{},
		where:  map[pair]map[int32]struct{}{},
		change: map[pair]int{},
	}
	for i, w := range words {
		m.freq[i] = counts[w]
		syms := make([]int32, 0, utf8.RuneCountInString(w))
		for j, r := range w {
			tok := string(r)
			if j > 0 {
				tok = t.prefix + tok
			}
			syms = append(syms, int32(t.vocab[tok]))
		}
		m.syms[i] = syms
		m.addPairs(int32(i), 1)
	}
	ps := make([]pair, 0, len(m.count))
	for p := range m.count {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	for _, p := range ps {
		m.queue = append(m.queue, pairCount{pair: p, count: m.count[p]})
	}
	heap.Init(&m.queue)
	return m
}

// addPairs adds sign × frequency of word w to the count of each of its pairs.
func (m *merger) addPairs(w int32, sign int) {
	s := m.syms[w]
	for j := 0; j+1 < len(s); j++ {
		p := makePair(s[j], s[j+1])
		d := sign * m.freq[w]
		m.count[p] += d
		m.change[p] += d
		if sign > 0 {
			set := m.where[p]
			if set == nil {
				set = map[int32]struct{}{}
				m.where[p] = set
			}
			set[w] = struct{}{}
		}
	}
}

// merge replaces every occurrence of p, left to right, by id, updates the
// pair counts, and queues the pairs whose count grew.
func (m *merger) merge(p pair, id int32) {
	a, b := p.split()
	ws := make([]int32, 0, len(m.where[p]))
	for w := range m.where[p] {
		ws = append(ws, w)
	}
	slices.Sort(ws)
	clear(m.change)
	for _, w := range ws {
		m.addPairs(w, -1)
		s := m.syms[w]
		out := s[:0]
		for j := 0; j < len(s); j++ {
			if j+1 < len(s) && s[j] == a && s[j+1] == b {
				out = append(out, id)
				j++
				continue
			}
			out = append(out, s[j])
		}
		m.syms[w] = out
		m.addPairs(w, +1)
	}
	delete(m.where, p)
	grown := make([]pair, 0, len(m.change))
	for q, d := range m.change {
		if d > 0 {
			grown = append(grown, q)
		}
	}
	slices.Sort(grown)
	for _, q := range grown {
		heap.Push(&m.queue, pairCount{pair: q, count: m.count[q]})
	}
}
