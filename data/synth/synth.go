// Package synth generates a deterministic synthetic retrieval collection from a seed, for
// measuring memory, time and approximate-search recall as the corpus grows (issue 17: 100k,
// 500k, 2M passages) with metrics that mean something.
//
// Passages are bags of pseudo-words ("bako", "tirelu": consonant-vowel syllables, none a stop
// word). Each passage has one of Topics topics; a topic is a list of TopicWords words drawn
// uniformly from vocabulary ranks KeyRankMin..Vocab-1 and used with Zipf weights (s = 1)
// within the topic. A passage's words come from its topic with probability TopicShare, else
// from the background Zipf vocabulary (rank r has probability proportional to 1/(r+1)^ZipfS),
// so passages on one topic share words as documents on one subject do, and their embeddings
// cluster.
//
// Each query has a topic, 3 to 5 key terms drawn uniformly from that topic's words past its 10
// most frequent, and 0 to 2 background noise words. Its key terms are planted into 1 to 3
// relevant passages (each term once or twice) and a subset of them (1 to terms-1, each 1 to 3
// times) into 2 to 6 distractor passages, all of which take the query's topic. So BM25 and a
// bag-of-words encoder rank relevant passages well above chance but not perfectly: a
// distractor with a few key terms repeated can outscore a relevant passage, passages on the
// topic hold key terms by chance, and noise words match everywhere.
//
// Passage i is generated from its own random stream (PCG seeded with Seed and i), so any
// passage can be produced on its own (Collection.Passage) and the corpus written in one pass in
// memory independent of the number of passages N: only the query plan (O(Q)), the Zipf table
// (O(Vocab)) and the topics (O(Topics·TopicWords)) are held. Same Config, same bytes.
//
// Not for: realistic language (no syntax, no semantics beyond the planted terms) or judging
// models' quality; it exercises scale, not understanding.
package synth

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
)

// Config sizes a collection. The zero values of Vocab, ZipfS and KeyRankMin take their defaults.
type Config struct {
	Passages int    // N >= MinPassages
	Queries  int    // Q >= 1
	Seed     uint64 // same Config, same collection
	// Vocab is the number of distinct background words (default 50,000, at most MaxVocab).
	Vocab int
	// ZipfS is the Zipf exponent s of the background words (default 1.0, must be > 0).
	ZipfS float64
	// KeyRankMin is the most frequent vocabulary rank a topic word may have (default 200).
	KeyRankMin int
	// Topics (default 1,000), TopicWords per topic (default 300, at least 20) and TopicShare,
	// the probability that a passage word comes from its topic (default 0.5; in [0, 1)).
	Topics, TopicWords int
	TopicShare         float64
}

// Defaults and limits.
const (
	DefaultVocab      = 50000
	DefaultZipfS      = 1.0
	DefaultKeyRankMin = 200
	DefaultTopics     = 1000
	DefaultTopicWords = 300
	DefaultTopicShare = 0.5
	MaxVocab          = 70*70 + 70*70*70 // two- and three-syllable words
	// MinPassages is the fewest passages a collection may have: a query's relevant and
	// distractor passages (at most 3 + 6) are distinct.
	MinPassages = 9

	// PCG streams: passage i is stream i, query q queryStream + q, topic t topicStream + t.
	queryStream = 1 << 62
	topicStream = 1<<62 + 1<<61
)

// Splits are the qrels files written: query q goes to Splits[splitOf(q)], test for q%10 in
// {0, 1}, dev for 2, train otherwise.
var Splits = []string{"test", "dev", "train"}

func splitOf(q int) string {
	switch q % 10 {
	case 0, 1:
		return "test"
	case 2:
		return "dev"
	}
	return "train"
}

// Query is one generated query with its planted relevance.
type Query struct {
	ID    string
	Text  string   // the key terms and noise words, shuffled, space-separated
	Terms []string // the key terms, all planted into every relevant passage
	Topic int      // the topic of the key terms and of the relevant and distractor passages
	// Relevant are the passage indices judged relevant (score 1), Distractors those holding
	// some but not all of Terms.
	Relevant, Distractors []int
	Split                 string // "test", "dev" or "train"
}

// planting is a query's key terms put into one passage: word ranks, each tf times.
type planting struct {
	words []int
	tf    []int
}

// assignment is what the plan puts into a passage: its topic (that of the first query planting
// there) and the plantings, in query order.
type assignment struct {
	topic int
	plant []planting
}

// Collection is a generated collection: queries and their plan in memory, passages generated on
// demand. It is read-only after New and safe for concurrent use.
type Collection struct {
	cfg      Config
	cdf      []float64 // cdf[r] = P(rank <= r) of the background vocabulary
	topicCDF []float64 // the same within a topic's word list
	topics   [][]int   // topic -> word ranks
	queries  []Query
	plan     map[int]*assignment // passage -> planted topic and terms
}

