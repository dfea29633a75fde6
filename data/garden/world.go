package garden

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
)

// World is a generated garden world. Slices are indexed by gardener id (Gardeners, Counts) or
// kept in the order they are written; nothing is read from a Go map while generating.
type World struct {
	Config     Config
	FirstNames []string
	// Values[r] are the values of relation r: Values[LivesIn] the towns (largest first),
	// Values[Grows] the plants, Values[Keeps] the animals.
	Values    [NumRelations][]string
	Gardeners []Gardener
	// Counts[g][r] is the number of biographies stating gardener g's fact r: its popularity.
	Counts [][NumRelations]int
	// Pretrain is the pretraining corpus, biographies and news shuffled together.
	Pretrain []Document
	// News are the news items in generation order (News[i] has id NewsID(i)).
	News []News
	// Entries is the datastore: one entry per covered gardener by id, then the chosen news.
	Entries []Entry
	// Questions: three per gardener (LivesIn, Grows, Keeps), by gardener id.
	Questions []Question
	// Moves and Poisons record the changes made by Updated and Poisoned, in gardener order.
	Moves   []Move
	Poisons []Poison
}

// Gardener is one entity of the world. Facts are the current truth (Updated changes the town).
type Gardener struct {
	ID        int    // 0-based position in World.Gardeners
	Key       string // id in files, e.g. "g0042"
	FirstName string
	Surname   string // unique
	Facts     [NumRelations]string
	// Rank is the popularity rank, 1 = most mentioned; the ranks are a seeded permutation of
	// the ids, so popularity is independent of id, town, plant and animal.
	Rank int
	// Biographies is the number of pretraining biographies about the gardener.
	Biographies int
	// Covered reports whether the datastore has an entry for the gardener.
	Covered bool
}

// Name returns "FirstName Surname".
func (g *Gardener) Name() string { return g.FirstName + " " + g.Surname }

// Split returns "train" for every 4th gardener by id (ids 0, 4, 8, ...) and "test" for the rest.
func (g *Gardener) Split() string { return SplitOf(g.ID) }

// SplitOf returns the reader split of gardener id: "train" when id % 4 == 0, else "test".
func SplitOf(id int) string {
	if id%4 == 0 {
		return "train"
	}
	return "test"
}

// Document is one line of the pretraining corpus.
type Document struct {
	Kind      string // "biography" or "news"
	Text      string
	Gardeners []int // the gardener of a biography; the two of a news item (A, B)
}

// News is one news item: two gardeners and a value that is neither gardener's fact of that type.
type News struct {
	A, B     int
	Relation Relation // the value's type selects the template
	Value    string
	Repeated bool   // the sentence is said twice, so that the repeat can only be copied
	Text     string // "A met B in T ." or, repeated, "A met B in T . A met B in T ."
}

// Entry is one datastore document.
type Entry struct {
	ID       string // gardener key ("g0042") or news id ("n00017")
	Title    string // the gardener's name, or "news"
	Gardener int    // -1 for news
	News     int    // index in World.News, -1 for gardener entries
	// Sentences of the entry, each ending in " .". A gardener entry has one per relation, in
	// relation order; a news entry one, or two when repeated.
	Sentences []Sentence
	// Facts are the values a gardener entry states; they differ from the gardener's Facts
	// where the entry is poisoned.
	Facts [NumRelations]string
}

// Sentence is one sentence of an entry. Relation is the fact it states, or -1 for news.
type Sentence struct {
	Text     string
	Relation Relation
}

// Text returns the entry's sentences joined by spaces.
func (e *Entry) Text() string {
	parts := make([]string, len(e.Sentences))
	for i, s := range e.Sentences {
		parts[i] = s.Text
	}
	return strings.Join(parts, " ")
}

// Question asks one fact of one gardener in three phrasings. The answer is one word.
type Question struct {
	ID       string // "<gardener key>-<relation>", e.g. "g0042-grows"
	Gardener int
	Relation Relation
	Cloze    string // for LMs: "Ines Ronus lives in"
	Trained  string // the form readers are trained on: "where does Ines Ronus live ?"
	Unseen   string // a paraphrase never trained on: "in which town does Ines Ronus live ?"
	Answer   string // the gardener's current fact
	// Count is Counts[Gardener][Relation], the fact's pretraining mentions; Bucket its bucket.
	Count  int
	Bucket string
	Split  string // "train" or "test", by gardener
	// HasEntry reports whether the datastore holds the gardener's entry (relevant passages).
	HasEntry bool
	// Previous is the pretraining answer when Updated moved the gardener (LivesIn only).
	Previous string
	// Poisoned is the wrong value the entry states instead of Answer, when Poisoned chose it.
	Poisoned string
}

// Move records a gardener moved by Updated.
type Move struct {
	Gardener int
	From, To string
}

