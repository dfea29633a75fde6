package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// PrefixRetro is the prefix of RETRO's parameter names ("retro.decoder.layer.1.xattn.q.weight",
// "retro.encoder.layer.0.ffn.in.bias", ...).
const PrefixRetro = "retro"

// Bounds of RetroConfig and RetroInputs, checked before anything is allocated.
const (
	maxRetroNeighbours  = 64
	maxRetroLength      = 4096
	maxRetroMemoryToken = 1 << 24 // B·l·k·r encoder tokens of one graph
)

// RetroConfig sizes a RETRO model.
type RetroConfig struct {
	Vocab, Hidden, Layers, Heads, FFN int     // the decoder's GPT-2 sizes (EncoderConfig's)
	Dropout                           float64 // residual, embedding and attention dropout while training
	SeqLen                            int     // n, tokens per sequence, a multiple of Chunk
	Chunk                             int     // m, tokens per chunk (l = n/m chunks)
	Neighbours                        int     // k, neighbours per chunk
	NeighbourLen                      int     // r, tokens per neighbour (chunk + continuation: 2m in the paper)
	EncoderLayers                     int     // layers of the neighbour encoder
	CCAFrom                           int     // the first decoder layer with chunked cross-attention (0-based)
}

// Chunks is l = n/m.
func (c RetroConfig) Chunks() int { return c.SeqLen / c.Chunk }

// Validate reports the first invalid field.
func (c RetroConfig) Validate() error {
	switch {
	case c.SeqLen < 2 || c.SeqLen > maxRetroLength || c.Chunk < 1 || c.SeqLen%c.Chunk != 0:
		return fmt.Errorf("model: retro config: sequence length %d and chunk %d, want 2..%d, a multiple of the chunk", c.SeqLen, c.Chunk, maxRetroLength)
	case c.Neighbours < 1 || c.Neighbours > maxRetroNeighbours:
		return fmt.Errorf("model: retro config: neighbours = %d, want 1..%d", c.Neighbours, maxRetroNeighbours)
	case c.NeighbourLen < 1 || c.NeighbourLen > maxRetroLength:
		return fmt.Errorf("model: retro config: neighbour length %d, want 1..%d", c.NeighbourLen, maxRetroLength)
	case c.EncoderLayers < 1 || c.EncoderLayers > 64:
		return fmt.Errorf("model: retro config: encoder layers = %d, want 1..64", c.EncoderLayers)
	case c.CCAFrom < 0 || c.CCAFrom >= c.Layers:
		return fmt.Errorf("model: retro config: cca_from = %d, want 0..%d (layers - 1)", c.CCAFrom, c.Layers-1)
	}
	return c.tower(c.SeqLen, c.Layers).Validate()
}

func (c RetroConfig) tower(maxPos, layers int) EncoderConfig {
	return EncoderConfig{Encoder: EncoderTransformer, Vocab: c.Vocab, Hidden: c.Hidden, Layers: layers, Heads: c.Heads,
		FFN: c.FFN, MaxPosition: maxPos, Dropout: c.Dropout, Causal: true, Arch: ArchGPT2}
}

// Retro is a RETRO-style decoder (Borgeaud et al. 2022, "Improving language models by
// retrieving from trillions of tokens", section 2): the sequence of n tokens is cut into l = n/m
// chunks C_0..C_{l-1}; each chunk's k neighbours (database chunk + its continuation, r tokens
// each, retrieved with a frozen retriever by the caller) are encoded by a bidirectional
// encoder, E_c [k·r,H] for chunk c; the decoder is the GPT-2 tower of the reader (gpt2.go) whose
// layers CCAFrom.. add a chunked cross-attention sublayer between self-attention and the FFN
// (the paper's RETRO block: ATTN, CCA, FFW; crossBlock):
//
//	c = a + Dropout(CCA(LN_x(a), E))
//
// CCA (the paper's eq. 4 and its Listing 1, 0-based): position p attends the neighbours of the
// chunk c with c·m+m-1 <= p <= c·m+2m-2, i.e. the last token of C_c and the first m-1 tokens of
// C_{c+1} read E_c; positions 0..m-2 read nothing (CCA is the identity there: the sublayer adds
// 0). So no position sees neighbours retrieved with tokens after it: E_c depends on C_c only,
// whose last token is c·m+m-1 <= p. Per attending chunk it is CrossAttention (ops_crossattn.go)
// of its m positions over E_c's k·r states with the q, k, v and out projections of FiD's
// sublayer, between two ShiftRows by m-1.
//
// Differences from the paper: absolute position embeddings in the encoder and no relative
// positional encoding in CCA; the neighbour encoder is not conditioned on the decoder's
// activations of the chunk (the paper's encoder cross-attends them); the word embedding is shared
// by encoder, decoder and output (tied). Parameters: "retro.decoder.*" the Reader's GPT-2
// table (position embeddings [n,H]) plus, in layers CCAFrom.., "layer.N.ln_x.*" and
// "layer.N.xattn.q|k|v|out.*" as FiD's; "retro.encoder.*" a GPT-2 table of EncoderLayers
// layers without embeddings.word (position embeddings [r,H]).
type Retro struct {
	Cfg      RetroConfig
	Dec, Enc *Tower
	rng      *RNG
}

