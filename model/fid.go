package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// PrefixFiD is the prefix of FiD's parameter names ("fid.decoder.layer.0.xattn.q.weight",
// "fid.encoder.layer.1.ffn.in.bias", ...).
const PrefixFiD = "fid"

// FiDConfig sizes a Fusion-in-Decoder model.
type FiDConfig struct {
	Vocab, Hidden, Layers, Heads, FFN int     // as EncoderConfig, for the encoder and the decoder alike
	Dropout                           float64 // residual, embedding and self-attention dropout while training
	K                                 int     // passage slots per question
	EncLen                            int     // Le, tokens of one (question, passage) encoder row
	DecLen                            int     // Ld, decoder tokens ("[CLS] answer [SEP]")
	// CausalEncoder masks future tokens in the encoder rows too (each passage token reads the
	// question and the passage before it): the function of a causal LM copied in by
	// InitFromReader. Izacard & Grave's T5 encoder is bidirectional (false, the default).
	CausalEncoder bool `json:",omitempty"`
}

// Validate reports the first invalid field.
func (c FiDConfig) Validate() error {
	if c.K <= 0 || c.K > 1024 {
		return fmt.Errorf("model: fid config: k = %d, want 1..1024", c.K)
	}
	if c.EncLen < 2 || c.DecLen < 2 {
		return fmt.Errorf("model: fid config: encoder length %d and decoder length %d, want >= 2", c.EncLen, c.DecLen)
	}
	return c.tower(c.EncLen).Validate()
}

func (c FiDConfig) tower(maxPos int) EncoderConfig {
	return EncoderConfig{Encoder: EncoderTransformer, Vocab: c.Vocab, Hidden: c.Hidden, Layers: c.Layers, Heads: c.Heads,
		FFN: c.FFN, MaxPosition: maxPos, Dropout: c.Dropout, Causal: true, Arch: ArchGPT2}
}

// FiD is Fusion-in-Decoder (Izacard & Grave 2021, "Leveraging Passage Retrieval with Generative
// Models for Open Domain Question Answering", section 3): an encoder reads each (question,
// passage) pair of a question independently, the K encodings [K·Le,H] are concatenated, and a
// decoder generates the answer cross-attending that concatenation, so the cost of the encoder
// grows linearly with K and the passages meet only in the decoder. Here both halves are GPT-2
// towers of the reader's layout (gpt2.go): the encoder without its causal mask (bidirectional
// over its row), the decoder causal with, in every layer, a pre-LN cross-attention sublayer
// between self-attention and the FFN (Vaswani et al. 2017 section 3.1's decoder layer):
//
//	a = x + Dropout(SelfAttention(LN₁(x)))
//	c = a + Dropout(CrossAttention(LN_x(a)·Wqᵀ, M·Wkᵀ, M·Wvᵀ)·Woᵀ)    M = encoder states [B·K·Le,H]
//	x = c + Dropout(FFN(LN₂(c)))
//
// The decoder's word embedding is shared with the encoder and tied to the output (log p =
// log softmax(h·Eᵀ), as the Reader; T5, FiD's base model, also shares them). Parameters:
// "fid.decoder.*" as the Reader's GPT-2 table (position embeddings [Ld,H]) plus, per layer,
// "layer.N.ln_x.weight|bias" [H] and "layer.N.xattn.q|k|v|out.weight|bias" ([H,H]|[H]; out
// initialised as the residual projections); "fid.encoder.*" the GPT-2 table without
// embeddings.word (position embeddings [Le,H]).
type FiD struct {
	Cfg      FiDConfig
	Enc, Dec *Tower
	rng      *RNG
}

// NewFiD validates cfg and initialises float32 parameters from seed (decoder, its
// cross-attention, then the encoder; one PCG stream).
func NewFiD(cfg FiDConfig, seed uint64) (*FiD, error) { return newFiD(cfg, seed, tensor.Float32) }

func newFiD(cfg FiDConfig, seed uint64, dt tensor.Dtype) (*FiD, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := &FiD{Cfg: cfg}
	f.Dec, f.Enc, f.rng = newEncDec(PrefixFiD, cfg.tower(cfg.DecLen), cfg.tower(cfg.EncLen), 0, seed, dt)
	f.Enc.Cfg.Causal = cfg.CausalEncoder
	return f, checkUnique(f.Params())
}

