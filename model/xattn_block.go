package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The decoder layer with a cross-attention sublayer that FiD (fid.go) and RETRO (retro.go) share.

// crossParams adds the cross-attention sublayer's parameters of the layer prefix p:
// "p.ln_x.weight|bias" [H] and "p.xattn.q|k|v|out.weight|bias" ([H,H]|[H]), GPT-2's
// initialisation with out as a residual projection (std 0.02/√(2·layers)).
func (t *Tower) crossParams(r *rand.Rand, p string, hidden, layers int) {
	t.layerNormParams(p+"ln_x", hidden)
	for _, n := range []string{"q", "k", "v"} {
		t.linearParams(r, p+"xattn."+n, hidden, hidden)
	}
	t.param(p+"xattn.out.weight", hidden, hidden).normal(r, 0.02/math.Sqrt(2*float64(layers)))
	t.param(p+"xattn.out.bias", hidden).constant(0)
}

// newEncDec builds an encoder-decoder pair's towers from one init stream of seed: the decoder
// (prefix+".decoder", dec) with a cross-attention sublayer (crossParams) in layers from.., then
// the encoder (prefix+".encoder", enc made bidirectional) reading the decoder's word embedding;
// rng is their dropout source, seeded from seed until SetRNG.
func newEncDec(prefix string, dec, enc EncoderConfig, from int, seed uint64, dt tensor.Dtype) (d, e *Tower, rng *RNG) {
	rng = &RNG{R: rand.New(rand.NewPCG(seed, streamDropout))}
	r := rand.New(rand.NewPCG(seed, streamInit))
	d = newTower(prefix+".decoder", dec, r, rng, dt)
	for i := from; i < dec.Layers; i++ {
		d.crossParams(r, fmt.Sprintf("layer.%d.", i), dec.Hidden, dec.Layers)
	}
	enc.Causal = false
	e = newTower(prefix+".encoder", enc, r, rng, dt)
	e.shareWord(d)
	return d, e, rng
}

// rerun lets the machine run the graph again and returns the value of states.
func rerun(vm gorgonia.VM, states *gorgonia.Node) (gorgonia.Value, error) {
	vm.Reset()
	if err := vm.RunAll(); err != nil {
		return nil, err
	}
	return states.Value(), nil
}

// letEncDec writes the memory mask mm into memMask and lets in the encoder's and the decoder's
// ids and masks.
func letEncDec(memMask *tensor.Dense, mm []float64, enc *Inputs, encIDs []int, encMask []float32, dec *Inputs, decIDs []int, decMask []float32) error {
	switch d := memMask.Data().(type) {
	case []float32:
		for i, v := range mm {
			d[i] = float32(v)
		}
	case []float64:
		copy(d, mm)
	}
	if err := enc.Let(encIDs, encMask, nil); err != nil {
		return err
	}
	return dec.Let(decIDs, decMask, nil)
}

// shareWord makes t read its word embedding from dec's (removing its own from its parameters).
func (t *Tower) shareWord(dec *Tower) {
	word := t.byName["embeddings.word"]
	t.byName["embeddings.word"] = dec.byName["embeddings.word"]
	for i, p := range t.params {
		if p == word {
			t.params = append(t.params[:i], t.params[i+1:]...)
			break
		}
	}
}

// crossAttend is the cross-attention of the queries h over the memory mem with mask memMask
// (layer prefix p): CrossAttention(h·Wqᵀ, mem·Wkᵀ, mem·Wvᵀ)·Woᵀ, biases included.
func (t *Tower) crossAttend(b *Binder, h, mem, memMask *gorgonia.Node, p string, xo CrossAttentionOptions) (*gorgonia.Node, error) {
	q, err := t.linear(b, h, p+"xattn.q")
	if err != nil {
		return nil, err
	}
	k, err := t.linear(b, mem, p+"xattn.k")
	if err != nil {
		return nil, err
	}
	v, err := t.linear(b, mem, p+"xattn.v")
	if err != nil {
		return nil, err
	}
	a, err := CrossAttention(q, k, v, memMask, xo)
	if err != nil {
		return nil, err
	}
	return t.linear(b, a, p+"xattn.out")
}

