package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/ragtrain/ragtrain/internal/bounded"
)

// SciFact claim verification metrics (Wadden et al., "Fact or Fiction: Verifying Scientific
// Claims", EMNLP 2020, section 4 "Evaluation"), exactly as the official evaluator computes them
// (allenai/scifact verisci/evaluate/lib/metrics.py and doc/evaluation.md, commit 68b98a5).
//
// For each claim the system predicts a set of abstracts, each with a label (SUPPORT or
// CONTRADICT; NOT ENOUGH INFO is expressed by not predicting the abstract) and a list of
// rationale sentences (0-based indices into the abstract's sentences). All four metrics are
// precision, recall and F1, micro-averaged over claims (counts summed over all claims, then
// divided), fractions in [0, 1]:
//
//   - Abstract-level (units: abstracts). Retrieved = predicted abstracts; relevant = gold
//     evidence abstracts. A predicted abstract is correct for Label-Only when it is a gold
//     evidence abstract of the claim and its label equals the gold label; for Label+Rationale
//     ("abstract_rationalized") it must in addition contain some whole gold evidence set among
//     its first SciFactMaxAbstractSents predicted sentences, in the order given (later ones are
//     ignored, as in FEVER).
//   - Sentence-level (units: rationale sentences). Retrieved = all predicted sentences (no cap);
//     relevant = all sentences of all gold evidence sets. A predicted sentence is correct for
//     Selection-Only when its abstract is a gold evidence abstract, it belongs to a gold
//     evidence set and that whole set is among the abstract's predicted sentences; for
//     Selection+Label the abstract's predicted label must also equal the gold label.
//
// Precision = correct / retrieved, recall = correct / relevant, F1 = 2PR / (P + R); a zero
// denominator gives 0 (the official safe_divide), so a system that predicts nothing scores
// P = R = F1 = 0.

// SciFactMaxAbstractSents is the official MAX_ABSTRACT_SENTS: the number of predicted rationale
// sentences per abstract, first in the order given, that the abstract-level Label+Rationale
// metric looks at.
const SciFactMaxAbstractSents = 3

// SciFactMaxFileBytes bounds the size of a claims or predictions file the readers accept
// (the full SciFact train claims are 153 KB).
const SciFactMaxFileBytes = 64 << 20

// VerifyLabel is a SciFact verification label of a (claim, abstract) pair.
type VerifyLabel string

// The two labels a gold evidence abstract or a prediction may carry. NOT ENOUGH INFO is not a
// label here: it is the absence of an abstract.
const (
	Support    VerifyLabel = "SUPPORT"
	Contradict VerifyLabel = "CONTRADICT"
)

// SciFactGoldAbstract is one gold evidence abstract of a claim: its label and its evidence
// sets, each a minimal set of rationale sentence indices (disjoint, none empty).
type SciFactGoldAbstract struct {
	Label VerifyLabel
	Sets  [][]int
}

// SciFactClaim is a gold claim: its id and evidence abstracts by doc id (empty: NEI).
type SciFactClaim struct {
	ID       int
	Evidence map[int]SciFactGoldAbstract
}

// SciFactPredAbstract is one predicted abstract: a label and rationale sentence indices in the
// system's order (distinct, non-negative).
type SciFactPredAbstract struct {
	Label     VerifyLabel
	Sentences []int
}

// SciFactPrediction is a system's output for one claim: predicted abstracts by doc id (empty:
// no evidence found).
type SciFactPrediction struct {
	ID       int
	Evidence map[int]SciFactPredAbstract
}

// PRF is precision, recall and F1, each in [0, 1], with the counts they come from.
type PRF struct {
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	F1        float64 `json:"f1"`
	Correct   int     `json:"correct"`
	Retrieved int     `json:"retrieved"`
	Relevant  int     `json:"relevant"`
}

// SciFactMetrics holds the four official metrics; the JSON names are those of the official
// script's output.
type SciFactMetrics struct {
	AbstractLabelOnly    PRF `json:"abstract_label_only"`
	AbstractRationalized PRF `json:"abstract_rationalized"`
	SentenceSelection    PRF `json:"sentence_selection"`
	SentenceLabel        PRF `json:"sentence_label"`
	Claims               int `json:"claims"`
}

