package scifactverify

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Sequence layout bounds, in tokens: the claim is cut to claimTokens; reserveTokens are kept
// for the answer (reflection tokens, rationale indices, verdict, eos) after the abstract.
const (
	claimTokens   = 48
	reserveTokens = 40
	// maxRationale is the most rationale indices a training target lists (gold sets' union,
	// in order); a decoded answer is cut at maxNewTokens.
	maxRationale = 6
	maxNewTokens = 24
)

// Self-RAG's reflection tokens (Asai et al., "Self-RAG: Learning to Retrieve, Generate, and
// Critique through Self-Reflection", ICLR 2024, Table 1), as this reader uses them, each mapped
// onto an existing word of the LM's vocabulary (SmolLM2: one token each) rather than added as
// new rows: with LoRA the embeddings and the tied LM head stay frozen, so a new row would keep
// its initial vector, whose logit could be learned only through the adapters; a word's
// pretrained row already means what the token says. A reflection token is scored by the
// probability of its word's first token at its position, normalised over its group (the
// groups' first tokens are distinct: checked).
//
//	Self-RAG token              word            SciFact meaning (the annotation plays the critic)
//	[Retrieval]                 " retrieve"     always: every claim is verified against the literature
//	[Relevant]                  " relevant"     the abstract is one of the claim's gold evidence abstracts
//	[Irrelevant]                " irrelevant"   it is not (NEI for this abstract)
//	[Fully supported]           " supported"    gold label SUPPORT
//	[Contradicted] (new)        " contradicts"  gold label CONTRADICT (Self-RAG folds it into the next)
//	[No support / Contradictory]" insufficient" no gold label: NOT ENOUGH INFO
//
// Self-RAG's [No Retrieval], [Partially supported] and [Utility:1-5] have no SciFact
// annotation and are not used.
var reflectionWords = struct{ retrieve, relevant, irrelevant, supported, contradicted, unsupported string }{
	" retrieve", " relevant", " irrelevant", " supported", " contradicts", " insufficient"}

// reflection holds the reflection words' token ids.
type reflection struct {
	retrieve, relevant, irrelevant, supported, contradicted, unsupported []int
}

// format lays out the readers' sequences with one tokenizer.
type format struct {
	tok       *tokenize.GGUFTokenizer
	rt        reflection
	abstract  int // the abstract's token budget (abstract_tokens)
	maxLength int
	// the fixed pieces
	rationale, verdict, label, plainRationale []int
	cut                                       truncation // what claim and windows cut since the last report
}

// truncation counts what the sequence layout cut, each claim text and each abstract once: the
// claims longer than claimTokens, and the abstracts over abstract_tokens, with the passages
// they were read as (format.windows: every sentence is shown, in one passage) and the sentences
// cut (one that alone does not fit a passage is shown in part; a title cut to half the budget
// counts the abstract only).
type truncation struct {
	claims, cutClaims       map[string]bool
	abstracts, cutAbstracts map[int]bool
	passages, sentsCut      int
}

// report writes one line of what was cut since the last report, under what, and starts
// counting anew; it returns the line (without "what: "), empty when nothing was read.
func (t *truncation) report(out io.Writer, what string) string {
	if len(t.claims) == 0 && len(t.abstracts) == 0 {
		return ""
	}
	line := fmt.Sprintf("truncation: claims cut to %d tokens %d of %d; abstracts over abstract_tokens %d of %d (read as %d passages, %d sentences cut)",
		claimTokens, len(t.cutClaims), len(t.claims), len(t.cutAbstracts), len(t.abstracts), t.passages, t.sentsCut)
	fmt.Fprintf(out, "%s: %s\n", what, line)
	*t = truncation{}
	return line
}

// claimRead records a claim and whether it was cut.
func (t *truncation) claimRead(text string, cut bool) {
	if t.claims == nil {
		t.claims, t.cutClaims = map[string]bool{}, map[string]bool{}
	}
	t.claims[text] = true
	if cut {
		t.cutClaims[text] = true
	}
}

// abstractRead records an abstract read as passages windows, with sentsCut sentences shown in
// part and whether its title line was cut.
func (t *truncation) abstractRead(d *Doc, passages, sentsCut int, cutTitle bool) {
	if t.abstracts == nil {
		t.abstracts, t.cutAbstracts = map[int]bool{}, map[int]bool{}
	}
	if t.abstracts[d.ID] {
		return
	}
	t.abstracts[d.ID] = true
	if passages > 1 || sentsCut > 0 || cutTitle {
		t.cutAbstracts[d.ID] = true
		t.passages += passages
		t.sentsCut += sentsCut
	}
}

