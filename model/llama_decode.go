package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gorgonia.org/tensor"
)

// LlamaDecoder runs a float32 Llama for inference with a key/value cache (incremental decoding):
// a prompt is computed once (prefill), then each new token attends to the cached keys and values
// of the tokens before it instead of recomputing them. Plain Go over the model's own parameter
// slices (no copy, no graph): the same computation as Llama.BuildLogits, token by token
// (TestLlamaDecoderMatchesGraph: logits within 1e-5), with the same matrix-product kernels
// (sgemm), RMSNorm rows, RoPE table and softmax rows. Not safe for concurrent use.
type LlamaDecoder struct {
	m    *Llama
	cfg  LlamaConfig
	ones []float32 // the all-ones key mask of softmaxRow32
	// KeepKeys makes Forward keep, in Keys, the kNN-LM key of every row it returns logits for:
	// the input of the last layer's MLP, post_attention_layernorm's output [Hidden] (Khandelwal
	// et al. 2020, section 3), row-major in the order of the logits.
	KeepKeys bool
	Keys     []float32
}

// NewLlamaDecoder returns a decoder reading m's current parameters, which must be float32.
func NewLlamaDecoder(m *Llama) (*LlamaDecoder, error) {
	if m.dt != tensor.Float32 {
		return nil, fmt.Errorf("model: llama decoder: parameters are %v, want float32", m.dt)
	}
	return &LlamaDecoder{m: m, cfg: m.Cfg}, nil
}

// LlamaCache holds one sequence's keys and values for every layer: k[i] and v[i] are
// [Cap, KVHeads·dh], rows 0..Len-1 filled (the keys after RoPE). kp[i] holds the same keys as
// sgemm packs them for scores = q·kᵀ (packB): per key/value head h, ceil(Cap/16) panels of
// [dh][16] (position 16·panel+c in column c), so that a decoding step reads them as they are
// instead of transposing the whole cache again at every layer of every step.
type LlamaCache struct {
	k, v, kp [][]float32
	n        int
	panels   int // of kp, per key/value head
}

// Len is the number of cached positions.
func (c *LlamaCache) Len() int { return c.n }

// NewCache returns an empty cache for sequences of at most capacity tokens (at most
// max_position_embeddings).
func (d *LlamaDecoder) NewCache(capacity int) (*LlamaCache, error) {
	if capacity <= 0 || capacity > d.cfg.MaxPosition {
		return nil, fmt.Errorf("model: llama cache of %d positions, want 1..%d (max_position_embeddings)", capacity, d.cfg.MaxPosition)
	}
	w := d.cfg.KVHeads * d.cfg.HeadDim()
	c := &LlamaCache{k: make([][]float32, d.cfg.Layers), v: make([][]float32, d.cfg.Layers), kp: make([][]float32, d.cfg.Layers)}
	for i := range c.k {
		c.k[i] = make([]float32, capacity*w)
		c.v[i] = make([]float32, capacity*w)
		c.kp[i] = make([]float32, roundUp(capacity, gemmNR)*w)
	}
	c.panels = roundUp(capacity, gemmNR) / gemmNR
	return c, nil
}

func (c *LlamaCache) capacity(w int) int { return len(c.k[0]) / w }

// packKeys copies the keys of positions from..to-1 of layer i (rows of c.k[i], already
// written) into c.kp[i].
func (c *LlamaCache) packKeys(i, from, to, kvHeads, dh int) {
	kw := kvHeads * dh
	for pos := from; pos < to; pos++ {
		pnl, col := pos/gemmNR, pos%gemmNR
		for h := 0; h < kvHeads; h++ {
			src := c.k[i][pos*kw+h*dh : pos*kw+(h+1)*dh]
			dst := c.kp[i][(h*c.panels+pnl)*dh*gemmNR+col:]
			for d, x := range src {
				dst[d*gemmNR] = x
			}
		}
	}
}