// NewRetro validates cfg and initialises float32 parameters from seed (decoder, its
// cross-attention, then the encoder; one PCG stream).
func NewRetro(cfg RetroConfig, seed uint64) (*Retro, error) {
	return newRetro(cfg, seed, tensor.Float32)
}

func newRetro(cfg RetroConfig, seed uint64, dt tensor.Dtype) (*Retro, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Retro{Cfg: cfg}
	m.Dec, m.Enc, m.rng = newEncDec(PrefixRetro, cfg.tower(cfg.SeqLen, cfg.Layers), cfg.tower(cfg.NeighbourLen, cfg.EncoderLayers), cfg.CCAFrom, seed, dt)
	return m, checkUnique(m.Params())
}

// Params returns the parameters in a fixed order: the decoder's, then the encoder's.
func (m *Retro) Params() []*Param { return append(m.Dec.Params(), m.Enc.Params()...) }

// SetRNG makes dropout draw its masks from rr in every graph of the model.
func (m *Retro) SetRNG(rr *rand.Rand) { m.rng.R = rr }

// chunked returns ShiftRows(f(ShiftRows(x, n, m-1)), n, 1-m): f sees, as rows c·m..c·m+m-1 of
// each sequence, the positions c·m+m-1..c·m+2m-2 (zeros past the end), and its row c·m+i lands
// back on position c·m+i+m-1; positions 0..m-2 get zeros.
func chunked(x *gorgonia.Node, n, m int, f func(*gorgonia.Node) (*gorgonia.Node, error)) (*gorgonia.Node, error) {
	s, err := ShiftRows(x, n, m-1)
	if err != nil {
		return nil, err
	}
	if s, err = f(s); err != nil {
		return nil, err
	}
	return ShiftRows(s, n, 1-m)
}

// ChunkedCrossAttention is RETRO's CCA without projections (Borgeaud et al. 2022, eq. 4):
// q [B·n,H] the queries at every position of B sequences of n = l·m tokens, k and v [B·l·Lk,H]
// the encoded neighbours of every chunk (chunk c of sequence b at rows (b·l+c)·Lk..), mask
// [B·l,Lk]; out [B·n,H]:
//
//	out[b·n+p] = CrossAttention(q[b·n+p], k, v of chunk c = ⌊(p+1)/m⌋-1)   for p >= m-1
//	out[b·n+p] = 0                                                          for p < m-1
//
// o.Lq must be m and o.Lk the memory length per chunk.
func ChunkedCrossAttention(q, k, v, mask *gorgonia.Node, n int, o CrossAttentionOptions) (*gorgonia.Node, error) {
	return chunked(q, n, o.Lq, func(s *gorgonia.Node) (*gorgonia.Node, error) { return CrossAttention(s, k, v, mask, o) })
}