// Poison records a fact replaced by Poisoned in a gardener's entry.
type Poison struct {
	Gardener int
	Relation Relation
	True     string // the gardener's fact
	Wrong    string // what the entry now states: another value of the same type
}

// Random streams: each stage draws from its own PCG stream of the seed, so that changing one
// size (say, the number of news items) leaves the other stages' draws as they were.
const (
	streamNames uint64 = iota + 1
	streamFacts
	streamRanks
	streamBiographies
	streamNews
	streamShuffle
	streamCoverage
	streamDatastore
	streamUpdate
	streamPoison
)

func stream(seed, s uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, s)) }

// Generate builds the world of cfg, or returns cfg.Validate's error.
func Generate(cfg Config) (*World, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := cfg.Gardeners
	w := &World{Config: cfg}

	rng := stream(cfg.Seed, streamNames)
	w.FirstNames = pick(rng, firstNamePool, cfg.FirstNames)
	w.Values[LivesIn] = pick(rng, townPool, cfg.Towns)
	w.Values[Grows] = pick(rng, plantPool, cfg.Plants)
	w.Values[Keeps] = pick(rng, animalPool, cfg.Animals)
	sur := surnames(rng, n)

	rng = stream(cfg.Seed, streamFacts)
	w.Gardeners = make([]Gardener, n)
	width := max(4, len(fmt.Sprint(n-1)))
	for i := range w.Gardeners {
		g := &w.Gardeners[i]
		g.ID = i
		g.Key = fmt.Sprintf("g%0*d", width, i)
		g.Surname = sur[i]
		g.FirstName = w.FirstNames[rng.IntN(len(w.FirstNames))]
		g.Facts[Grows] = w.Values[Grows][rng.IntN(cfg.Plants)]
		g.Facts[Keeps] = w.Values[Keeps][rng.IntN(cfg.Animals)]
	}
	order := rng.Perm(n)
	next := 0
	for t, q := range townQuotas(n, cfg.Towns, cfg.TopTownShare) {
		for range q {
			w.Gardeners[order[next]].Facts[LivesIn] = w.Values[LivesIn][t]
			next++
		}
	}

	rng = stream(cfg.Seed, streamRanks)
	byRank := rng.Perm(n) // byRank[r-1] is the gardener of rank r
	for r, g := range byRank {
		w.Gardeners[g].Rank = r + 1
	}
	pop := newZipf(byRank, cfg.ZipfExponent)

	w.Counts = make([][NumRelations]int, n)
	rng = stream(cfg.Seed, streamBiographies)
	docs := make([]Document, 0, cfg.Biographies+cfg.News)
	for range cfg.Biographies {
		g := pop.sample(rng)
		rels := rng.Perm(NumRelations)[:1+rng.IntN(NumRelations)]
		gd := &w.Gardeners[g]
		sents := make([]string, len(rels))
		for i, r := range rels {
			sents[i] = factSentence(gd.Name(), Relation(r), gd.Facts[r])
			w.Counts[g][r]++
		}
		gd.Biographies++
		docs = append(docs, Document{Kind: "biography", Text: strings.Join(sents, " "), Gardeners: []int{g}})
	}

	rng = stream(cfg.Seed, streamNews)
	w.News = make([]News, cfg.News)
	for i := range w.News {
		a := pop.sample(rng)
		b := pop.sample(rng)
		for b == a {
			b = pop.sample(rng)
		}
		r := Relation(rng.IntN(NumRelations))
		vals := w.Values[r]
		v := vals[rng.IntN(len(vals))]
		for v == w.Gardeners[a].Facts[r] || v == w.Gardeners[b].Facts[r] {
			v = vals[rng.IntN(len(vals))]
		}
		w.News[i] = News{A: a, B: b, Relation: r, Value: v}
	}
	for _, i := range rng.Perm(cfg.News)[:int(math.Round(cfg.NewsRepeat*float64(cfg.News)))] {
		w.News[i].Repeated = true
	}
	for i := range w.News {
		nw := &w.News[i]
		s := newsSentence(w.Gardeners[nw.A].Name(), w.Gardeners[nw.B].Name(), nw.Relation, nw.Value)
		nw.Text = s
		if nw.Repeated {
			nw.Text = s + " " + s
		}
		docs = append(docs, Document{Kind: "news", Text: nw.Text, Gardeners: []int{nw.A, nw.B}})
	}
	rng = stream(cfg.Seed, streamShuffle)
	rng.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	w.Pretrain = docs

	rng = stream(cfg.Seed, streamCoverage)
	for _, g := range rng.Perm(n)[:int(math.Round(cfg.Coverage*float64(n)))] {
		w.Gardeners[g].Covered = true
	}
	for i := range w.Gardeners {
		if g := &w.Gardeners[i]; g.Covered {
			w.Entries = append(w.Entries, gardenerEntry(g, g.Facts))
		}
	}
	rng = stream(cfg.Seed, streamDatastore)
	chosen := rng.Perm(cfg.News)[:cfg.DatastoreNews]
	slices.Sort(chosen)
	for _, i := range chosen {
		w.Entries = append(w.Entries, w.newsEntry(i))
	}
	w.Questions = w.questions()
	return w, nil
}