func (d *LlamaDecoder) w(name string) []float32 { return d.m.byName[name].Value.Data().([]float32) }

// Forward appends toks[s] (at least one token each) to the sequence of caches[s], for every s
// at once (the rows of all sequences go through each matrix product together), and returns the
// logits of the next token: with all, one [len(toks[s]), V] block per sequence (row j scoring the
// token after toks[s][j]); else one [V] row per sequence, after its last token.
func (d *LlamaDecoder) Forward(caches []*LlamaCache, toks [][]int, all bool) ([][]float32, error) {
	return d.forward(caches, toks, all, false, nil)
}

// ForwardKeys appends toks[s] to the sequence of caches[s] as Forward(caches, toks, true) does
// and returns the kNN-LM key of every new row (as KeepKeys keeps them: [rows, Hidden],
// sequence by sequence), the same bits, but stops there: the last layer's MLP, the final norm
// and the head (a [rows, Vocab] product: a fifth of SmolLM2-135M's work per token) are not
// computed, so the caches' last layer holds keys and values but the sequences have no logits.
// It is the datastore builder's pass (knnlm.BuildLlama). Keys is left as it was.
func (d *LlamaDecoder) ForwardKeys(caches []*LlamaCache, toks [][]int) ([]float32, error) {
	keep, kept := d.KeepKeys, d.Keys
	defer func() { d.KeepKeys, d.Keys = keep, kept }()
	d.KeepKeys = true
	if _, err := d.forward(caches, toks, true, true, nil); err != nil {
		return nil, err
	}
	return d.Keys, nil
}