// BuildStates returns the decoder's final-LayerNorm states [B·n,H] for the inputs in. With
// train, dropout is active.
func (m *Retro) BuildStates(b *Binder, in *RetroInputs, train bool) (*gorgonia.Node, error) {
	t, c := m.Dec, m.Cfg
	mem, err := m.Enc.BuildTokens(b, in.Nbr, train)
	if err != nil {
		return nil, err
	}
	x, err := EmbedWordPosition(t.node(b, "embeddings.word"), t.node(b, "embeddings.position"), in.Dec.IDs, c.SeqLen)
	if err != nil {
		return nil, err
	}
	if x, err = t.dropout(x, train); err != nil {
		return nil, err
	}
	xo := CrossAttentionOptions{Lq: c.Chunk, Lk: c.Neighbours * c.NeighbourLen, Heads: c.Heads, Scale: 1 / math.Sqrt(float64(c.Hidden/c.Heads))}
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("layer.%d.", i)
		var cca func(h *gorgonia.Node) (*gorgonia.Node, error)
		if i >= c.CCAFrom {
			cca = func(h *gorgonia.Node) (*gorgonia.Node, error) {
				return chunked(h, c.SeqLen, c.Chunk, func(s *gorgonia.Node) (*gorgonia.Node, error) {
					return t.crossAttend(b, s, mem, in.MemMask, p, xo)
				})
			}
		}
		if x, err = t.crossBlock(b, in.Dec, x, p, train, cca); err != nil {
			return nil, fmt.Errorf("model: retro decoder layer %d: %w", i, err)
		}
	}
	return t.gpt2LayerNorm(b, x, "ln_f")
}

// BuildLogProbs returns the log-probabilities [M] of the targets t, whose positions are rows of
// the decoder states (b·n+i for token i of sequence b).
func (m *Retro) BuildLogProbs(b *Binder, in *RetroInputs, t *Targets, train bool) (*gorgonia.Node, error) {
	x, err := m.BuildStates(b, in, train)
	if err != nil {
		return nil, err
	}
	return LMLogProb(x, m.Dec.node(b, "embeddings.word"), t.Pos, t.Tgt)
}

// RetroInputs are the input nodes of a RETRO graph for B sequences: the decoder rows (B x n),
// the neighbour rows (B·l·k x r, row (b·l+c)·k+j neighbour j of chunk c of sequence b) and the
// memory mask [B·l,k·r] (0: a padding token or an unused neighbour slot).
type RetroInputs struct {
	Dec, Nbr *Inputs
	MemMask  *gorgonia.Node
	B        int

	memMask *tensor.Dense
}

// NewRetroInputs adds the input nodes (named name+".dec.*", ".nbr.*", ".memmask") to g after
// checking B against the bound on the graph's neighbour tokens.
func (m *Retro) NewRetroInputs(g *gorgonia.ExprGraph, B int, name string) (*RetroInputs, error) {
	c := m.Cfg
	l, kr := c.Chunks(), c.Neighbours*c.NeighbourLen
	if B <= 0 || B > maxRetroMemoryToken/(l*kr) {
		return nil, fmt.Errorf("model: retro inputs: batch %d, want 1..%d (%d chunks x %d neighbour tokens per sequence, at most %d in a graph)", B, maxRetroMemoryToken/(l*kr), l, kr, maxRetroMemoryToken)
	}
	dt := m.Dec.dt
	in := &RetroInputs{B: B, Dec: newInputs(g, B, c.SeqLen, name+".dec", dt), Nbr: newInputs(g, B*l*c.Neighbours, c.NeighbourLen, name+".nbr", dt)}
	in.memMask = tensor.New(tensor.WithShape(B*l, kr), tensor.Of(dt))
	in.MemMask = gorgonia.NewTensor(g, dt, 2, gorgonia.WithShape(B*l, kr), gorgonia.WithValue(in.memMask), gorgonia.WithName(name+".memmask"))
	return in, nil
}

// RetroExample is one sequence: its tokens (1..n) and, per chunk c, up to k neighbours of 1..r
// tokens (Neighbours may be shorter than l; a chunk without neighbours reads one padding token,
// which the chunks past a short sequence's end do, unread).
type RetroExample struct {
	Tokens     []int
	Neighbours [][][]int
}

