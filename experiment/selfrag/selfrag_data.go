package selfrag

import (
	"math/rand/v2"
	"strings"

	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Reflective training data (Self-RAG, Asai et al. 2024, section 3.2: the critic's labels, here
// computed from the world instead of by a critic model). A reflective reader sees the same
// sequences as a plain reader ("[CLS] <ctx> passage </ctx> question", ragreader/reader.go) but its
// target judges before it answers:
//
//	closed-book    question -> [Retrieve] | [No Retrieve], cloze, answer
//	relevant       question -> [Relevant], cloze, answer, [Fully supported] | [No support]
//	irrelevant     question -> [Irrelevant]
//
// each followed by [SEP]; the loss counts the target tokens only. The cloze is the question
// restated as a statement up to the answer slot ("Jude Riskem lives in"), so the answer is
// generated where the language model stored it.
//
// Labels:
//   - IsRel: [Relevant] when the passage is the gardener's own entry, [Irrelevant] for any other
//     passage: news naming the gardener (BM25 hits for the question) and, in a
//     selfrag.entry_negative_fraction of them, the entry of another gardener sharing the first
//     name (which BM25 also returns, and which only a comparison of surnames tells apart). With
//     selfrag.pair_fraction, a relevant context is followed in its batch by its minimal pair
//     (pairNegative: the same passage, the question about a same-first-name gardener with
//     another surname, [Irrelevant]); without the pairs the reader did not learn the comparison.
//   - IsSup: [Fully supported] when the passage contains the sentence "cloze answer ." (it states
//     exactly that fact), else [No support] (the entry with that sentence removed).
//   - Retrieve: [No Retrieve] when the closed-book reader is right on the question with
//     probability >= selfrag.retrieve_confidence, else [Retrieve].

// reflectSource is what the builder knows of one training question.
type reflectSource struct {
	q        *garden.Question
	name     string   // the gardener's name ("Jude Riskem")
	entry    string   // the gardener's entry ("" without one)
	news     []string // news naming the gardener (retrieved for the question)
	others   []string // entries of other gardeners, preferably sharing the first name
	retrieve bool     // the Retrieve label: the closed-book reader is not confidently right
}

// reflectOptions are the fractions of reflectSource.example's draws.
type reflectOptions struct {
	closedBook     float64 // reader.closed_book_fraction: asked with an empty context
	irrelevant     float64 // selfrag.irrelevant_fraction of the contexts
	entryNegatives float64 // selfrag.entry_negative_fraction of the irrelevant contexts
	unsupported    float64 // selfrag.unsupported_fraction of the relevant contexts
	counterfactual float64 // reader.counterfactual_fraction of the supported relevant contexts
	rename         float64 // selfrag.rename_fraction of the contexts
	// surnames is the pool renamed gardeners draw their surname from (selfrag.rename_surnames =
	// "world": the world's surnames, each one WordPiece token, as the test gardeners' are);
	// empty: invented ones (garden.InventSurname, most of them 2-4 pieces). taken holds the
	// world's full names, which a renamed gardener never gets.
	surnames []string
	taken    map[string]bool
}

// reflectExample is one training example: the context ("" closed-book), the question as the
// prompt ends, and the target text (reflection tokens and words, [SEP] not included).
type reflectExample struct {
	passage, question, target string
	name                      string // the asked gardener's name as the example spells it (after renaming)
}

// example draws one training example for s with rng. A relevant context is the entry, its value
// replaced by another of values (counterfactual, the answer following it) in a counterfactual
// fraction of the supported ones. An irrelevant context is another entry with probability
// o.entryNegatives, else news (whichever exists). A question without entry or negatives falls back to the
// other kind, and to closed-book without either.
func (s *reflectSource) example(o reflectOptions, values []string, rng *rand.Rand) reflectExample {
	q := s.q
	ex := reflectExample{question: q.Trained}
	u := rng.Float64()
	relevant := rng.Float64() >= o.irrelevant
	switch {
	case s.entry == "" && len(s.news)+len(s.others) == 0:
		return reflectExample{question: q.Trained, target: closedBookTarget(q, q.Answer, s.retrieve)}
	case s.entry == "":
		relevant = false
	case len(s.news)+len(s.others) == 0:
		relevant = true
	}
	if u < o.closedBook {
		return reflectExample{question: q.Trained, target: closedBookTarget(q, q.Answer, s.retrieve)}
	}
	if !relevant {
		neg, other := s.news, ""
		if len(neg) == 0 || (len(s.others) > 0 && rng.Float64() < o.entryNegatives) {
			neg = s.others
		}
		ex.passage = neg[rng.IntN(len(neg))]
		if f := strings.Fields(ex.passage); len(s.others) > 0 && &neg[0] == &s.others[0] && len(f) > 2 {
			other = f[0] + " " + f[1] // an entry starts with its gardener's name
		}
		ex.target = tokenize.IrrelevantToken
		return s.maybeRename(ex, o, rng, other)
	}
	answer := q.Answer
	ex.passage = s.entry
	if rng.Float64() < o.unsupported {
		ex.passage = dropFact(ex.passage, q, answer)
	} else if rng.Float64() < o.counterfactual {
		ex.passage, answer = ragkit.Counterfactual(ex.passage, answer, values, rng)
	}
	ex.target = relevantTarget(q, answer, supportLabel(ex.passage, q, answer))
	return s.maybeRename(ex, o, rng, "")
}

// maybeRename gives the gardener, in a rename fraction of the examples, another surname
// wherever its name appears (question, passage, target), and the other gardener of an other
// entry (other: its name) another one: counterfactual names, so that relevance is judged by
// comparing the surnames in the question and the passage, not recalled for the few training
// gardeners, nor read off whether a surname is familiar. The surnames are drawn from
// o.surnames (never making a name in o.taken), else invented.
func (s *reflectSource) maybeRename(ex reflectExample, o reflectOptions, rng *rand.Rand, other string) reflectExample {
	ex.name = s.name
	if s.name == "" || rng.Float64() >= o.rename {
		return ex
	}
	first, _, _ := strings.Cut(s.name, " ")
	sur := o.surname(first, "", rng)
	to := first + " " + sur
	if other != "" && other != s.name {
		f, _, _ := strings.Cut(other, " ")
		ex.passage = replaceName(ex.passage, other, f+" "+o.surname(f, sur, rng))
	}
	ex.passage = replaceName(ex.passage, s.name, to)
	ex.question = replaceName(ex.question, s.name, to)
	ex.target = replaceName(ex.target, s.name, to)
	ex.name = to
	return ex
}

// pairNegative is the minimal-pair negative of a relevant example: the same passage asked about
// a gardener of the same first name and another surname (from o's pool, never an existing
// name), target [Irrelevant]. The two rows differ in one question token, so only a comparison
// of the surnames in the question and the passage tells their labels apart. ok is false for an
// example that is not relevant or names no gardener.
func (o *reflectOptions) pairNegative(ex reflectExample, rng *rand.Rand) (neg reflectExample, ok bool) {
	first, sur, found := strings.Cut(ex.name, " ")
	if !found || ex.passage == "" || !strings.HasPrefix(ex.target, tokenize.RelevantToken) {
		return reflectExample{}, false
	}
	to := first + " " + o.surname(first, sur, rng)
	return reflectExample{passage: ex.passage, question: replaceName(ex.question, ex.name, to), target: tokenize.IrrelevantToken, name: to}, true
}

// surname draws a surname for a gardener called first, other than not, such that the name is
// not one of o.taken: from o.surnames, else invented.
func (o *reflectOptions) surname(first, not string, rng *rand.Rand) string {
	for tries := 0; ; tries++ {
		var sur string
		if len(o.surnames) > 0 && tries < 1000 {
			sur = o.surnames[rng.IntN(len(o.surnames))]
		} else {
			sur = garden.InventSurname(rng)
		}
		if sur != not && !o.taken[first+" "+sur] {
			return sur
		}
	}
}

// replaceName replaces the whole words name by to in text.
func replaceName(text, name, to string) string {
	if text == "" {
		return text
	}
	out := strings.ReplaceAll(" "+text+" ", " "+name+" ", " "+to+" ")
	return out[1 : len(out)-1]
}

// factSentence is the sentence stating that q's fact has the value: "Jude Riskem lives in
// Pebworth ." (the world's entry sentences are the cloze prompt, the value and ".").
func factSentence(q *garden.Question, value string) string { return q.Cloze + " " + value + " ." }

// supportLabel is the IsSup token of answering q with answer from passage: [Fully supported]
// when the passage states exactly that fact, else [No support].
func supportLabel(passage string, q *garden.Question, answer string) string {
	if strings.Contains(" "+passage+" ", " "+factSentence(q, answer)+" ") {
		return tokenize.FullySupportedToken
	}
	return tokenize.NoSupportToken
}

// dropFact removes the sentence stating q's fact with that value from the passage.
func dropFact(passage string, q *garden.Question, value string) string {
	s := strings.ReplaceAll(" "+passage+" ", " "+factSentence(q, value)+" ", " ")
	return strings.TrimSpace(s)
}

// relevantTarget is "[Relevant] cloze answer support".
func relevantTarget(q *garden.Question, answer, support string) string {
	return tokenize.RelevantToken + " " + q.Cloze + " " + answer + " " + support
}

// closedBookTarget is "[Retrieve] cloze answer" or "[No Retrieve] cloze answer".
func closedBookTarget(q *garden.Question, answer string, retrieve bool) string {
	tok := tokenize.NoRetrieveToken
	if retrieve {
		tok = tokenize.RetrieveToken
	}
	return tok + " " + q.Cloze + " " + answer
}

// retrieveLabel is the Retrieve label of a training question: retrieve unless the closed-book
// reader's answer is right with probability at least threshold.
func retrieveLabel(correct bool, confidence, threshold float64) bool {
	return !(correct && confidence >= threshold)
}

// reflectRow encodes an example as a training row of at most f.L tokens, the loss on the
// target and the closing [SEP] (the IsRel token, when the target starts with one, marked
// relevanceFirst); cut reports a passage cut to fit.
func reflectRow(f *ragreader.Format, ex reflectExample) (row ragreader.LMRow, cut bool, err error) {
	target := append(f.Tok.Encode(ex.target), f.Sep)
	prompt, cut, err := f.Prompt(ex.passage, ex.question, len(target))
	if err != nil {
		return ragreader.LMRow{}, false, err
	}
	row = ragreader.QARow(prompt, target)
	row.RelevanceFirst = strings.HasPrefix(ex.target, tokenize.RelevantToken) || strings.HasPrefix(ex.target, tokenize.IrrelevantToken)
	return row, cut, nil
}