// forward is Forward (ForwardKeys with keysOnly); with bfloat16 products, a non-nil packed keeps
// the weights of decoding steps packed from one call to the next (Generate).
func (d *LlamaDecoder) forward(caches []*LlamaCache, toks [][]int, all, keysOnly bool, packed bf16Weights) ([][]float32, error) {
	c := d.cfg
	h, dh, v := c.Hidden, c.HeadDim(), c.Vocab
	qw, kw := c.Heads*dh, c.KVHeads*dh
	if len(caches) != len(toks) {
		return nil, fmt.Errorf("model: llama forward: %d caches for %d sequences", len(caches), len(toks))
	}
	start := make([]int, len(toks)+1) // sequence s has rows start[s]..start[s+1]-1
	for s, t := range toks {
		if len(t) == 0 {
			return nil, fmt.Errorf("model: llama forward: sequence %d has no new tokens", s)
		}
		if n := caches[s].n + len(t); n > caches[s].capacity(kw) {
			return nil, fmt.Errorf("model: llama forward: sequence %d would hold %d tokens, its cache %d", s, n, caches[s].capacity(kw))
		}
		if err := checkIDs("llama forward", t, v); err != nil {
			return nil, fmt.Errorf("sequence %d: %w", s, err)
		}
		start[s+1] = start[s] + len(t)
	}
	rows := start[len(toks)]
	step := rows == len(toks) // one new token after a cached prefix per sequence: a decoding step
	for _, c := range caches {
		step = step && c.n > 0
	}
	pos := make([]int, rows) // the position of each row
	for s, t := range toks {
		for j := range t {
			pos[start[s]+j] = caches[s].n + j
		}
	}
	maxLen := 0
	for s := range toks {
		maxLen = max(maxLen, caches[s].n+len(toks[s]))
	}
	sel := make([]int, 0, rows) // the rows whose logits are returned
	for s := range toks {
		if all {
			for r := start[s]; r < start[s+1]; r++ {
				sel = append(sel, r)
			}
		} else {
			sel = append(sel, start[s+1]-1)
		}
	}
	rt := ropeTable(c.RopeTheta, dh, maxLen)
	if len(d.ones) < maxLen {
		d.ones = slices.Repeat([]float32{1}, maxLen)
	}

	emb := d.w(LlamaEmbed)
	x := make([]float32, rows*h)
	for s, t := range toks {
		for j, id := range t {
			copy(x[(start[s]+j)*h:], emb[id*h:(id+1)*h])
		}
	}
	hn := make([]float32, rows*h)
	q := make([]float32, rows*qw)
	kv := make([]float32, 2*rows*kw)
	att := make([]float32, rows*qw)
	g := make([]float32, rows*c.FFN)
	u := make([]float32, rows*c.FFN)
	proj := func(out, in []float32, din int, name string, dout int) {
		matMulT(out, in, d.w(name), rows, dout, din, step, packed, name)
	}
	scale := float32(1 / math.Sqrt(float64(dh)))
	for i := 0; i < c.Layers; i++ {
		rmsNorm(hn, x, d.w(llamaLayer(i, "input_layernorm")), h, c.RMSEps)
		proj(q, hn, h, llamaLayer(i, "self_attn.q_proj"), qw)
		k, vv := kv[:rows*kw], kv[rows*kw:]
		proj(k, hn, h, llamaLayer(i, "self_attn.k_proj"), kw)
		proj(vv, hn, h, llamaLayer(i, "self_attn.v_proj"), kw)
		for r := 0; r < rows; r++ {
			cos, sin := rt.at(pos[r])
			for hd := 0; hd < c.Heads; hd++ {
				o := q[r*qw+hd*dh : r*qw+(hd+1)*dh]
				ropeHead(o, o, cos, sin, false)
			}
			for hd := 0; hd < c.KVHeads; hd++ {
				o := k[r*kw+hd*dh : r*kw+(hd+1)*dh]
				ropeHead(o, o, cos, sin, false)
			}
		}
		for s := range toks {
			n := caches[s].n
			copy(caches[s].k[i][n*kw:], k[start[s]*kw:start[s+1]*kw])
			copy(caches[s].v[i][n*kw:], vv[start[s]*kw:start[s+1]*kw])
			caches[s].packKeys(i, n, n+len(toks[s]), c.KVHeads, dh)
		}
		d.attention(att, q, caches, toks, start, i, scale)
		proj(hn, att, qw, llamaLayer(i, "self_attn.o_proj"), h)
		addInto(x, hn)
		rmsNorm(hn, x, d.w(llamaLayer(i, "post_attention_layernorm")), h, c.RMSEps)
		if d.KeepKeys && i == c.Layers-1 {
			d.Keys = make([]float32, len(sel)*h)
			for j, r := range sel {
				copy(d.Keys[j*h:], hn[r*h:(r+1)*h])
			}
			if keysOnly {
				for s := range toks {
					caches[s].n += len(toks[s])
				}
				return nil, nil
			}
		}
		proj(g, hn, h, llamaLayer(i, "mlp.gate_proj"), c.FFN)
		proj(u, hn, h, llamaLayer(i, "mlp.up_proj"), c.FFN)
		swiglu(g, g, u)
		proj(hn, g, c.FFN, llamaLayer(i, "mlp.down_proj"), h)
		addInto(x, hn)
	}
	for s := range toks {
		caches[s].n += len(toks[s])
	}
	// The final norm and the head on the rows asked for.
	xs := make([]float32, len(sel)*h)
	for j, r := range sel {
		copy(xs[j*h:], x[r*h:(r+1)*h])
	}
	rmsNorm(xs, xs, d.w(LlamaFinalNorm), h, c.RMSEps)
	logits := make([]float32, len(sel)*v)
	head := d.m.HeadParam().Value.Data().([]float32)
	matMulT(logits, xs, head, len(sel), v, h, step, packed, "lm_head")
	out := make([][]float32, len(toks))
	at := 0
	for s := range toks {
		n := 1
		if all {
			n = len(toks[s])
		}
		out[s] = logits[at*v : (at+n)*v : (at+n)*v]
		at += n
	}
	return out, nil
}

