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

// LoRAConfig describes low-rank adapters (Hu et al., 2021, "LoRA: Low-Rank Adaptation of Large
// Language Models", eq. 3; peft's LoraConfig, whose adapter_config.json keys are given): each
// target projection W [out,in] of every block computes
//
//	y = x·Wᵀ + (Alpha/Rank) · Dropout(x)·Aᵀ·Bᵀ,   A [Rank,in], B [out,Rank],
//
// with W frozen and only A and B trained.
type LoRAConfig struct {
	Rank    int      `json:"r"`              // r, 1..min(in,out) of every target
	Alpha   float64  `json:"lora_alpha"`     // the scale is Alpha/Rank; > 0
	Dropout float64  `json:"lora_dropout"`   // dropout on the adapter's input in training, [0,1)
	Targets []string `json:"target_modules"` // LoRATargets names, e.g. q_proj, v_proj
}

// LoRATargets are the projections an adapter can target, by peft's module name, with the block
// parameter they adapt.
var LoRATargets = map[string]string{
	"q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj", "o_proj": "self_attn.o_proj",
	"gate_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj", "down_proj": "mlp.down_proj",
}

// Scale is Alpha/Rank.
func (c LoRAConfig) Scale() float64 { return c.Alpha / float64(c.Rank) }

// Validate checks the rank, alpha, dropout and targets (known, no repeats, at least one).
func (c LoRAConfig) Validate() error {
	if c.Rank <= 0 || c.Rank > llamaMaxHidden {
		return fmt.Errorf("model: lora rank = %d, want 1..%d", c.Rank, llamaMaxHidden)
	}
	if !(c.Alpha > 0) || math.IsInf(c.Alpha, 0) {
		return fmt.Errorf("model: lora alpha = %g, want a finite value above 0", c.Alpha)
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		return fmt.Errorf("model: lora dropout = %g, want in [0,1)", c.Dropout)
	}
	if len(c.Targets) == 0 {
		return fmt.Errorf("model: lora targets are empty, want some of q_proj k_proj v_proj o_proj gate_proj up_proj down_proj")
	}
	for i, t := range c.Targets {
		if _, ok := LoRATargets[t]; !ok {
			return fmt.Errorf("model: lora target %q, want one of q_proj k_proj v_proj o_proj gate_proj up_proj down_proj", t)
		}
		if slices.Contains(c.Targets[:i], t) {
			return fmt.Errorf("model: lora target %q given twice", t)
		}
	}
	return nil
}

// LlamaLoRA holds the adapters of a Llama: for every block and target, lora_A [Rank,in] and
// lora_B [out,Rank] named after the adapted weight as peft names them without its
// "base_model.model." prefix, e.g. model.layers.3.self_attn.q_proj.lora_A.weight (Q/K rows of
// B in the order of the Llama's own Q/K rows, transformers' order).
type LlamaLoRA struct {
	Cfg LoRAConfig
	// Train turns on the adapter dropout (Cfg.Dropout) in graphs built afterwards; RNG draws its
	// masks (as Dropout).
	Train bool
	RNG   *RNG

	params []*Param
	byName map[string]*Param
}

// loraName is the adapter parameter ("A" or "B") of a block weight name.
func loraName(weight, ab string) string {
	return strings.TrimSuffix(weight, ".weight") + ".lora_" + ab + ".weight"
}

// NewLlamaLoRA validates cfg against m and creates its adapters as peft initialises them: A
// Kaiming-uniform with a = √5 (U(-1/√in, 1/√in), torch's nn.Linear default), B zero, so the
// adapted model starts equal to m. Draws come from one PCG stream in the order of Params.
func NewLlamaLoRA(m *Llama, cfg LoRAConfig, seed uint64) (*LlamaLoRA, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, streamInit))
	return newLlamaLoRA(m, cfg, func(p *Param, in int) {
		if strings.HasSuffix(p.Name, ".lora_A.weight") {
			bound := 1 / math.Sqrt(float64(in))
			p.fill(func() float64 { return (2*r.Float64() - 1) * bound })
		}
	})
}

// newLlamaLoRA allocates the adapters of cfg for m (zero) and lets fill set each with the
// adapted weight's input width.
func newLlamaLoRA(m *Llama, cfg LoRAConfig, fill func(p *Param, in int)) (*LlamaLoRA, error) {
	l := &LlamaLoRA{Cfg: cfg, byName: map[string]*Param{}}
	for i := 0; i < m.Cfg.Layers; i++ {
		for _, what := range llamaBlockParams {
			if !slices.Contains(cfg.Targets, what[strings.LastIndexByte(what, '.')+1:]) {
				continue // a norm, or a projection not targeted
			}
			w := m.byName[llamaLayer(i, what)]
			out, in := w.Value.Shape()[0], w.Value.Shape()[1]
			if cfg.Rank > min(out, in) {
				return nil, fmt.Errorf("model: lora rank %d exceeds %s [%d,%d]", cfg.Rank, w.Name, out, in)
			}
			a, b := newParam(loraName(w.Name, "A"), m.dt, cfg.Rank, in), newParam(loraName(w.Name, "B"), m.dt, out, cfg.Rank)
			for _, p := range []*Param{a, b} {
				fill(p, in)
				l.params = append(l.params, p)
				l.byName[p.Name] = p
			}
		}
	}
	return l, nil
}

