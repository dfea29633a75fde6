package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// PrefixReader is the prefix of the reader's parameter names
// ("reader.embeddings.word", "reader.layer.0.attn.q.weight", ...).
const PrefixReader = "reader"

// Reader is a decoder-only causal Transformer language model with GPT-2's
// architecture (Radford et al. 2019; gpt2.go: pre-LN blocks, a final
// LayerNorm, word + position embeddings, causal attention: position t
// attends to positions <= t only), whose final token states are scored
// against the word embedding matrix itself (tied input and output
// embeddings, Press and Wolf 2017), as transformers' GPT2LMHeadModel does:
//
//	log p(x_{t+1} | x_<=t) = log softmax(h_t · Eᵀ)[x_{t+1}],  h = Tower(x) [B*L,H], E [V,H]
//
// It has no parameters besides the tower's (prefix "reader", the names and
// shapes of the GPT-2 table in gpt2.go; the tied matrix is
// "reader.embeddings.word"), so a checkpoint of a reader is a checkpoint of
// one GPT-2 tower and exports to GPT2LMHeadModel (package export). Trained
// as a language model, then fine-tuned as a reader on "<ctx> passages
// </ctx> question answer" with the loss on the answer tokens only (the
// experiment package builds the sequences; losses.TokenNLL is the loss).
type Reader struct {
	Cfg   EncoderConfig
	Tower *Tower

	rng *RNG
}

// NewReader validates cfg (a transformer; Causal and Arch = "gpt2" are set
// whatever cfg says) and initialises the float32 parameters from seed, as NewBiEncoder does for
// one tower. Dropout masks come from a PCG seeded with seed until SetRNG
// replaces it.
func NewReader(cfg EncoderConfig, seed uint64) (*Reader, error) {
	return newReader(cfg, seed, tensor.Float32)
}

func newReader(cfg EncoderConfig, seed uint64, dt tensor.Dtype) (*Reader, error) {
	if cfg.Encoder != EncoderTransformer {
		return nil, fmt.Errorf("model: reader: encoder = %q, want %q", cfg.Encoder, EncoderTransformer)
	}
	cfg.Causal, cfg.Arch = true, ArchGPT2
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Reader{Cfg: cfg, rng: &RNG{R: rand.New(rand.NewPCG(seed, streamDropout))}}
	r.Tower = newTower(PrefixReader, cfg, rand.New(rand.NewPCG(seed, streamInit)), r.rng, dt)
	return r, checkUnique(r.Params())
}

// Params returns the reader's parameters in a fixed order.
func (r *Reader) Params() []*Param { return r.Tower.Params() }

// Param returns the parameter of that checkpoint name, or nil.
func (r *Reader) Param(name string) *Param { return paramNamed(r.Params(), name) }

// SetRNG makes dropout draw its masks from rr in every graph of the reader.
func (r *Reader) SetRNG(rr *rand.Rand) { r.rng.R = rr }

// Vocab is V, the number of token ids.
func (r *Reader) Vocab() int { return r.Cfg.Vocab }

// Targets are the input nodes naming which next tokens a graph scores: M
// entries, entry m asking for log p(tgt[m] | the tokens up to row pos[m]),
// pos[m] a row of the [B*L,H] token states (b*L+t for token t of sequence
// b). pos[m] = -1 marks an unused entry (its log-probability is 0). Like
// Inputs, the nodes are bound to tensors owned by Targets, and Let copies a
// batch in.
type Targets struct {
	Pos, Tgt *gorgonia.Node
	M        int

	pos, tgt []int
}

// NewTargets adds the M-entry target nodes name+".pos" and name+".tgt" to g.
// It panics if M <= 0 or g already has nodes of those names.
func NewTargets(g *gorgonia.ExprGraph, M int, name string) *Targets {
	if M <= 0 {
		panic(fmt.Sprintf("model: NewTargets %q: %d entries", name, M))
	}
	for _, suffix := range []string{".pos", ".tgt"} {
		if len(g.ByName(name+suffix)) > 0 {
			panic(fmt.Sprintf("model: NewTargets: graph already has a node named %q", name+suffix))
		}
	}
	t := &Targets{M: M, pos: make([]int, M), tgt: make([]int, M)}
	pt := tensor.New(tensor.WithShape(M), tensor.WithBacking(t.pos))
	tt := tensor.New(tensor.WithShape(M), tensor.WithBacking(t.tgt))
	t.Pos = gorgonia.NewTensor(g, tensor.Int, 1, gorgonia.WithShape(M), gorgonia.WithValue(pt), gorgonia.WithName(name+".pos"))
	t.Tgt = gorgonia.NewTensor(g, tensor.Int, 1, gorgonia.WithShape(M), gorgonia.WithValue(tt), gorgonia.WithName(name+".tgt"))
	return t
}

