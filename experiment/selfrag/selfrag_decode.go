package selfrag

import (
	"fmt"
	"math"
	"slices"

	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Reflective decoding (Self-RAG, Asai et al. 2024, section 3.3, with hard thresholds instead of
// the segment-level beam search): for each question
//
//  1. read P([Retrieve]) / (P([Retrieve]) + P([No Retrieve])) after the closed-book question;
//     below policy.retrieve the question is answered closed-book;
//  2. otherwise judge each of its K passages separately: relevance = P([Relevant]) /
//     (P([Relevant]) + P([Irrelevant])) after "<ctx> passage </ctx> question";
//  3. answer from every passage whose relevance is >= policy.relevance ("[Relevant] cloze" then
//     greedy decoding) and read the support score after the answer, (P([Fully supported]) +
//     P([Partially supported])/2) / (sum of the three IsSup probabilities);
//  4. keep the passage with the highest relevance + policy.supportWeight * support (ties: the
//     better-ranked passage); when no passage passes, answer closed-book.

// reflectScorer is what the policy asks of a reflective reader, in batches.
type reflectScorer interface {
	// RetrieveProb returns P([Retrieve]) / (P([Retrieve]) + P([No Retrieve])) of each question.
	RetrieveProb(qs []int) ([]float64, error)
	// Relevance returns P([Relevant]) / (P([Relevant]) + P([Irrelevant])) of each pair.
	Relevance(pairs []qpPair) ([]float64, error)
	// Answer answers each pair from its passage, or closed-book when the passage is "".
	Answer(pairs []qpPair) ([]reflectAnswer, error)
}

// qpPair is a question (an index the scorer understands) and one passage.
type qpPair struct {
	q       int
	passage string
}

// reflectAnswer is a generated answer: its ids (reflection tokens and [SEP] excluded), whether
// generation ended (a reflection token or [SEP] followed it), the probability of the generated
// tokens, and the support score (0 closed-book).
type reflectAnswer struct {
	tokens     []int
	ended      bool
	confidence float64
	support    float64
}

// reflectPolicy holds the decoding thresholds (recipe keys selfrag.*).
type reflectPolicy struct {
	retrieve, relevance, supportWeight float64
}

// reflectDecision is the policy's choice for one question.
type reflectDecision struct {
	pRetrieve float64
	retrieved bool      // pRetrieve >= policy.retrieve
	relevance []float64 // per passage (nil when not retrieved)
	chosen    int       // the passage answered from; -1: closed-book
	answer    reflectAnswer
}

// reflectiveDecode runs the policy with scorer s on questions qs, passages[i] the candidates of
// qs[i] in retrieval order (empty: closed-book whatever the scorer says).
func reflectiveDecode(s reflectScorer, qs []int, passages [][]string, p reflectPolicy) ([]reflectDecision, error) {
	if len(passages) != len(qs) {
		return nil, fmt.Errorf("selfrag: %d passage lists for %d questions", len(passages), len(qs))
	}
	dec := make([]reflectDecision, len(qs))
	pr, err := s.RetrieveProb(qs)
	if err != nil {
		return nil, err
	}
	var pairs []qpPair
	var owner, slot []int
	for i, q := range qs {
		dec[i] = reflectDecision{pRetrieve: pr[i], retrieved: pr[i] >= p.retrieve, chosen: -1}
		if !dec[i].retrieved {
			continue
		}
		dec[i].relevance = make([]float64, len(passages[i]))
		for k, text := range passages[i] {
			pairs = append(pairs, qpPair{q: q, passage: text})
			owner, slot = append(owner, i), append(slot, k)
		}
	}
	rel, err := s.Relevance(pairs)
	if err != nil {
		return nil, err
	}
	var answerPairs []qpPair
	var aOwner, aSlot []int
	for j, r := range rel {
		dec[owner[j]].relevance[slot[j]] = r
		if r >= p.relevance {
			answerPairs = append(answerPairs, pairs[j])
			aOwner, aSlot = append(aOwner, owner[j]), append(aSlot, slot[j])
		}
	}
	answers, err := s.Answer(answerPairs)
	if err != nil {
		return nil, err
	}
	best := make([]float64, len(qs))
	for j, a := range answers {
		i, k := aOwner[j], aSlot[j]
		score := dec[i].relevance[k] + p.supportWeight*a.support
		if dec[i].chosen < 0 || score > best[i] {
			dec[i].chosen, dec[i].answer, best[i] = k, a, score
		}
	}
	var closed []qpPair
	var cOwner []int
	for i, q := range qs {
		if dec[i].chosen < 0 {
			closed = append(closed, qpPair{q: q})
			cOwner = append(cOwner, i)
		}
	}
	cb, err := s.Answer(closed)
	if err != nil {
		return nil, err
	}
	for j, a := range cb {
		dec[cOwner[j]].answer = a
	}
	return dec, nil
}

// reflectIDs are the reflection tokens' ids in a tokenizer.
type reflectIDs struct {
	retrieve, noRetrieve, relevant, irrelevant, full, partial, none int
}

// isReflection reports whether id is one of the seven tokens.
func (r reflectIDs) isReflection(id int) bool {
	return slices.Contains([]int{r.retrieve, r.noRetrieve, r.relevant, r.irrelevant, r.full, r.partial, r.none}, id)
}

// reflectionIDs looks the reflection tokens up in tok and checks that a reader of vocab ids
// has rows for them. A tokenizer or reader from before the tokens were added is an error that
// says so, never a silent fallback to plain decoding.
func reflectionIDs(tok *tokenize.Tokenizer, vocab int) (reflectIDs, error) {
	var ids [7]int
	for i, t := range tokenize.ReflectionTokens() {
		id, ok := tok.ID(t)
		if !ok {
			return reflectIDs{}, fmt.Errorf("selfrag: the tokenizer has no reflection token %s: this reader was not trained with reflection tokens "+
				"(add tokenize.ReflectionTokens() to its tokenizer, grow it with model.GrowVocab and fine-tune it, as kind = \"selfrag\" does)", t)
		}
		if id >= vocab {
			return reflectIDs{}, fmt.Errorf("selfrag: the reflection token %s has id %d but the reader has only %d ids: "+
				"the reader checkpoint was saved before its vocabulary was grown by the reflection tokens", t, id, vocab)
		}
		ids[i] = id
	}
	return reflectIDs{ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6]}, nil
}

// reflectReader is the reflectScorer of a reflective reader: prompts in ragreader.Format f, the
// questions qs (qpPair.q indexes them). Answers and relevances are memoised by (question,
// passage), so systems sharing passages share the work.
type reflectReader struct {
	f      *ragreader.Format
	qs     []*garden.Question
	maxNew int
	id     reflectIDs
	next   *model.NextTokenRunner
	greedy *model.ReaderRunner
	rel    map[qpPair]float64
	ans    map[qpPair]reflectAnswer
	pRet   map[int]float64
}

// newReflectReader checks that the tokenizer and the reader carry the reflection tokens
// (reflectionIDs) and builds the runners.
func newReflectReader(r *model.Reader, f *ragreader.Format, qs []*garden.Question, maxNew int) (*reflectReader, error) {
	id, err := reflectionIDs(f.Tok, r.Vocab())
	if err != nil {
		return nil, err
	}
	const B = 64
	s := &reflectReader{f: f, qs: qs, maxNew: maxNew, id: id,
		rel: map[qpPair]float64{}, ans: map[qpPair]reflectAnswer{}, pRet: map[int]float64{}}
	if s.next, err = model.NewNextTokenRunner(r, B, f.L); err != nil {
		return nil, err
	}
	if s.greedy, err = model.NewReaderRunner(r, B, f.L); err != nil {
		s.next.Close()
		return nil, err
	}
	return s, nil
}

func (s *reflectReader) Close() {
	s.next.Close()
	s.greedy.Close()
}

// reserve is the room a prompt leaves for "[Relevant] cloze answer [IsSup] [SEP]".
func (s *reflectReader) reserve(q *garden.Question) int {
	return len(s.f.Tok.Encode(q.Cloze)) + s.maxNew + 3
}

func (s *reflectReader) prompt(p qpPair) ([]int, error) {
	q := s.qs[p.q]
	ids, _, err := s.f.Prompt(p.passage, q.Trained, s.reserve(q))
	return ids, err
}

// reflectPairProb returns a / (a + b) of two next-token log-probabilities, computed stably.
func reflectPairProb(la, lb float64) float64 {
	m := max(la, lb)
	ea, eb := math.Exp(la-m), math.Exp(lb-m)
	return ea / (ea + eb)
}

func (s *reflectReader) RetrieveProb(qs []int) ([]float64, error) {
	prompt := func(q int) ([]int, error) { return s.prompt(qpPair{q: q}) }
	return pairProbs(s.next, s.pRet, qs, prompt, s.id.retrieve, s.id.noRetrieve)
}

func (s *reflectReader) Relevance(pairs []qpPair) ([]float64, error) {
	return pairProbs(s.next, s.rel, pairs, s.prompt, s.id.relevant, s.id.irrelevant)
}

// pairProbs returns, per key, the reader's probability of the reflection token yes against no
// (reflectPairProb of the two next-token log-probabilities after the key's prompt): from cache,
// or computed in one batch for the keys not in it (each once) and added to it.
func pairProbs[K comparable](next *model.NextTokenRunner, cache map[K]float64, keys []K, prompt func(K) ([]int, error), yes, no int) ([]float64, error) {
	var prompts [][]int
	var todo []K
	seen := map[K]bool{}
	for _, k := range keys {
		if _, ok := cache[k]; ok || seen[k] {
			continue
		}
		ids, err := prompt(k)
		if err != nil {
			return nil, err
		}
		seen[k] = true
		prompts, todo = append(prompts, ids), append(todo, k)
	}
	lp, err := next.LogProbs(prompts, []int{yes, no})
	if err != nil {
		return nil, err
	}
	for j, k := range todo {
		cache[k] = reflectPairProb(lp[j][0], lp[j][1])
	}
	out := make([]float64, len(keys))
	for i, k := range keys {
		out[i] = cache[k]
	}
	return out, nil
}

// Answer decodes "prompt [Relevant] cloze" greedily (closed-book: "prompt [Retrieve] cloze" or
// "[No Retrieve]", whichever the reader finds more probable), stops at the first reflection
// token or [SEP], and reads the support score after the answer.
func (s *reflectReader) Answer(pairs []qpPair) ([]reflectAnswer, error) {
	var todo []qpPair
	seen := map[qpPair]bool{}
	var closedQs []int
	for _, p := range pairs {
		if _, ok := s.ans[p]; ok || seen[p] {
			continue
		}
		seen[p] = true
		todo = append(todo, p)
		if p.passage == "" {
			closedQs = append(closedQs, p.q)
		}
	}
	if _, err := s.RetrieveProb(closedQs); err != nil {
		return nil, err
	}
	prompts := make([][]int, len(todo))
	for j, p := range todo {
		ids, err := s.prompt(p)
		if err != nil {
			return nil, err
		}
		first := s.id.relevant
		if p.passage == "" {
			first = s.id.noRetrieve
			if s.pRet[p.q] >= 0.5 {
				first = s.id.retrieve
			}
		}
		ids = append(append(ids, first), s.f.Tok.Encode(s.qs[p.q].Cloze)...)
		prompts[j] = ids
	}
	gens, err := s.greedy.Greedy(prompts, s.maxNew+1, s.f.Sep)
	if err != nil {
		return nil, err
	}
	var supPrompts [][]int
	var supOwner []int
	res := make([]reflectAnswer, len(todo))
	for j, g := range gens {
		a := reflectAnswer{confidence: g.Confidence()}
		for _, t := range g.Tokens {
			if s.id.isReflection(t) {
				a.ended = true
				break
			}
			a.tokens = append(a.tokens, t)
		}
		a.ended = a.ended || (g.Stopped && len(a.tokens) == len(g.Tokens))
		res[j] = a
		if todo[j].passage != "" && len(prompts[j])+len(a.tokens) < s.f.L {
			supPrompts = append(supPrompts, append(slices.Clone(prompts[j]), a.tokens...))
			supOwner = append(supOwner, j)
		}
	}
	lp, err := s.next.LogProbs(supPrompts, []int{s.id.full, s.id.partial, s.id.none})
	if err != nil {
		return nil, err
	}
	for k, j := range supOwner {
		m := max(lp[k][0], lp[k][1], lp[k][2])
		f, p, n := math.Exp(lp[k][0]-m), math.Exp(lp[k][1]-m), math.Exp(lp[k][2]-m)
		res[j].support = (f + p/2) / (f + p + n)
	}
	for j, p := range todo {
		s.ans[p] = res[j]
	}
	out := make([]reflectAnswer, len(pairs))
	for i, p := range pairs {
		out[i] = s.ans[p]
	}
	return out, nil
}