// New plans the collection of c: it draws every query, its key terms and its relevant and
// distractor passages. It fails on sizes outside the documented ranges.
func New(c Config) (*Collection, error) {
	// Zero fields take their defaults.
	c.Vocab = cmp.Or(c.Vocab, DefaultVocab)
	c.ZipfS = cmp.Or(c.ZipfS, DefaultZipfS)
	c.KeyRankMin = cmp.Or(c.KeyRankMin, DefaultKeyRankMin)
	c.Topics = cmp.Or(c.Topics, DefaultTopics)
	c.TopicWords = cmp.Or(c.TopicWords, DefaultTopicWords)
	c.TopicShare = cmp.Or(c.TopicShare, DefaultTopicShare)
	switch {
	case c.Passages < MinPassages:
		return nil, fmt.Errorf("synth: passages = %d, want >= %d", c.Passages, MinPassages)
	case c.Queries < 1:
		return nil, fmt.Errorf("synth: queries = %d, want >= 1", c.Queries)
	case c.Vocab < 1 || c.Vocab > MaxVocab:
		return nil, fmt.Errorf("synth: vocab = %d, want 1..%d", c.Vocab, MaxVocab)
	case !(c.ZipfS > 0) || math.IsInf(c.ZipfS, 0):
		return nil, fmt.Errorf("synth: zipf s = %v, want > 0", c.ZipfS)
	case c.Topics < 1:
		return nil, fmt.Errorf("synth: topics = %d, want >= 1", c.Topics)
	case c.TopicWords < 20 || c.KeyRankMin < 0 || c.KeyRankMin > c.Vocab-c.TopicWords:
		return nil, fmt.Errorf("synth: topic words = %d and key rank min = %d: want topic words >= 20 and 0 <= key rank min <= vocab - topic words = %d",
			c.TopicWords, c.KeyRankMin, c.Vocab-c.TopicWords)
	case !(c.TopicShare >= 0 && c.TopicShare < 1):
		return nil, fmt.Errorf("synth: topic share = %v, want [0, 1)", c.TopicShare)
	}
	g := &Collection{cfg: c, cdf: zipfCDF(c.Vocab, c.ZipfS), topicCDF: zipfCDF(c.TopicWords, 1), plan: make(map[int]*assignment)}
	for t := range c.Topics {
		r := rand.New(rand.NewPCG(c.Seed, topicStream+uint64(t)))
		seen := make(map[int]bool, c.TopicWords)
		words := make([]int, 0, c.TopicWords)
		for len(words) < c.TopicWords {
			if w := c.KeyRankMin + r.IntN(c.Vocab-c.KeyRankMin); !seen[w] {
				seen[w] = true
				words = append(words, w)
			}
		}
		g.topics = append(g.topics, words)
	}
	for q := range c.Queries {
		g.queries = append(g.queries, g.planQuery(q))
	}
	return g, nil
}

// planQuery draws query q from its own stream and records its plantings.
func (g *Collection) planQuery(q int) Query {
	r := rand.New(rand.NewPCG(g.cfg.Seed, queryStream+uint64(q)))
	topic := r.IntN(g.cfg.Topics)
	nTerms, nRel, nDis := 3+r.IntN(3), 1+r.IntN(3), 2+r.IntN(5)
	var terms []int
	for len(terms) < nTerms {
		w := g.topics[topic][10+r.IntN(g.cfg.TopicWords-10)]
		if !slices.Contains(terms, w) {
			terms = append(terms, w)
		}
	}
	var docs []int
	for len(docs) < nRel+nDis {
		d := r.IntN(g.cfg.Passages)
		if !slices.Contains(docs, d) {
			docs = append(docs, d)
		}
	}
	qy := Query{ID: "q" + strconv.Itoa(q), Topic: topic, Relevant: docs[:nRel], Distractors: docs[nRel:], Split: splitOf(q)}
	add := func(d int, p planting) {
		a := g.plan[d]
		if a == nil {
			a = &assignment{topic: topic}
			g.plan[d] = a
		}
		a.plant = append(a.plant, p)
	}
	for _, d := range qy.Relevant {
		p := planting{words: terms, tf: make([]int, nTerms)}
		for j := range p.tf {
			p.tf[j] = 1 + r.IntN(2)
		}
		add(d, p)
	}
	for _, d := range qy.Distractors {
		perm := r.Perm(nTerms)[:1+r.IntN(nTerms-1)]
		slices.Sort(perm)
		p := planting{}
		for _, j := range perm {
			p.words = append(p.words, terms[j])
			p.tf = append(p.tf, 1+r.IntN(3))
		}
		add(d, p)
	}
	words := slices.Clone(terms)
	for range r.IntN(3) {
		words = append(words, g.zipf(r))
	}
	r.Shuffle(len(words), func(i, j int) { words[i], words[j] = words[j], words[i] })
	for _, w := range terms {
		qy.Terms = append(qy.Terms, Word(w))
	}
	qy.Text = joinWords(words)
	return qy
}

// zipfCDF is the cumulative distribution of ranks 0..n-1 with P(r) proportional to 1/(r+1)^s.
func zipfCDF(n int, s float64) []float64 {
	cdf := make([]float64, n)
	sum := 0.0
	for r := range n {
		sum += math.Pow(float64(r+1), -s)
		cdf[r] = sum
	}
	for r := range cdf {
		cdf[r] /= sum
	}
	return cdf
}