// Let copies M positions and target ids in. Ranges are checked when the
// graph runs (LMLogProb).
func (t *Targets) Let(pos, tgt []int) error {
	if len(pos) != t.M || len(tgt) != t.M {
		return fmt.Errorf("model: targets %s: %d positions and %d targets, want %d each", t.Pos.Name(), len(pos), len(tgt), t.M)
	}
	copy(t.pos, pos)
	copy(t.tgt, tgt)
	return nil
}

// BuildLogProbs adds the reader to the binder's graph for the batch in and
// returns the log-probabilities [M] of the targets t (LMLogProb over the
// token states and the tied word embeddings). With train, dropout is active.
func (r *Reader) BuildLogProbs(b *Binder, in *Inputs, t *Targets, train bool) (*gorgonia.Node, error) {
	x, err := r.Tower.BuildTokens(b, in, train)
	if err != nil {
		return nil, err
	}
	return LMLogProb(x, r.Tower.node(b, "embeddings.word"), t.Pos, t.Tgt)
}

// BuildLogProbsAttention is BuildLogProbs for inference (no dropout) that also returns the
// attention probabilities of every layer, each [B,heads,L,L]: p[b,h,i,j] is how much query
// position i of row b attends to key position j in head h (causal and padding-masked; each row
// i sums to 1). The log-probabilities are the same bits as BuildLogProbs'. Read the
// probabilities after the machine runs; they receive no gradient from a loss that does not use
// them (Atlas' attention distillation reads them as a constant teacher).
func (r *Reader) BuildLogProbsAttention(b *Binder, in *Inputs, t *Targets) (*gorgonia.Node, []*gorgonia.Node, error) {
	var probs []*gorgonia.Node
	r.Tower.attnProbs = &probs
	defer func() { r.Tower.attnProbs = nil }()
	lp, err := r.BuildLogProbs(b, in, t, false)
	if err != nil {
		return nil, nil, err
	}
	return lp, probs, nil
}

// Generation is one greedily decoded continuation.
type Generation struct {
	Tokens  []int   // the generated ids, the stop id excluded
	LogProb float64 // log p(Tokens, stop | prompt): the sum of the chosen tokens' log-probabilities
	Stopped bool    // the stop id was generated (false: maxNew or the length L ran out first)
}

// Confidence is exp(LogProb), the probability the reader gives its answer.
func (g Generation) Confidence() float64 { return math.Exp(g.LogProb) }

// ReaderRunner decodes with a reader for inference: one B x L graph without
// dropout, run once per generated token (no key/value cache: L is small
// here). It reads the reader's current parameters at every run. Not safe
// for concurrent use.
type ReaderRunner struct{ tokenRunner }

// tokenRunner is the inference graph ReaderRunner and NextTokenRunner share: the reader's
// [B*L,H] token states for B sequences of at most L tokens, without dropout.
type tokenRunner struct {
	r    *Reader
	b, l int
	in   *Inputs
	out  *gorgonia.Node
	vm   gorgonia.VM
}

// newTokenRunner builds it; what names the runner in errors, name the graph's input nodes.
func newTokenRunner(r *Reader, B, L int, what, name string) (tokenRunner, error) {
	if B <= 0 || L <= 0 {
		return tokenRunner{}, fmt.Errorf("model: %s: batch %d x %d", what, B, L)
	}
	g := gorgonia.NewGraph()
	in := newInputs(g, B, L, name, r.Tower.dt)
	out, err := r.Tower.BuildTokens(NewBinder(g), in, false)
	if err != nil {
		return tokenRunner{}, err
	}
	ShareBuffers(g, out)
	return tokenRunner{r: r, b: B, l: L, in: in, out: out, vm: gorgonia.NewTapeMachine(g)}, nil
}

// NewReaderRunner builds the inference graph for batches of B sequences of
// at most L tokens.
func NewReaderRunner(r *Reader, B, L int) (*ReaderRunner, error) {
	t, err := newTokenRunner(r, B, L, "reader runner", "reader.decode")
	if err != nil {
		return nil, err
	}
	return &ReaderRunner{t}, nil
}