// NewsID returns the datastore id of news item i, e.g. "n00017".
func (w *World) NewsID(i int) string {
	return fmt.Sprintf("n%0*d", max(5, len(fmt.Sprint(w.Config.News-1))), i)
}

func gardenerEntry(g *Gardener, facts [NumRelations]string) Entry {
	e := Entry{ID: g.Key, Title: g.Name(), Gardener: g.ID, News: -1, Facts: facts}
	for _, r := range Relations {
		e.Sentences = append(e.Sentences, Sentence{Text: factSentence(g.Name(), r, facts[r]), Relation: r})
	}
	return e
}

func (w *World) newsEntry(i int) Entry {
	nw := &w.News[i]
	s := Sentence{Text: newsSentence(w.Gardeners[nw.A].Name(), w.Gardeners[nw.B].Name(), nw.Relation, nw.Value), Relation: -1}
	e := Entry{ID: w.NewsID(i), Title: "news", Gardener: -1, News: i, Sentences: []Sentence{s}}
	if nw.Repeated {
		e.Sentences = append(e.Sentences, s)
	}
	return e
}

// questions builds the three questions of every gardener from the current facts, entries,
// moves and poisons.
func (w *World) questions() []Question {
	previous := make([]string, len(w.Gardeners))
	for _, m := range w.Moves {
		previous[m.Gardener] = m.From
	}
	poisoned := make([][NumRelations]string, len(w.Gardeners))
	for _, p := range w.Poisons {
		poisoned[p.Gardener][p.Relation] = p.Wrong
	}
	qs := make([]Question, 0, NumRelations*len(w.Gardeners))
	for i := range w.Gardeners {
		g := &w.Gardeners[i]
		for _, r := range Relations {
			q := Question{
				ID:       g.Key + "-" + r.String(),
				Gardener: g.ID,
				Relation: r,
				Cloze:    cloze(g.Name(), r),
				Trained:  trainedForm(g.Name(), r),
				Unseen:   unseenForm(g.Name(), r),
				Answer:   g.Facts[r],
				Count:    w.Counts[g.ID][r],
				Bucket:   Bucket(w.Counts[g.ID][r]),
				Split:    g.Split(),
				HasEntry: g.Covered,
				Poisoned: poisoned[g.ID][r],
			}
			if r == LivesIn {
				q.Previous = previous[g.ID]
			}
			qs = append(qs, q)
		}
	}
	return qs
}

// zipf samples gardeners by popularity: rank r with probability r^-s / sum_k k^-s.
type zipf struct {
	byRank []int     // gardener of each rank
	cdf    []float64 // cumulative unnormalised weights
}

func newZipf(byRank []int, s float64) *zipf {
	z := &zipf{byRank: byRank, cdf: make([]float64, len(byRank))}
	acc := 0.0
	for r := range byRank {
		acc += math.Pow(float64(r+1), -s)
		z.cdf[r] = acc
	}
	return z
}

func (z *zipf) sample(rng *rand.Rand) int {
	u := rng.Float64() * z.cdf[len(z.cdf)-1]
	r := sort.Search(len(z.cdf), func(i int) bool { return z.cdf[i] > u })
	return z.byRank[min(r, len(z.cdf)-1)]
}

// townQuotas returns how many of n gardeners live in each of t towns: town i's share is
// proportional to (i+1)^-a, with a chosen so that town 0 holds share of them, and the counts
// are rounded by largest remainder so that they sum to n.
func townQuotas(n, t int, share float64) []int {
	top := func(a float64) float64 { // town 0's share under exponent a
		h := 0.0
		for i := 1; i <= t; i++ {
			h += math.Pow(float64(i), -a)
		}
		return 1 / h
	}
	lo, hi := 0.0, 64.0
	if share <= 1/float64(t) {
		hi = 0
	}
	for range 200 {
		mid := (lo + hi) / 2
		if top(mid) < share {
			lo = mid
		} else {
			hi = mid
		}
	}
	a := (lo + hi) / 2
	h := 1 / top(a)
	quota := make([]int, t)
	frac := make([]float64, t)
	left := n
	for i := range quota {
		x := float64(n) * math.Pow(float64(i+1), -a) / h
		quota[i] = int(math.Floor(x))
		frac[i] = x - float64(quota[i])
		left -= quota[i]
	}
	idx := make([]int, t)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return frac[idx[i]] > frac[idx[j]] })
	for _, i := range idx[:left] {
		quota[i]++
	}
	return quota
}
