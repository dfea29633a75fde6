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

// selfrag is Self-RAG's short-form decoding of one retrieved abstract: the prefix up to the
// passage, then p([Relevant]) from the relevance group; below relThreshold the abstract is
// dropped (abstain). Else [Relevant] is forced, the rationale indices are decoded greedily,
// "\nVerdict:" forced, and the support group read: [Fully supported] -> SUPPORT,
// [Contradicted] -> CONTRADICT, [No support / Contradictory] -> abstain; the emitted label is
// the group's argmax.
func (r *reader) selfrag(claim string, d *Doc) (verdict, error) {
	p, shown := r.f.selfragPrompt(claim, d)
	c, err := r.dec.NewCache(len(p.ids) + reserveTokens + maxNewTokens)
	if err != nil {
		return verdict{}, err
	}
	logits, err := r.feed(c, p.ids)
	if err != nil {
		return verdict{}, err
	}
	rt := r.f.rt
	v := verdict{pRel: groupProbs(logits, rt.relevant, rt.irrelevant)[0]}
	if v.pRel < r.relThreshold {
		return v, nil
	}
	if logits, err = r.feed(c, append(slices.Clone(rt.relevant), r.f.rationale...)); err != nil {
		return v, err
	}
	gen, err := r.greedy(c, logits)
	if err != nil {
		return v, err
	}
	if logits, err = r.feed(c, r.f.verdict); err != nil {
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
	v.text = r.f.tok.Decode(gen, true)
	v.sents = parseRationale(v.text, shown)
	return v, nil
}

// plain decodes the plain reader's answer greedily after "Rationale:" (to eos or
// maxNewTokens + 8 tokens) and parses "<indices>\nLabel: <label>"; a label other than SUPPORT
// or CONTRADICT abstains.
func (r *reader) plain(claim string, d *Doc) (verdict, error) {
	p, shown := r.f.plainPrompt(claim, d)
	ids := append(p.ids, r.f.plainRationale...)
	gen, err := r.dec.Generate([][]int{ids}, model.SampleOptions{MaxNew: maxNewTokens + 8, Stop: []int{r.f.tok.EOS()}, Batch: 1})
	if err != nil {
		return verdict{}, err
	}
	v := verdict{text: r.f.tok.Decode(gen[0].Tokens, true)}
	rat, lab, _ := strings.Cut(v.text, "Label:")
	switch strings.TrimSpace(lab) {
	case string(eval.Support):
		v.label = eval.Support
	case string(eval.Contradict):
		v.label = eval.Contradict
	default:
		return v, nil
	}
	v.sents = parseRationale(rat, shown)
	return v, nil
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