// Close releases the runner's machine.
func (rr *ReaderRunner) Close() error { return rr.vm.Close() }

// Greedy continues every prompt (token ids, at least one, at most L) with
// the most probable next token until the reader produces stop, maxNew
// tokens have been generated or the sequence reaches L tokens. Ties go to
// the lower id. Prompts are decoded B at a time; the result is in prompt
// order.
func (rr *ReaderRunner) Greedy(prompts [][]int, maxNew, stop int) ([]Generation, error) {
	v := rr.r.Cfg.Vocab
	if stop < 0 || stop >= v {
		return nil, fmt.Errorf("model: greedy: stop id %d is out of range [0,%d)", stop, v)
	}
	for i, p := range prompts {
		if len(p) == 0 || len(p) > rr.l {
			return nil, fmt.Errorf("model: greedy: prompt %d has %d tokens, want 1..%d", i, len(p), rr.l)
		}
	}
	res := make([]Generation, len(prompts))
	for start := 0; start < len(prompts); start += rr.b {
		end := min(start+rr.b, len(prompts))
		if err := rr.greedyChunk(prompts[start:end], res[start:end], maxNew, stop); err != nil {
			return nil, fmt.Errorf("model: greedy: prompts %d..%d: %w", start, end-1, err)
		}
	}
	return res, nil
}

func (rr *ReaderRunner) greedyChunk(prompts [][]int, res []Generation, maxNew, stop int) error {
	B, L, h, v := rr.b, rr.l, rr.r.Cfg.Hidden, rr.r.Cfg.Vocab
	ids := make([]int, B*L)
	mask := make([]float32, B*L)
	lens := make([]int, B)
	active := make([]bool, B)
	for i, p := range prompts {
		copy(ids[i*L:], p)
		lens[i] = len(p)
		active[i] = len(p) < L && maxNew > 0
	}
	sel := make([]float64, h)
	logits := make([]float64, v)
	emb := rr.r.Tower.byName["embeddings.word"].Value
	for step := 0; step < maxNew; step++ {
		running := false
		for i := range prompts {
			running = running || active[i]
		}
		if !running {
			break
		}
		clear(mask)
		for i := range prompts {
			for t := 0; t < lens[i]; t++ {
				mask[i*L+t] = 1
			}
		}
		if err := rr.in.Let(ids, mask, nil); err != nil {
			return err
		}
		rr.vm.Reset()
		if err := rr.vm.RunAll(); err != nil {
			return err
		}
		for i := range prompts {
			if !active[i] {
				continue
			}
			row := (i*L + lens[i] - 1) * h
			rowLogits(logits, sel, rr.out.Value(), row, emb)
			best, lp := argmaxLogSoftmax(logits)
			res[i].LogProb += lp
			if best == stop {
				res[i].Stopped = true
				active[i] = false
				continue
			}
			res[i].Tokens = append(res[i].Tokens, best)
			ids[i*L+lens[i]] = best
			lens[i]++
			if lens[i] == L {
				active[i] = false
			}
		}
	}
	return nil
}

// rowLogits copies row row/H of the token states states [N,H] into sel (H values) and writes
// the next-token logits of that row, sel · E[v], into logits.
func rowLogits(logits, sel []float64, states gorgonia.Value, row int, emb *tensor.Dense) {
	switch x := states.Data().(type) {
	case []float32:
		for j := range sel {
			sel[j] = float64(x[row+j])
		}
	case []float64:
		copy(sel, x[row:row+len(sel)])
	}
	nextLogits(logits, sel, emb)
}

// nextLogits writes logits[v] = x · E[v].
func nextLogits(logits, x []float64, emb *tensor.Dense) {
	h := len(x)
	switch e := emb.Data().(type) {
	case []float32:
		for v := range logits {
			var s float64
			for j, w := range e[v*h : (v+1)*h] {
				s += x[j] * float64(w)
			}
			logits[v] = s
		}
	case []float64:
		for v := range logits {
			var s float64
			for j, w := range e[v*h : (v+1)*h] {
				s += x[j] * w
			}
			logits[v] = s
		}
	}
}

// argmaxLogSoftmax returns the index of the largest logit (the lowest on
// ties) and its log-probability.
func argmaxLogSoftmax(z []float64) (int, float64) {
	best := 0
	for i, x := range z {
		if x > z[best] {
			best = i
		}
	}
	var s float64
	for _, x := range z {
		s += math.Exp(x - z[best])
	}
	return best, -math.Log(s)
}