// Params returns the parameters in a fixed order: the decoder's, then the encoder's.
func (f *FiD) Params() []*Param { return append(f.Dec.Params(), f.Enc.Params()...) }

// SetRNG makes dropout draw its masks from rr in every graph of the model.
func (f *FiD) SetRNG(rr *rand.Rand) { f.rng.R = rr }

// BuildEncoder returns the encoder states [B·K·Le,H] of the rows in (B·K rows of Le tokens,
// row b·K+j the pair of question b and its passage j).
func (f *FiD) BuildEncoder(b *Binder, in *Inputs, train bool) (*gorgonia.Node, error) {
	if in.L != f.Cfg.EncLen || in.B%f.Cfg.K != 0 {
		return nil, fmt.Errorf("model: fid encoder: inputs %d x %d, want B·%d x %d", in.B, in.L, f.Cfg.K, f.Cfg.EncLen)
	}
	return f.Enc.BuildTokens(b, in, train)
}

// BuildDecoder returns the decoder's final-LayerNorm states [B·Ld,H] for the decoder inputs dec
// (B rows of Ld tokens) over the memory mem [B·K·Le,H] with mask memMask [B,K·Le] (0: a padding
// token or an unused passage slot).
func (f *FiD) BuildDecoder(b *Binder, mem, memMask *gorgonia.Node, dec *Inputs, train bool) (*gorgonia.Node, error) {
	t, c := f.Dec, f.Cfg
	if dec.L != c.DecLen {
		return nil, fmt.Errorf("model: fid decoder: inputs of length %d, want %d", dec.L, c.DecLen)
	}
	x, err := EmbedWordPosition(t.node(b, "embeddings.word"), t.node(b, "embeddings.position"), dec.IDs, dec.L)
	if err != nil {
		return nil, err
	}
	if x, err = t.dropout(x, train); err != nil {
		return nil, err
	}
	xo := CrossAttentionOptions{Lq: c.DecLen, Lk: c.K * c.EncLen, Heads: c.Heads, Scale: 1 / math.Sqrt(float64(c.Hidden/c.Heads))}
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("layer.%d.", i)
		cross := func(h *gorgonia.Node) (*gorgonia.Node, error) { return t.crossAttend(b, h, mem, memMask, p, xo) }
		if x, err = t.crossBlock(b, dec, x, p, train, cross); err != nil {
			return nil, fmt.Errorf("model: fid decoder layer %d: %w", i, err)
		}
	}
	return t.gpt2LayerNorm(b, x, "ln_f")
}

// FiDInputs are the input nodes of a FiD graph for B questions: the encoder rows (B·K x Le),
// the memory mask [B,K·Le] and the decoder rows (B x Ld).
type FiDInputs struct {
	Enc, Dec *Inputs
	MemMask  *gorgonia.Node
	B        int

	memMask *tensor.Dense
}

// NewFiDInputs adds the input nodes (named name+".enc.*", ".dec.*", ".memmask") to g.
func (f *FiD) NewFiDInputs(g *gorgonia.ExprGraph, B int, name string) *FiDInputs {
	c := f.Cfg
	in := &FiDInputs{B: B, Enc: newInputs(g, B*c.K, c.EncLen, name+".enc", f.Dec.dt), Dec: newInputs(g, B, c.DecLen, name+".dec", f.Dec.dt)}
	in.memMask = tensor.New(tensor.WithShape(B, c.K*c.EncLen), tensor.Of(f.Dec.dt))
	in.MemMask = gorgonia.NewTensor(g, f.Dec.dt, 2, gorgonia.WithShape(B, c.K*c.EncLen), gorgonia.WithValue(in.memMask), gorgonia.WithName(name+".memmask"))
	return in
}

// FiDExample is one question's input: its encoder rows (1..K token rows "[CLS] question [SEP]
// passage", each at most Le tokens) and its decoder tokens (at most Ld).
type FiDExample struct {
	Passages [][]int
	Decoder  []int
}