func newFormat(tok *tokenize.GGUFTokenizer, abstractTokens, maxLength int) (*format, error) {
	enc := func(s string) ([]int, error) {
		ids := tok.Encode(s)
		if len(ids) == 0 {
			return nil, fmt.Errorf("scifact_verify: %q encodes to no tokens", s)
		}
		return ids, nil
	}
	f := &format{tok: tok, abstract: abstractTokens, maxLength: maxLength}
	w := reflectionWords
	for _, p := range []struct {
		dst  *[]int
		word string
	}{{&f.rt.retrieve, w.retrieve}, {&f.rt.relevant, w.relevant}, {&f.rt.irrelevant, w.irrelevant},
		{&f.rt.supported, w.supported}, {&f.rt.contradicted, w.contradicted}, {&f.rt.unsupported, w.unsupported},
		{&f.rationale, "\nRationale:"}, {&f.verdict, "\nVerdict:"}, {&f.label, "\nLabel:"}, {&f.plainRationale, "Rationale:"}} {
		var err error
		if *p.dst, err = enc(p.word); err != nil {
			return nil, err
		}
	}
	if f.rt.relevant[0] == f.rt.irrelevant[0] || f.rt.supported[0] == f.rt.contradicted[0] ||
		f.rt.supported[0] == f.rt.unsupported[0] || f.rt.contradicted[0] == f.rt.unsupported[0] {
		return nil, fmt.Errorf("scifact_verify: the tokenizer gives two reflection words of one group the same first token")
	}
	return f, nil
}

// claim is "Claim: <claim>\n", the claim cut to claimTokens.
func (f *format) claim(text string) []int {
	ids := f.tok.Encode("Claim: " + text)
	f.cut.claimRead(text, len(ids) > claimTokens)
	ids = ids[:min(len(ids), claimTokens)]
	return append(ids, f.tok.Encode("\n")...)
}

// window is one passage of an abstract: its sentences from .. to-1.
type window struct{ from, to int }

// holds reports whether sentence i is in the window.
func (w window) holds(i int) bool { return i >= w.from && i < w.to }

// titleLine is "Abstract: <title>\n", cut to half the abstract budget; it reports the cut.
func (f *format) titleLine(d *Doc) ([]int, bool) {
	ids := f.tok.Encode("Abstract: " + d.Title + "\n")
	return ids[:min(len(ids), f.abstract/2)], len(ids) > f.abstract/2
}

// sentence is "(i) <sentence i>\n".
func (f *format) sentence(d *Doc, i int) []int {
	return f.tok.Encode("(" + strconv.Itoa(i) + ") " + d.Sents[i] + "\n")
}

// windows partitions d's sentences, in order, into the passages a reader reads one at a time
// (Self-RAG's retrieved passages; Asai et al. read 100-word chunks): each is the title line and
// whole sentences while they fit abstract_tokens; a sentence that alone does not fit is a passage
// of its own, cut. An abstract with no sentences is one passage of its title.
func (f *format) windows(d *Doc) []window {
	title, cutTitle := f.titleLine(d)
	var out []window
	cut := 0
	from := 0
	for {
		n, to := len(title), from
		for to < len(d.Sents) {
			l := len(f.sentence(d, to))
			if n+l > f.abstract {
				if to == from {
					to, cut = to+1, cut+1
				}
				break
			}
			n, to = n+l, to+1
		}
		out = append(out, window{from, to})
		if from = to; from >= len(d.Sents) {
			break
		}
	}
	f.cut.abstractRead(d, len(out), cut, cutTitle)
	return out
}

// passage is "Abstract: <title>\n(i) <sentence i>\n..." for the sentences of window w, at most
// abstract_tokens tokens (a sentence that alone does not fit is cut).
func (f *format) passage(d *Doc, w window) []int {
	ids, _ := f.titleLine(d)
	for i := w.from; i < w.to; i++ {
		t := f.sentence(d, i)
		ids = append(ids, t[:min(len(t), f.abstract-len(ids))]...)
	}
	return ids
}

// seq is a token sequence and which of its tokens are targets of the loss.
type seq struct {
	ids  []int
	loss []bool
}

func (s *seq) add(ids []int, loss bool) {
	s.ids = append(s.ids, ids...)
	for range ids {
		s.loss = append(s.loss, loss)
	}
}

// gold is a (claim, abstract) pair's annotation: its label ("" for NEI) and rationale.
type gold struct {
	label eval.VerifyLabel
	sents []int
}

