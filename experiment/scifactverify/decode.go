package scifactverify

import (
	"math"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/model"
)

// reader verifies a claim against one abstract with a LoRA-merged LLaMA (model.LlamaDecoder,
// greedy, KV cache).
type reader struct {
	f   *format
	dec *model.LlamaDecoder
	// relThreshold is the Self-RAG reader's p([Relevant]) cut.
	relThreshold float64
}

// verdict is a reader's judgement of one (claim, abstract) pair: a label ("" abstains: NOT
// ENOUGH INFO, no evidence emitted), rationale sentences, and the Self-RAG reader's
// reflection-token probabilities (each normalised over its group).
type verdict struct {
	label                     eval.VerifyLabel
	sents                     []int
	pRel, pSup, pCon, pNoSupp float64
	text                      string // the decoded answer (rationale; the plain reader's label too)
	// window is the passage judged (Self-RAG: the most relevant; plain: the first that gave the
	// label, else the first) of the abstract's passages
	window, passages int
}

// groupProbs is the softmax of the logits restricted to the first tokens of the group's words.
func groupProbs(logits []float32, words ...[]int) []float64 {
	out := make([]float64, len(words))
	mx := math.Inf(-1)
	for _, w := range words {
		mx = max(mx, float64(logits[w[0]]))
	}
	var z float64
	for i, w := range words {
		out[i] = math.Exp(float64(logits[w[0]]) - mx)
		z += out[i]
	}
	for i := range out {
		out[i] /= z
	}
	return out
}

// feed appends toks to the cache and returns the next token's logits.
func (r *reader) feed(c *model.LlamaCache, toks []int) ([]float32, error) {
	out, err := r.dec.Forward([]*model.LlamaCache{c}, [][]int{toks}, false)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// greedy continues from logits for at most maxNewTokens tokens, stopping before eos or before
// a token whose text holds a line break; it returns the tokens and the logits after the last.
func (r *reader) greedy(c *model.LlamaCache, logits []float32) ([]int, error) {
	var out []int
	for len(out) < maxNewTokens {
		id := argmax(logits)
		if id == r.f.tok.EOS() {
			break
		}
		if strings.Contains(r.f.tok.Decode([]int{id}, false), "\n") {
			break
		}
		out = append(out, id)
		var err error
		if logits, err = r.feed(c, []int{id}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// selfrag is Self-RAG's short-form decoding of one retrieved abstract, read as its passages
// (format.windows): each passage's prefix up to the relevance token gives p([Relevant]) from the
// relevance group, and the abstract is judged on its most relevant passage. Below relThreshold
// the abstract is dropped (abstain). Else [Relevant] is forced after that passage, the rationale
// indices are decoded greedily, "\nVerdict:" forced, and the support group read: [Fully
// supported] -> SUPPORT, [Contradicted] -> CONTRADICT, [No support / Contradictory] ->
// abstain; the emitted label is the group's argmax.
func (r *reader) selfrag(claim string, d *Doc) (verdict, error) {
	ws := r.f.windows(d)
	rt := r.f.rt
	var v verdict
	var best *model.LlamaCache
	for i, w := range ws {
		p := r.f.selfragPrompt(claim, d, w)
		c, err := r.dec.NewCache(len(p.ids) + reserveTokens + maxNewTokens)
		if err != nil {
			return verdict{}, err
		}
		logits, err := r.feed(c, p.ids)
		if err != nil {
			return verdict{}, err
		}
		if pRel := groupProbs(logits, rt.relevant, rt.irrelevant)[0]; best == nil || pRel > v.pRel {
			v.pRel, v.window, best = pRel, i, c
		}
	}
	v.passages = len(ws)
	if v.pRel < r.relThreshold {
		return v, nil
	}
	logits, err := r.feed(best, append(slices.Clone(rt.relevant), r.f.rationale...))
	if err != nil {
		return v, err
	}
	gen, err := r.greedy(best, logits)
	if err != nil {
		return v, err
	}
	if logits, err = r.feed(best, r.f.verdict); err != nil {
		return v, err
	}
	v.text = r.f.tok.Decode(gen, true)
	ps := groupProbs(logits, rt.supported, rt.contradicted, rt.unsupported)
	v.pSup, v.pCon, v.pNoSupp = ps[0], ps[1], ps[2]
	switch {
	case ps[0] >= ps[1] && ps[0] >= ps[2]:
		v.label = eval.Support
	case ps[1] > ps[0] && ps[1] >= ps[2]:
		v.label = eval.Contradict
	default:
		return v, nil
	}
	v.sents = parseRationale(v.text, ws[v.window])
	return v, nil
}

// plain reads each passage of the abstract (format.windows): the answer is decoded greedily
// after "Rationale:" (to eos or maxNewTokens + 8 tokens), and the passages' answers are
// combined (combinePlain).
func (r *reader) plain(claim string, d *Doc) (verdict, error) {
	ws := r.f.windows(d)
	answers := make([]string, len(ws))
	for i, w := range ws {
		ids := append(r.f.plainPrompt(claim, d, w).ids, r.f.plainRationale...)
		gen, err := r.dec.Generate([][]int{ids}, model.SampleOptions{MaxNew: maxNewTokens + 8, Stop: []int{r.f.tok.EOS()}, Batch: 1})
		if err != nil {
			return verdict{}, err
		}
		answers[i] = r.f.tok.Decode(gen[0].Tokens, true)
	}
	return combinePlain(answers, ws), nil
}

// combinePlain judges an abstract from the plain reader's answers on its passages ws, each
// parsed as "<indices>\nLabel: <label>" (a label other than SUPPORT or CONTRADICT abstains on
// that passage): the abstract's label is the first passage's that does not abstain, its
// rationale the sentences of every passage giving that label (in passage order); it abstains
// when every passage does. The verdict's text and window are that first passage's (else the
// first passage's).
func combinePlain(answers []string, ws []window) verdict {
	v := verdict{passages: len(ws)}
	for i, text := range answers {
		rat, lab, _ := strings.Cut(text, "Label:")
		var got eval.VerifyLabel
		switch strings.TrimSpace(lab) {
		case string(eval.Support):
			got = eval.Support
		case string(eval.Contradict):
			got = eval.Contradict
		}
		if i == 0 || (v.label == "" && got != "") {
			v.text, v.window = text, i
		}
		if got == "" || (v.label != "" && got != v.label) {
			continue
		}
		v.label = got
		for _, s := range parseRationale(rat, ws[i]) {
			if !slices.Contains(v.sents, s) {
				v.sents = append(v.sents, s)
			}
		}
	}
	return v
}

// closedBook asks the instruct model, with its chat template and no abstract, whether the claim
// is true, and reads p(True) against p(False) at the answer's first token: SUPPORT when
// p(True) >= p(False), else CONTRADICT (it never abstains).
func (r *reader) closedBook(claim string) (eval.VerifyLabel, error) {
	tok := r.f.tok
	prompt := tok.Encode(tok.ChatPrompt("Is the following scientific claim true or false? Answer with one word, True or False.\nClaim: " + claim))
	c, err := r.dec.NewCache(len(prompt) + 1)
	if err != nil {
		return "", err
	}
	logits, err := r.feed(c, prompt)
	if err != nil {
		return "", err
	}
	if p := groupProbs(logits, tok.Encode("True"), tok.Encode("False")); p[0] >= p[1] {
		return eval.Support, nil
	}
	return eval.Contradict, nil
}