// Let copies up to B examples in; missing examples and passage slots are padding ("[CLS]"-only
// encoder rows, pad the id, masked out of the memory).
func (in *FiDInputs) Let(ex []FiDExample, pad int) error {
	K, Le, Ld := in.Enc.B/in.B, in.Enc.L, in.Dec.L
	if len(ex) > in.B {
		return fmt.Errorf("model: fid inputs: %d examples, graph built for %d", len(ex), in.B)
	}
	encIDs, encMask := make([]int, in.Enc.B*Le), make([]float32, in.Enc.B*Le)
	decIDs, decMask := make([]int, in.B*Ld), make([]float32, in.B*Ld)
	mm := make([]float64, in.B*K*Le)
	for r := 0; r < in.Enc.B; r++ {
		encIDs[r*Le], encMask[r*Le] = pad, 1 // every row has a token: no fully masked attention row
	}
	for b, e := range ex {
		if len(e.Passages) == 0 || len(e.Passages) > K || len(e.Decoder) > Ld || len(e.Decoder) == 0 {
			return fmt.Errorf("model: fid inputs: example %d has %d passages (1..%d) and %d decoder tokens (1..%d)", b, len(e.Passages), K, len(e.Decoder), Ld)
		}
		for j, p := range e.Passages {
			if len(p) == 0 || len(p) > Le {
				return fmt.Errorf("model: fid inputs: example %d passage %d has %d tokens, want 1..%d", b, j, len(p), Le)
			}
			r := b*K + j
			copy(encIDs[r*Le:], p)
			for t := range p {
				encMask[r*Le+t], mm[r*Le+t] = 1, 1
			}
		}
		copy(decIDs[b*Ld:], e.Decoder)
		for t := range e.Decoder {
			decMask[b*Ld+t] = 1
		}
	}
	return letEncDec(in.memMask, mm, in.Enc, encIDs, encMask, in.Dec, decIDs, decMask)
}

// BuildLogProbs adds FiD to the binder's graph for the inputs in and returns the
// log-probabilities [M] of the targets t, whose positions are rows of the decoder states (b·Ld+i
// for decoder token i of question b). With train, dropout is active.
func (f *FiD) BuildLogProbs(b *Binder, in *FiDInputs, t *Targets, train bool) (*gorgonia.Node, error) {
	mem, err := f.BuildEncoder(b, in.Enc, train)
	if err != nil {
		return nil, err
	}
	x, err := f.BuildDecoder(b, mem, in.MemMask, in.Dec, train)
	if err != nil {
		return nil, err
	}
	return LMLogProb(x, f.Dec.node(b, "embeddings.word"), t.Pos, t.Tgt)
}

// FiDRunner decodes greedily with FiD: the inference graph for B questions, run whole (encoder
// included) once per generated token: answers are a few tokens.
type FiDRunner struct {
	f      *FiD
	in     *FiDInputs
	mem    *gorgonia.Node
	states *gorgonia.Node
	vm     gorgonia.VM
}

// NewFiDRunner builds the graph.
func NewFiDRunner(f *FiD, B int) (*FiDRunner, error) {
	if B <= 0 {
		return nil, fmt.Errorf("model: fid runner: batch %d", B)
	}
	g := gorgonia.NewGraph()
	b := NewBinder(g)
	in := f.NewFiDInputs(g, B, "fid.decode")
	mem, err := f.BuildEncoder(b, in.Enc, false)
	if err != nil {
		return nil, err
	}
	x, err := f.BuildDecoder(b, mem, in.MemMask, in.Dec, false)
	if err != nil {
		return nil, err
	}
	return &FiDRunner{f: f, in: in, mem: mem, states: x, vm: gorgonia.NewTapeMachine(g)}, nil
}

// Close releases the machine.
func (r *FiDRunner) Close() error { return r.vm.Close() }

// Greedy continues each example's decoder tokens (usually "[CLS]") with the most probable token
// until stop or until maxNew tokens or Ld are reached; the example's Decoder slice is not
// modified. Examples may number more than B (batches of B).
func (r *FiDRunner) Greedy(ex []FiDExample, maxNew, stop, pad int) ([]Generation, error) {
	prompts := make([][]int, len(ex))
	for i, e := range ex {
		prompts[i] = e.Decoder
	}
	batch := make([]FiDExample, r.in.B)
	return greedyRerun(prompts, r.in.B, r.f.Cfg.DecLen, maxNew, stop, r.f.Dec.byName["embeddings.word"].Value, func(lo int, seqs [][]int) (gorgonia.Value, error) {
		for i, s := range seqs {
			batch[i] = FiDExample{Passages: ex[lo+i].Passages, Decoder: s}
		}
		if err := r.in.Let(batch[:len(seqs)], pad); err != nil {
			return nil, err
		}
		return rerun(r.vm, r.states)
	})
}