// matMulT sets out [m,n] = x [m,k] · wᵀ (w [n,k]): with step (one token per sequence after
// its cached prefix: few rows) by gemvRows, else (prompts) by sgemm. Both compute each row of out from its row of x
// alone, in an order that does not depend on m, so a sequence's logits do not depend on the
// other sequences of its batch. With bfloat16 products (SetMatmulPrecision) steps go through
// sgemm too (gemvRows has float32 products only), or, with packed (and the VDPBF16PS kernel),
// through the weights packed under name at the first step: the same bits.
func matMulT(out, x, w []float32, m, n, k int, step bool, packed bf16Weights, name string) {
	switch {
	case step && !bf16Products():
		gemvRows(out, x, w, m, n, k)
	case step && packed != nil && useBF16Kernel:
		packed.matMulT(name, out, x, w, m, n, k)
	default:
		sgemm(false, true, m, n, k, 1, x, k, w, k, 0, out, n)
	}
}

// attention writes the causal attention of layer i for the new rows of every sequence: query
// row j of sequence s (position n+j, n its cached length before this step) attends to the
// cached positions 0..n+j, head hd reading key/value head hd/(Heads/KVHeads). A sequence with
// one new token (a decoding step) takes the Heads/KVHeads query heads that share a key/value
// head through one pair of products (their query and output rows are adjacent), so the cached
// keys and values are packed once for them: each element is the same sum in the same order as
// head by head (sgemm computes every element of c alone), so the logits are the same bits.
func (d *LlamaDecoder) attention(out, q []float32, caches []*LlamaCache, toks [][]int, start []int, i int, scale float32) {
	c := d.cfg
	dh := c.HeadDim()
	qw, kw := c.Heads*dh, c.KVHeads*dh
	group := c.Heads / c.KVHeads
	nb := len(toks) * c.Heads
	cost := 0
	for s := range toks {
		cost = max(cost, len(toks[s])*(caches[s].n+len(toks[s]))*dh)
	}
	parallelFor(nb, 2*cost, func(lo, hi int) {
		var buf []float32
		for sh := lo; sh < hi; sh++ {
			s, hd := sh/c.Heads, sh%c.Heads
			t := len(toks[s])
			n := caches[s].n // before this step
			keys := n + t
			rows, ld := t, qw // query rows (t positions of head hd), their stride in q and out
			if t == 1 {
				if hd%group != 0 {
					continue // done with head hd - hd%group
				}
				rows, ld = group, dh // the group's heads, adjacent in the row
			}
			if need := 2 * rows * keys; cap(buf) < need {
				buf = make([]float32, need)
			}
			sc, p := buf[:rows*keys], buf[rows*keys:2*rows*keys]
			kvo := (hd / group) * dh
			qo := start[s]*qw + hd*dh
			if t > 1 || !stepScores(sc, q[qo:], rows, dh, scale, caches[s], i, hd/group, keys) {
				sgemm(false, true, rows, keys, dh, scale, q[qo:], ld, caches[s].k[i][kvo:], kw, 0, sc, keys)
			}
			for j := 0; j < rows; j++ {
				valid := n + j + 1
				if t == 1 {
					valid = n + 1
				}
				softmaxRow32(p[j*keys:(j+1)*keys], sc[j*keys:(j+1)*keys], d.ones, valid)
			}
			sgemm(false, false, rows, dh, keys, 1, p, keys, caches[s].v[i][kvo:], kw, 0, out[qo:], ld)
		}
	})
}