// goldOf is the annotation of doc for a claim: the union of its evidence sets, in order.
func goldOf(g eval.SciFactClaim, doc int) gold {
	ga, ok := g.Evidence[doc]
	if !ok {
		return gold{}
	}
	var s []int
	for _, set := range ga.Sets {
		s = append(s, set...)
	}
	slices.Sort(s)
	return gold{label: ga.Label, sents: slices.Compact(s)}
}

// in is the annotation of passage w: the label and the rationale sentences it holds, or NOT
// ENOUGH INFO when it holds none of them (the evidence is in another passage).
func (g gold) in(w window) gold {
	var s []int
	for _, i := range g.sents {
		if w.holds(i) {
			s = append(s, i)
		}
	}
	if g.label == "" || len(s) == 0 {
		return gold{}
	}
	return gold{label: g.label, sents: s}
}

// rationaleText is " 0, 3" for the sentences among sents in passage w (at most maxRationale),
// or " none".
func rationaleText(sents []int, w window) string {
	var parts []string
	for _, i := range sents {
		if w.holds(i) && len(parts) < maxRationale {
			parts = append(parts, strconv.Itoa(i))
		}
	}
	if len(parts) == 0 {
		return " none"
	}
	return " " + strings.Join(parts, ", ")
}

// selfragPrompt is the Self-RAG reader's prefix up to the relevance token: the claim, the
// retrieval decision, passage w of the abstract.
func (f *format) selfragPrompt(claim string, d *Doc, w window) seq {
	var s seq
	s.add(f.claim(claim), false)
	s.add(f.rt.retrieve, true)
	s.add(f.passage(d, w), false) // the retrieved passage is no target (Self-RAG masks it out of the loss)
	return s
}

// selfragSeq is a Self-RAG training sequence of passage w, annotated g (gold.in):
//
//	Claim: <claim>\n[Retrieval]Abstract: ...\n[Relevant|Irrelevant]\nRationale: 0, 3\nVerdict:[support token]<eos>
//
// with the loss on the reflection tokens and the answer, not on the claim or the abstract.
func (f *format) selfragSeq(claim string, d *Doc, w window, g gold) (seq, error) {
	s := f.selfragPrompt(claim, d, w)
	rel, sup := f.rt.irrelevant, f.rt.unsupported
	switch g.label {
	case eval.Support:
		rel, sup = f.rt.relevant, f.rt.supported
	case eval.Contradict:
		rel, sup = f.rt.relevant, f.rt.contradicted
	}
	s.add(rel, true)
	s.add(f.rationale, true)
	s.add(f.tok.Encode(rationaleText(g.sents, w)), true)
	s.add(f.verdict, true)
	s.add(sup, true)
	s.add([]int{f.tok.EOS()}, true)
	return s, f.fits(s)
}

// plainPrompt is the plain reader's prefix: the claim and passage w of the abstract.
func (f *format) plainPrompt(claim string, d *Doc, w window) seq {
	var s seq
	s.add(f.claim(claim), false)
	s.add(f.passage(d, w), false)
	return s
}

// plainLabels are the plain reader's label words.
var plainLabels = map[eval.VerifyLabel]string{eval.Support: " SUPPORT", eval.Contradict: " CONTRADICT", "": " NOT ENOUGH INFO"}

// plainSeq is a plain reader's training sequence of passage w, annotated g, no reflection tokens:
//
//	Claim: <claim>\nAbstract: ...\nRationale: 0, 3\nLabel: SUPPORT|CONTRADICT|NOT ENOUGH INFO<eos>
func (f *format) plainSeq(claim string, d *Doc, w window, g gold) (seq, error) {
	s := f.plainPrompt(claim, d, w)
	s.add(f.plainRationale, true) // the abstract ends in "\n"
	s.add(f.tok.Encode(rationaleText(g.sents, w)), true)
	s.add(f.label, true)
	s.add(f.tok.Encode(plainLabels[g.label]), true)
	s.add([]int{f.tok.EOS()}, true)
	return s, f.fits(s)
}

func (f *format) fits(s seq) error {
	if len(s.ids) > f.maxLength {
		return fmt.Errorf("scifact_verify: a sequence of %d tokens exceeds max_length = %d", len(s.ids), f.maxLength)
	}
	return nil
}

var digits = regexp.MustCompile(`\d+`)

// parseRationale reads the sentence indices of a decoded answer: the integers of its text in
// passage w, distinct, in order.
func parseRationale(text string, w window) []int {
	var out []int
	for _, m := range digits.FindAllString(text, -1) {
		i, err := strconv.Atoi(m)
		if err == nil && w.holds(i) && !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	return out
}