// InitFromReader copies the GPT-2 language model r into both towers of f, as Izacard & Grave
// start FiD's encoder and decoder from one pretrained T5: the shared word embedding [V,H], the
// first Le (encoder) and Ld (decoder) rows of r's position embeddings [P,H], and every layer's
// ln_1, attn.q|k|v|out, ln_2, ffn.in|out and ln_f, bit for bit. The decoder's cross-attention
// sublayers (layer.N.ln_x, layer.N.xattn.*), which r has no counterpart of, keep their
// initialisation. The encoder then reads bidirectionally with weights trained causally (T5's
// encoder was pretrained bidirectional; the fine-tuning adapts them). r must have f's vocabulary,
// hidden, layers and FFN, the same dtype and at least max(Le, Ld) positions; on an error f is
// unchanged.
func (f *FiD) InitFromReader(r *Reader) error {
	if c := r.Cfg; c.Heads != f.Cfg.Heads || c.Layers != f.Cfg.Layers {
		return fmt.Errorf("model: fid from reader: reader of %d layers and %d heads, fid of %d and %d", c.Layers, c.Heads, f.Cfg.Layers, f.Cfg.Heads)
	}
	type pair struct{ dst, src *Param }
	var pairs []pair
	for _, t := range []*Tower{f.Dec, f.Enc} {
		for name, p := range t.byName {
			if strings.HasPrefix(name, "layer.") && (strings.Contains(name, ".xattn.") || strings.Contains(name, ".ln_x.")) {
				continue
			}
			src, ok := r.Tower.byName[name]
			if !ok {
				return fmt.Errorf("model: fid from reader: the reader has no %s", name)
			}
			ds, ss := p.Value.Shape(), src.Value.Shape()
			rows := name == "embeddings.position" && len(ds) == 2 && len(ss) == 2 && ds[1] == ss[1] && ds[0] <= ss[0]
			if !rows && !slices.Equal([]int(ds), []int(ss)) {
				return fmt.Errorf("model: fid from reader: %s has shape %v, the reader's %v", p.Name, ds, ss)
			}
			if p.Value.Dtype() != src.Value.Dtype() {
				return fmt.Errorf("model: fid from reader: %s is %v, the reader's %v", p.Name, p.Value.Dtype(), src.Value.Dtype())
			}
			pairs = append(pairs, pair{p, src})
		}
	}
	for _, pr := range pairs {
		copyValue(pr.dst, pr.src)
	}
	return nil
}

// copyValue copies src's values into dst (same dtype; row-major, so a shorter dst gets the first
// rows of src).
func copyValue(dst, src *Param) {
	switch d := dst.Value.Data().(type) {
	case []float32:
		copy(d, src.Value.Data().([]float32))
	case []float64:
		copy(d, src.Value.Data().([]float64))
	}
}

// CrossFromSelf sets every decoder layer's cross-attention to a copy of its self-attention:
// layer.N.ln_x from layer.N.ln_1 and layer.N.xattn.q|k|v|out from layer.N.attn.q|k|v|out, bit
// for bit. After InitFromReader this starts each cross-attention as the LM's attention of that
// layer, reading the encoded passages with the heads the LM reads earlier text with (its
// copying heads included), where fresh cross-attention would start from no circuit at all.
func (f *FiD) CrossFromSelf() {
	for i := 0; i < f.Cfg.Layers; i++ {
		for _, m := range [][2]string{{"ln_x", "ln_1"}, {"xattn.q", "attn.q"}, {"xattn.k", "attn.k"}, {"xattn.v", "attn.v"}, {"xattn.out", "attn.out"}} {
			for _, w := range []string{".weight", ".bias"} {
				copyValue(f.Dec.byName[fmt.Sprintf("layer.%d.%s%s", i, m[0], w)], f.Dec.byName[fmt.Sprintf("layer.%d.%s%s", i, m[1], w)])
			}
		}
	}
}