// Let copies up to B examples in; missing examples are one padding token.
func (in *RetroInputs) Let(ex []RetroExample, pad int) error {
	n, r := in.Dec.L, in.Nbr.L
	l := in.Nbr.B / in.B
	kr := in.memMask.Shape()[1]
	k := kr / r
	l /= k
	if len(ex) > in.B {
		return fmt.Errorf("model: retro inputs: %d examples, graph built for %d", len(ex), in.B)
	}
	decIDs, decMask := make([]int, in.B*n), make([]float32, in.B*n)
	nbrIDs, nbrMask := make([]int, in.Nbr.B*r), make([]float32, in.Nbr.B*r)
	mm := make([]float64, in.B*l*kr)
	for b := 0; b < in.B; b++ {
		decIDs[b*n], decMask[b*n] = pad, 1
	}
	for row := 0; row < in.Nbr.B; row++ {
		nbrIDs[row*r], nbrMask[row*r] = pad, 1
	}
	for b, e := range ex {
		if len(e.Tokens) == 0 || len(e.Tokens) > n || len(e.Neighbours) > l {
			return fmt.Errorf("model: retro inputs: example %d has %d tokens (1..%d) and neighbours for %d chunks (at most %d)", b, len(e.Tokens), n, len(e.Neighbours), l)
		}
		copy(decIDs[b*n:], e.Tokens)
		for t := range e.Tokens {
			decMask[b*n+t] = 1
		}
		for c := 0; c < l; c++ {
			base := (b*l + c) * kr
			var nb [][]int
			if c < len(e.Neighbours) {
				nb = e.Neighbours[c]
			}
			if len(nb) > k {
				return fmt.Errorf("model: retro inputs: example %d chunk %d has %d neighbours, want at most %d", b, c, len(nb), k)
			}
			if len(nb) == 0 {
				mm[base] = 1
			}
			for j, ids := range nb {
				if len(ids) == 0 || len(ids) > r {
					return fmt.Errorf("model: retro inputs: example %d chunk %d neighbour %d has %d tokens, want 1..%d", b, c, j, len(ids), r)
				}
				row := (b*l+c)*k + j
				copy(nbrIDs[row*r:], ids)
				for t := range ids {
					nbrMask[row*r+t], mm[base+j*r+t] = 1, 1
				}
			}
		}
	}
	return letEncDec(in.memMask, mm, in.Nbr, nbrIDs, nbrMask, in.Dec, decIDs, decMask)
}

// RetroRunner decodes greedily with RETRO: the inference graph for B sequences, run whole once
// per generated token.
type RetroRunner struct {
	m      *Retro
	in     *RetroInputs
	states *gorgonia.Node
	vm     gorgonia.VM
}

// NewRetroRunner builds the graph.
func NewRetroRunner(m *Retro, B int) (*RetroRunner, error) {
	g := gorgonia.NewGraph()
	in, err := m.NewRetroInputs(g, B, "retro.decode")
	if err != nil {
		return nil, err
	}
	x, err := m.BuildStates(NewBinder(g), in, false)
	if err != nil {
		return nil, err
	}
	return &RetroRunner{m: m, in: in, states: x, vm: gorgonia.NewTapeMachine(g)}, nil
}

// Close releases the machine.
func (r *RetroRunner) Close() error { return r.vm.Close() }

// Greedy continues each prompt with the most probable token until stop or until maxNew tokens
// or n are reached. Before every token, each complete chunk of the sequence so far has the
// neighbours retrieve(chunk tokens) returns (asked once per chunk), as the paper's sampling
// retrieves when a chunk completes.
func (r *RetroRunner) Greedy(prompts [][]int, maxNew, stop, pad int, retrieve func(chunk []int) ([][]int, error)) ([]Generation, error) {
	c := r.m.Cfg
	nbrs := make([][][][]int, len(prompts))
	batch := make([]RetroExample, r.in.B)
	return greedyRerun(prompts, r.in.B, c.SeqLen, maxNew, stop, r.m.Dec.byName["embeddings.word"].Value, func(lo int, seqs [][]int) (gorgonia.Value, error) {
		for i, s := range seqs {
			for ch := len(nbrs[lo+i]); ch < len(s)/c.Chunk; ch++ {
				nb, err := retrieve(s[ch*c.Chunk : (ch+1)*c.Chunk])
				if err != nil {
					return nil, err
				}
				nbrs[lo+i] = append(nbrs[lo+i], nb)
			}
			batch[i] = RetroExample{Tokens: s, Neighbours: nbrs[lo+i]}
		}
		if err := r.in.Let(batch[:len(seqs)], pad); err != nil {
			return nil, err
		}
		return rerun(r.vm, r.states)
	})
}