// stepScores sets sc [rows, keys] = scale · q·kᵀ for the rows adjacent query rows of q (dh
// values each, at most 6) and the first keys keys of key/value head h of layer i, reading the
// cache's packed keys: sgemm's 6 x 16 kernel on sgemm's own packing of both operands, so each
// score is the same bits as sgemm(false, true, rows, keys, dh, scale, q, dh, k, kw, 0, sc,
// keys) gives. It reports false (nothing done) where that kernel is not what sgemm runs (another
// float32 path, or bfloat16 products).
func stepScores(sc, q []float32, rows, dh int, scale float32, c *LlamaCache, i, h, keys int) bool {
	if sgemmExt != nil || !haveAVX2FMA || bf16Products() || rows > gemmMR || dh > gemmKC {
		return false
	}
	var ap [gemmMR * gemmKC]float32
	var tmp [gemmMR * gemmNR]float32
	for r := 0; r < rows; r++ {
		for d := 0; d < dh; d++ {
			ap[d*gemmMR+r] = scale * q[r*dh+d]
		}
	}
	kp := c.kp[i][h*c.panels*dh*gemmNR:]
	for j := 0; j < keys; j += gemmNR {
		sgemmKernel6x16(dh, &ap[0], &kp[(j/gemmNR)*dh*gemmNR], &tmp[0], gemmNR, nil, false)
		nr := min(gemmNR, keys-j)
		for r := 0; r < rows; r++ {
			copy(sc[r*keys+j:r*keys+j+nr], tmp[r*gemmNR:r*gemmNR+nr])
		}
	}
	return true
}

// SampleOptions say how Generate picks each next token.
type SampleOptions struct {
	MaxNew      int     // at most this many new tokens per prompt (the stop token included)
	Temperature float64 // 0: greedy (the most probable token, the lowest id on ties); above 0: sample from softmax(logits/Temperature)
	TopP        float64 // nucleus sampling (Holtzman et al., 2020): sample among the most probable tokens whose probabilities sum to at least TopP; 0 or 1: all
	Seed        uint64  // prompt i draws from PCG(Seed, i), so a seed fixes every sample whatever the batch
	Stop        []int   // token ids that end a generation (not part of its Tokens)
	Batch       int     // prompts decoded together (0: 8)
}

// Generate continues every prompt (token ids, at least one) until a stop id, MaxNew tokens or
// the context (max_position_embeddings) ends it; a prompt whose length plus MaxNew exceeds the
// context is an error before anything runs. Prompts are decoded Batch at a time, each with its
// own cache; the result is in prompt order. LogProb sums the chosen tokens' log-probabilities
// under the model (before temperature and top-p).
func (d *LlamaDecoder) Generate(prompts [][]int, o SampleOptions) ([]Generation, error) {
	c := d.cfg
	if o.MaxNew < 0 || o.Temperature < 0 || math.IsNaN(o.Temperature) || o.TopP < 0 || o.TopP > 1 || math.IsNaN(o.TopP) {
		return nil, fmt.Errorf("model: generate: max new tokens %d, temperature %g, top-p %g: want >= 0, >= 0 and in [0,1]", o.MaxNew, o.Temperature, o.TopP)
	}
	for _, s := range o.Stop {
		if s < 0 || s >= c.Vocab {
			return nil, fmt.Errorf("model: generate: stop id %d is out of range [0,%d)", s, c.Vocab)
		}
	}
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("model: generate: prompt %d is empty", i)
		}
		if len(p)+o.MaxNew > c.MaxPosition {
			return nil, fmt.Errorf("model: generate: prompt %d has %d tokens; with %d new tokens that is %d, beyond the context of %d", i, len(p), o.MaxNew, len(p)+o.MaxNew, c.MaxPosition)
		}
		if err := checkIDs("generate", p, c.Vocab); err != nil {
			return nil, fmt.Errorf("prompt %d: %w", i, err)
		}
	}
	batch := o.Batch
	if batch <= 0 {
		batch = 8
	}
	res := make([]Generation, len(prompts))
	var packed bf16Weights // bfloat16 products: the weights packed once for every decoding step
	if bf16Products() {
		packed = bf16Weights{}
	}
	for lo := 0; lo < len(prompts); lo += batch {
		hi := min(lo+batch, len(prompts))
		if err := d.generateBatch(prompts[lo:hi], res[lo:hi], lo, o, packed); err != nil {
			return nil, fmt.Errorf("model: generate: prompts %d..%d: %w", lo, hi-1, err)
		}
	}
	return res, nil
}