// draw draws an index from a cumulative distribution.
func draw(cdf []float64, r *rand.Rand) int {
	i, _ := slices.BinarySearch(cdf, r.Float64())
	return min(i, len(cdf)-1)
}

// zipf draws a background vocabulary rank.
func (g *Collection) zipf(r *rand.Rand) int { return draw(g.cdf, r) }

// Topic returns the word ranks of topic t, most frequent in the topic first. The slice is
// shared: do not modify it.
func (g *Collection) Topic(t int) []int { return g.topics[t] }

// Config returns the configuration with defaults filled in.
func (g *Collection) Config() Config { return g.cfg }

// Len returns the number of passages N.
func (g *Collection) Len() int { return g.cfg.Passages }

// PassageID returns the _id of passage i: "d" followed by i in decimal.
func PassageID(i int) string { return "d" + strconv.Itoa(i) }

// Passage returns the title (2 to 5 words) and text (40 to 120 words plus the planted key
// terms) of passage i, 0 <= i < N, generated from its own stream. It panics when i is out of
// range.
func (g *Collection) Passage(i int) (title, text string) {
	title, text, _ = g.passage(i)
	return title, text
}

// PassageTopic returns the topic of passage i.
func (g *Collection) PassageTopic(i int) int {
	_, _, t := g.passage(i)
	return t
}

func (g *Collection) passage(i int) (title, text string, topic int) {
	if i < 0 || i >= g.cfg.Passages {
		panic(fmt.Sprintf("synth: passage %d out of range [0, %d)", i, g.cfg.Passages))
	}
	r := rand.New(rand.NewPCG(g.cfg.Seed, uint64(i)))
	topic = r.IntN(g.cfg.Topics)
	a := g.plan[i]
	if a != nil {
		topic = a.topic
	}
	word := func() int {
		if r.Float64() < g.cfg.TopicShare {
			return g.topics[topic][draw(g.topicCDF, r)]
		}
		return g.zipf(r)
	}
	tw := make([]int, 2+r.IntN(4))
	for j := range tw {
		tw[j] = word()
	}
	words := make([]int, 40+r.IntN(81), 140)
	for j := range words {
		words[j] = word()
	}
	var plant []planting
	if a != nil {
		plant = a.plant
	}
	for _, p := range plant {
		for j, w := range p.words {
			for range p.tf[j] {
				words = slices.Insert(words, r.IntN(len(words)+1), w)
			}
		}
	}
	return joinWords(tw), joinWords(words), topic
}

// NumQueries returns the number of queries Q.
func (g *Collection) NumQueries() int { return len(g.queries) }

// Query returns query q, 0 <= q < Q. The slices are shared: do not modify them.
func (g *Collection) Query(q int) Query { return g.queries[q] }

// Word returns the vocabulary word of rank r: two consonant-vowel syllables for r < 4,900,
// three after, so every word has at least four letters and none is an English stop word.
func Word(r int) string {
	const cons, vows = "bdfgklmnprstvz", "aeiou"
	n := 2
	if r >= 70*70 {
		r -= 70 * 70
		n = 3
	}
	b := make([]byte, 0, 2*n)
	for range n {
		s := r % 70
		r /= 70
		b = append(b, cons[s/5], vows[s%5])
	}
	return string(b)
}

func joinWords(ws []int) string {
	var b strings.Builder
	for j, w := range ws {
		if j > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Word(w))
	}
	return b.String()
}

// Write writes the collection to dir in the BEIR layout that data.Load reads: corpus.jsonl
// (passages in index order, streamed), queries.jsonl and qrels/<split>.tsv for each of Splits
// (a split with no query holds only the header). Each file is written to a temporary file and
// renamed into place. It returns the first error, naming the file.
func (g *Collection) Write(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "qrels"), 0o755); err != nil {
		return err
	}
	err := atomicfile.Write(filepath.Join(dir, "corpus.jsonl"), func(w io.Writer) error {
		for i := range g.cfg.Passages {
			title, text := g.Passage(i)
			if err := writeLine(w, map[string]string{"_id": PassageID(i), "title": title, "text": text}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = atomicfile.Write(filepath.Join(dir, "queries.jsonl"), func(w io.Writer) error {
		for _, q := range g.queries {
			if err := writeLine(w, map[string]string{"_id": q.ID, "text": q.Text}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, s := range Splits {
		err := atomicfile.Write(filepath.Join(dir, "qrels", s+".tsv"), func(w io.Writer) error {
			if _, err := io.WriteString(w, "query-id\tcorpus-id\tscore\n"); err != nil {
				return err
			}
			for _, q := range g.queries {
				if q.Split != s {
					continue
				}
				for _, d := range q.Relevant {
					if _, err := fmt.Fprintf(w, "%s\t%s\t1\n", q.ID, PassageID(d)); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// writeLine writes one JSON object (keys sorted by encoding/json) and a newline.
func writeLine(w io.Writer, rec map[string]string) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