func newPRF(correct, retrieved, relevant int) PRF {
	div := func(n, d float64) float64 {
		if d == 0 {
			return 0
		}
		return n / d
	}
	p := div(float64(correct), float64(retrieved))
	r := div(float64(correct), float64(relevant))
	return PRF{Precision: p, Recall: r, F1: div(2*p*r, p+r), Correct: correct, Retrieved: retrieved, Relevant: relevant}
}

// ScoreSciFact computes the four metrics of preds against gold. Every gold claim must have
// exactly one prediction and every prediction a gold claim (the official script counts the
// gold evidence of predicted claims only, so a missing claim would silently raise the scores);
// labels must be Support or Contradict and sentence indices distinct and non-negative. Either
// file's readers (ReadSciFactGold, ReadSciFactPredictions) check all of this with file and line.
func ScoreSciFact(gold []SciFactClaim, preds []SciFactPrediction) (SciFactMetrics, error) {
	byID := make(map[int]*SciFactClaim, len(gold))
	for i := range gold {
		if _, dup := byID[gold[i].ID]; dup {
			return SciFactMetrics{}, fmt.Errorf("eval: SciFact: gold claim %d appears twice", gold[i].ID)
		}
		if err := checkGoldClaim(&gold[i]); err != nil {
			return SciFactMetrics{}, fmt.Errorf("eval: SciFact: gold claim %d: %w", gold[i].ID, err)
		}
		byID[gold[i].ID] = &gold[i]
	}
	seen := make(map[int]bool, len(preds))
	var absRel, absRet, absLabel, absRat int
	var senRel, senRet, senSel, senLabel int
	for _, p := range preds {
		g, ok := byID[p.ID]
		if !ok {
			return SciFactMetrics{}, fmt.Errorf("eval: SciFact: prediction for claim %d, not a gold claim", p.ID)
		}
		if seen[p.ID] {
			return SciFactMetrics{}, fmt.Errorf("eval: SciFact: claim %d predicted twice", p.ID)
		}
		seen[p.ID] = true
		absRel += len(g.Evidence)
		for _, ga := range g.Evidence {
			for _, s := range ga.Sets {
				senRel += len(s)
			}
		}
		for doc, pa := range p.Evidence {
			if err := checkPredAbstract(pa); err != nil {
				return SciFactMetrics{}, fmt.Errorf("eval: SciFact: claim %d doc %d: %w", p.ID, doc, err)
			}
			absRet++
			senRet += len(pa.Sentences)
			ga, isGold := g.Evidence[doc]
			if !isGold {
				continue
			}
			labelOK := pa.Label == ga.Label
			// Abstract level: the label, and a whole gold set among the first 3 sentences.
			if labelOK {
				absLabel++
				first := pa.Sentences[:min(len(pa.Sentences), SciFactMaxAbstractSents)]
				for _, set := range ga.Sets {
					if subset(set, first) {
						absRat++
						break
					}
				}
			}
			// Sentence level: a sentence counts when its whole gold set is predicted.
			n := 0
			for _, s := range pa.Sentences {
				for _, set := range ga.Sets {
					if slices.Contains(set, s) {
						if subset(set, pa.Sentences) {
							n++
						}
						break // sets are disjoint
					}
				}
			}
			senSel += n
			if labelOK {
				senLabel += n
			}
		}
	}
	if len(seen) != len(byID) {
		var missing []int
		for id := range byID {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
		slices.Sort(missing)
		return SciFactMetrics{}, fmt.Errorf("eval: SciFact: %d gold claims have no prediction (first: %d); write an empty evidence object for a claim with none",
			len(missing), missing[0])
	}
	return SciFactMetrics{
		AbstractLabelOnly:    newPRF(absLabel, absRet, absRel),
		AbstractRationalized: newPRF(absRat, absRet, absRel),
		SentenceSelection:    newPRF(senSel, senRet, senRel),
		SentenceLabel:        newPRF(senLabel, senRet, senRel),
		Claims:               len(preds),
	}, nil
}

// subset reports whether every element of set is in of.
func subset(set, of []int) bool {
	for _, s := range set {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}

func checkLabel(l VerifyLabel) error {
	if l != Support && l != Contradict {
		return fmt.Errorf("label %q is not SUPPORT or CONTRADICT (NOT ENOUGH INFO: leave the abstract out)", string(l))
	}
	return nil
}

// checkSentences: non-negative and distinct.
func checkSentences(ss []int) error {
	for i, s := range ss {
		if s < 0 {
			return fmt.Errorf("sentence index %d is negative", s)
		}
		if slices.Contains(ss[:i], s) {
			return fmt.Errorf("sentence index %d appears twice", s)
		}
	}
	return nil
}

func checkPredAbstract(pa SciFactPredAbstract) error {
	if err := checkLabel(pa.Label); err != nil {
		return err
	}
	if err := checkSentences(pa.Sentences); err != nil {
		return fmt.Errorf("sentences: %w", err)
	}
	return nil
}

func checkGoldClaim(c *SciFactClaim) error {
	for doc, ga := range c.Evidence {
		if doc < 0 {
			return fmt.Errorf("doc id %d is negative", doc)
		}
		if err := checkLabel(ga.Label); err != nil {
			return fmt.Errorf("doc %d: %w", doc, err)
		}
		if len(ga.Sets) == 0 {
			return fmt.Errorf("doc %d: no evidence set", doc)
		}
		var all []int
		for _, s := range ga.Sets {
			if len(s) == 0 {
				return fmt.Errorf("doc %d: an empty evidence set", doc)
			}
			all = append(all, s...)
		}
		// Distinct across sets: the official scorer asserts a sentence is in at most one set.
		if err := checkSentences(all); err != nil {
			return fmt.Errorf("doc %d: evidence sets: %w", doc, err)
		}
	}
	return nil
}

// ReadSciFactGold reads gold claims in SciFact's layout, one JSON object per line (blank lines
// skipped):
//
//	{"id": int, "claim": str, "evidence": {"<doc_id>": [{"sentences": [int, ...], "label": "SUPPORT"|"CONTRADICT"}, ...]}, "cited_doc_ids": [int, ...]}
//
// All evidence sets of one abstract must carry the same label (the official reader raises
// otherwise). The file must be a regular file of at most SciFactMaxFileBytes; a malformed line,
// an unknown field, a duplicate claim id or doc id, a bad label, an empty, negative or repeated
// sentence index fails with the file, line and field.
func ReadSciFactGold(path string) ([]SciFactClaim, error) {
	type set struct {
		Sentences *[]int      `json:"sentences"`
		Label     VerifyLabel `json:"label"`
	}
	type line struct {
		ID          *int            `json:"id"`
		Claim       string          `json:"claim"`
		Evidence    json.RawMessage `json:"evidence"`
		CitedDocIDs []int           `json:"cited_doc_ids"`
	}
	var out []SciFactClaim
	err := readClaimLines(path, func(l *line) *int { return l.ID }, func(l *line, id int) error {
		c := SciFactClaim{ID: id, Evidence: map[int]SciFactGoldAbstract{}}
		err := docObject(l.Evidence, func(doc int, raw json.RawMessage) error {
			var sets []set
			if err := strictUnmarshal(raw, &sets); err != nil {
				return err
			}
			var ga SciFactGoldAbstract
			for i, s := range sets {
				if s.Sentences == nil {
					return fmt.Errorf("set %d: field sentences missing", i)
				}
				if i > 0 && s.Label != ga.Label {
					return fmt.Errorf("set %d: label %q differs from set 0's %q (one label per abstract)", i, s.Label, ga.Label)
				}
				ga.Label = s.Label
				ga.Sets = append(ga.Sets, *s.Sentences)
			}
			c.Evidence[doc] = ga
			return nil
		})
		if err != nil {
			return fmt.Errorf("evidence: %w", err)
		}
		if err := checkGoldClaim(&c); err != nil {
			return fmt.Errorf("evidence: %w", err)
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// ReadSciFactPredictions reads SciFact-format predictions, one JSON object per claim per line
// (blank lines skipped):
//
//	{"id": int, "evidence": {"<doc_id>": {"sentences": [int, ...], "label": "SUPPORT"|"CONTRADICT"}}}
//
// When gold is not nil each id must be one of its claims. The file must be a regular file of at
// most SciFactMaxFileBytes; a malformed line, an unknown or missing field, a duplicate claim id
// or doc id, a label other than SUPPORT or CONTRADICT, a negative or repeated sentence index
// fails with the file, line and field. ScoreSciFact further requires one line per gold claim.
func ReadSciFactPredictions(path string, gold []SciFactClaim) ([]SciFactPrediction, error) {
	type abs struct {
		Sentences *[]int       `json:"sentences"`
		Label     *VerifyLabel `json:"label"`
	}
	type line struct {
		ID       *int            `json:"id"`
		Evidence json.RawMessage `json:"evidence"`
	}
	known := map[int]bool{}
	for _, c := range gold {
		known[c.ID] = true
	}
	var out []SciFactPrediction
	err := readClaimLines(path, func(l *line) *int { return l.ID }, func(l *line, id int) error {
		if gold != nil && !known[id] {
			return fmt.Errorf("id: claim %d is not a gold claim", id)
		}
		p := SciFactPrediction{ID: id, Evidence: map[int]SciFactPredAbstract{}}
		err := docObject(l.Evidence, func(doc int, raw json.RawMessage) error {
			var a abs
			if err := strictUnmarshal(raw, &a); err != nil {
				return err
			}
			if a.Label == nil {
				return fmt.Errorf("field label missing")
			}
			if a.Sentences == nil {
				return fmt.Errorf("field sentences missing")
			}
			pa := SciFactPredAbstract{Label: *a.Label, Sentences: *a.Sentences}
			if err := checkPredAbstract(pa); err != nil {
				return err
			}
			p.Evidence[doc] = pa
			return nil
		})
		if err != nil {
			return fmt.Errorf("evidence: %w", err)
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// readClaimLines reads path's lines strictly as T (readJSONLines, strictUnmarshal), each with
// a claim id (id gives its field) present and unique in the file, and calls f on each.
func readClaimLines[T any](path string, id func(*T) *int, f func(l *T, id int) error) error {
	lines := map[int]int{}
	return readJSONLines(path, func(n int, b []byte) error {
		var l T
		if err := strictUnmarshal(b, &l); err != nil {
			return err
		}
		p := id(&l)
		if p == nil {
			return fmt.Errorf("field id missing")
		}
		if prev, dup := lines[*p]; dup {
			return fmt.Errorf("id: claim %d already on line %d", *p, prev)
		}
		lines[*p] = n
		return f(&l, *p)
	})
}

// readJSONLines reads a bounded regular file and calls f on each non-blank line, numbered from
// 1; an error of f is prefixed with path:line.
func readJSONLines(path string, f func(n int, line []byte) error) error {
	fh, _, err := bounded.Open(path, SciFactMaxFileBytes)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, SciFactMaxFileBytes+1))
	if err != nil {
		return fmt.Errorf("eval: %s: %w", path, err)
	}
	if len(b) > SciFactMaxFileBytes {
		return fmt.Errorf("eval: %s: over the %d-byte maximum", path, SciFactMaxFileBytes)
	}
	for n := 1; len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := f(n, line); err != nil {
			return fmt.Errorf("eval: %s:%d: %w", path, n, err)
		}
	}
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// docObject walks a JSON object keyed by doc ids (decimal, non-negative, canonical), calling f
// in file order; a missing object, a bad or duplicate key fails. Errors name the doc id.
func docObject(raw json.RawMessage, f func(doc int, v json.RawMessage) error) error {
	if len(raw) == 0 {
		return fmt.Errorf("field missing")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("not a JSON object")
	}
	seen := map[int]bool{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return err
		}
		key := t.(string) // object keys are strings
		doc, err := strconv.Atoi(key)
		if err != nil || doc < 0 || strconv.Itoa(doc) != key {
			return fmt.Errorf("doc id %q is not a non-negative decimal integer", key)
		}
		if seen[doc] {
			return fmt.Errorf("doc %d appears twice", doc)
		}
		seen[doc] = true
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf("doc %d: %w", doc, err)
		}
		if err := f(doc, v); err != nil {
			return fmt.Errorf("doc %d: %w", doc, err)
		}
	}
	return nil
}