func (d *LlamaDecoder) generateBatch(prompts [][]int, res []Generation, first int, o SampleOptions, packed bf16Weights) error {
	if o.MaxNew == 0 {
		return nil
	}
	caches := make([]*LlamaCache, len(prompts))
	rngs := make([]*rand.Rand, len(prompts))
	for i, p := range prompts {
		c, err := d.NewCache(len(p) + o.MaxNew)
		if err != nil {
			return err
		}
		caches[i] = c
		rngs[i] = rand.New(rand.NewPCG(o.Seed, uint64(first+i)))
	}
	active := make([]int, len(prompts)) // the sequences still running
	toks := make([][]int, len(prompts))
	for i, p := range prompts {
		active[i], toks[i] = i, p
	}
	s := &sampler{o: o}
	for step := 0; len(active) > 0; step++ {
		cs := make([]*LlamaCache, len(active))
		for j, i := range active {
			cs[j] = caches[i]
		}
		logits, err := d.forward(cs, toks[:len(active)], false, false, packed)
		if err != nil {
			return err
		}
		next := active[:0]
		nextToks := toks[:0]
		for j, i := range active {
			id, lp := s.pick(logits[j], rngs[i])
			res[i].LogProb += lp
			if slices.Contains(o.Stop, id) {
				res[i].Stopped = true
				continue
			}
			res[i].Tokens = append(res[i].Tokens, id)
			if len(res[i].Tokens) < o.MaxNew {
				next = append(next, i)
				nextToks = append(nextToks, []int{id})
			}
		}
		active, toks = next, nextToks
	}
	return nil
}

// sampler picks tokens from logits as SampleOptions say; its buffers are reused.
type sampler struct {
	o     SampleOptions
	p     []float64
	order []int
}

// pick returns the chosen id and its log-probability under softmax(logits).
func (s *sampler) pick(logits []float32, r *rand.Rand) (int, float64) {
	mx := logits[0]
	best := 0
	for i, z := range logits {
		if z > mx {
			mx, best = z, i
		}
	}
	if len(s.p) != len(logits) {
		s.p = make([]float64, len(logits))
		s.order = make([]int, len(logits))
	}
	var sum float64
	for i, z := range logits {
		s.p[i] = math.Exp(float64(z - mx))
		sum += s.p[i]
	}
	lse := float64(mx) + math.Log(sum)
	if s.o.Temperature == 0 {
		return best, float64(logits[best]) - lse
	}
	// softmax(logits / T), then the nucleus.
	var tsum float64
	for i, z := range logits {
		s.p[i] = math.Exp(float64(z-mx) / s.o.Temperature)
		tsum += s.p[i]
	}
	for i := range s.p {
		s.p[i] /= tsum
	}
	keep := len(logits)
	for i := range s.order {
		s.order[i] = i
	}
	slices.SortStableFunc(s.order, func(a, b int) int {
		switch {
		case s.p[a] > s.p[b]:
			return -1
		case s.p[a] < s.p[b]:
			return 1
		}
		return 0
	})
	if s.o.TopP > 0 && s.o.TopP < 1 {
		var cum float64
		for j, i := range s.order {
			cum += s.p[i]
			if cum >= s.o.TopP {
				keep = j + 1
				break
			}
		}
	}
	var mass float64
	for _, i := range s.order[:keep] {
		mass += s.p[i]
	}
	u := r.Float64() * mass
	id := s.order[keep-1]
	for _, i := range s.order[:keep] {
		u -= s.p[i]
		if u < 0 {
			id = i
			break
		}
	}
	return id, float64(logits[id]) - lse
}

// Hidden is the model's hidden size, the values of a key row (KeepKeys).
func (d *LlamaDecoder) Hidden() int { return d.cfg.Hidden }