// Params returns the adapters, block by block, in the order of the Llama table, A before B.
func (l *LlamaLoRA) Params() []*Param { return append([]*Param(nil), l.params...) }

// Param returns the adapter of that name, or nil.
func (l *LlamaLoRA) Param(name string) *Param { return l.byName[name] }

// AttachLoRA makes m's graphs built afterwards add l's adapters to their projections (nil
// removes them). The cached decoder (LlamaDecoder) ignores adapters: merge them first
// (MergeLoRA).
func (m *Llama) AttachLoRA(l *LlamaLoRA) { m.lora = l }

// LoRA returns the attached adapters, or nil.
func (m *Llama) LoRA() *LlamaLoRA { return m.lora }

// linear is x·Wᵀ for the block weight what of layer i, plus its adapter's term when one is
// attached: Scale · (Dropout(x)·Aᵀ)·Bᵀ (the scale applied to the [N,Rank] product); seeds as in
// block.
func (m *Llama) linear(b *Binder, x *gorgonia.Node, i int, what string, seeds *dropSeeds) (*gorgonia.Node, error) {
	name := llamaLayer(i, what)
	y, err := MatMul(x, m.node(b, name), false, true)
	l := m.lora
	if err != nil || l == nil {
		return y, err
	}
	pa, ok := l.byName[loraName(name, "A")]
	if !ok {
		return y, nil
	}
	h := x
	if l.Train {
		if h, err = seeds.dropout(x, l.Cfg.Dropout, l.RNG); err != nil {
			return nil, err
		}
	}
	t, err := MatMul(h, b.Node(pa), false, true)
	if err != nil {
		return nil, err
	}
	var s *gorgonia.Node
	if m.dt == tensor.Float64 {
		s = gorgonia.NewConstant(l.Cfg.Scale())
	} else {
		s = gorgonia.NewConstant(float32(l.Cfg.Scale()))
	}
	if t, err = gorgonia.Mul(t, s); err != nil {
		return nil, fmt.Errorf("model: lora scale: %w", err)
	}
	if t, err = MatMul(t, b.Node(l.byName[loraName(name, "B")]), false, true); err != nil {
		return nil, err
	}
	return Add(y, t)
}

// MergeLoRA returns a copy of m without adapters whose adapted weights are W + Scale·B·A
// (computed in float64, rounded once to m's dtype): the same function as m with its adapters,
// for the cached decoder and for export. m itself is unchanged; without adapters the copy is
// exact.
func (m *Llama) MergeLoRA() (*Llama, error) {
	l := m.lora
	return NewLlamaFrom(m.Cfg, m.dt, func(p *Param) error {
		src := m.byName[p.Name].Value
		if err := copyInto(p.Value, src); err != nil {
			return err
		}
		if l == nil {
			return nil
		}
		pa, ok := l.byName[loraName(p.Name, "A")]
		if !ok {
			return nil
		}
		a, bm := Float64s(pa.Value), Float64s(l.byName[loraName(p.Name, "B")].Value)
		w := Float64s(src)
		out, in, r, s := src.Shape()[0], src.Shape()[1], l.Cfg.Rank, l.Cfg.Scale()
		merged := make([]float64, out*in)
		for o := 0; o < out; o++ {
			for j := 0; j < in; j++ {
				var d float64
				for k := 0; k < r; k++ {
					d += bm[o*r+k] * a[k*in+j]
				}
				merged[o*in+j] = w[o*in+j] + s*d
			}
		}
		setValues(p.Value, merged)
		return nil
	})
}

// copyInto copies src's elements into dst of the same dtype and size.
func copyInto(dst, src *tensor.Dense) error {
	switch d := dst.Data().(type) {
	case []float32:
		copy(d, src.Data().([]float32))
	case []float64:
		copy(d, src.Data().([]float64))
	default:
		return fmt.Errorf("model: copy of %v", dst.Dtype())
	}
	return nil
}

// Float64s returns a tensor's float32 or float64 elements as float64 (a copy for float32, the
// tensor's own slice for float64; nil for another dtype).
func Float64s(t *tensor.Dense) []float64 {
	switch d := t.Data().(type) {
	case []float64:
		return d
	case []float32:
		out := make([]float64, len(d))
		for i, v := range d {
			out[i] = float64(v)
		}
		return out
	}
	return nil
}

// setValues writes v into t, rounding to float32 for a float32 tensor.
func setValues(t *tensor.Dense, v []float64) {
	switch d := t.Data().(type) {
	case []float64:
		copy(d, v)
	case []float32:
		for i := range d {
			d[i] = float32(v[i])
		}
	}
}