// crossBlock is one pre-LN decoder layer with a cross-attention sublayer between
// self-attention and the FFN (Vaswani et al. 2017 section 3.1):
//
//	a = x + Dropout(SelfAttention(LN₁(x)))
//	c = a + Dropout(cross(LN_x(a)))
//	x = c + Dropout(FFN(LN₂(c)))
//
// With cross nil it is GPT-2's block (c = a; gpt2Block).
func (t *Tower) crossBlock(b *Binder, in *Inputs, x *gorgonia.Node, p string, train bool, cross func(h *gorgonia.Node) (*gorgonia.Node, error)) (*gorgonia.Node, error) {
	h, err := t.gpt2LayerNorm(b, x, p+"ln_1")
	if err != nil {
		return nil, err
	}
	a, err := t.selfAttention(b, in, h, p, train)
	if err != nil {
		return nil, err
	}
	if x, err = Add(x, a); err != nil {
		return nil, err
	}
	if cross != nil {
		if h, err = t.gpt2LayerNorm(b, x, p+"ln_x"); err != nil {
			return nil, err
		}
		if a, err = cross(h); err != nil {
			return nil, err
		}
		if a, err = t.dropout(a, train); err != nil {
			return nil, err
		}
		if x, err = Add(x, a); err != nil {
			return nil, err
		}
	}
	if h, err = t.gpt2LayerNorm(b, x, p+"ln_2"); err != nil {
		return nil, err
	}
	if t.ffnIn != nil && !train {
		*t.ffnIn = append(*t.ffnIn, h)
	}
	if h, err = t.feedForward(b, h, p, train); err != nil {
		return nil, err
	}
	return Add(x, h)
}

// greedyRerun decodes greedily with a graph run whole once per generated token (FiD's and
// RETRO's runners: answers are a few tokens): each of the prompts (at most L tokens; not
// modified) is continued with the most probable token until stop, maxNew tokens or L tokens.
// run(lo, seqs) lets in the batch of prompts lo..lo+len(seqs)-1 with their current tokens seqs
// (len(seqs) <= B), runs the graph and returns its final states [B·L,H]; the logits are the
// states times the tied embedding emb [V,H].
func greedyRerun(prompts [][]int, B, L, maxNew, stop int, emb *tensor.Dense, run func(lo int, seqs [][]int) (gorgonia.Value, error)) ([]Generation, error) {
	if B <= 0 {
		return nil, fmt.Errorf("model: greedy: batch %d", B)
	}
	res := make([]Generation, len(prompts))
	V, h := emb.Shape()[0], emb.Shape()[1]
	sel, logits := make([]float64, h), make([]float64, V)
	for lo := 0; lo < len(prompts); lo += B {
		seqs := make([][]int, min(B, len(prompts)-lo))
		active := make([]bool, len(seqs))
		for i := range seqs {
			seqs[i] = append([]int(nil), prompts[lo+i]...)
			active[i] = len(seqs[i]) < L
		}
		for step := 0; step < maxNew; step++ {
			states, err := run(lo, seqs)
			if err != nil {
				return nil, err
			}
			running := false
			for i := range seqs {
				if !active[i] {
					continue
				}
				rowLogits(logits, sel, states, (i*L+len(seqs[i])-1)*h, emb)
				best, lp := argmaxLogSoftmax(logits)
				g := &res[lo+i]
				g.LogProb += lp
				if best == stop {
					g.Stopped, active[i] = true, false
					continue
				}
				g.Tokens = append(g.Tokens, best)
				seqs[i] = append(seqs[i], best)
				active[i] = len(seqs[i]) < L
				running = running || active[i]
			}
			if !running {
				break
			}
		}
	}
	return res, nil
}
