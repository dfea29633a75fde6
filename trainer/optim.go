package trainer

import (
	"fmt"
	"math"
	"strings"
)

// Param is one trainable tensor seen by the optimizer: its name (as in the checkpoint), its
// values (updated in place) and, after Task.Step, its gradient. Value and Grad have the same
// length; Grad may be nil when the parameter took no part in the step. LRScale multiplies the
// learning rate (and so the decoupled weight decay) of this parameter, for learning rates per
// tower; 0 means 1. ClipGroup names the group whose gradient norm ClipGlobalNorm bounds
// separately ("" for the main group): a tower that learns at its own rate is clipped on its own,
// so that its gradients do not shrink the others'.
type Param struct {
	Name      string
	Value     []float32
	Grad      []float32
	LRScale   float64
	ClipGroup string
}

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter 2019, Algorithm 2):
//
//	m = β1 m + (1-β1) g;  v = β2 v + (1-β2) g²
//	θ ← θ - lr · ( m̂ / (√v̂ + ε) + λ θ )      with m̂ = m/(1-β1^t), v̂ = v/(1-β2^t)
//
// Weight decay λ is not applied to biases, LayerNorm parameters or position/type embeddings
// (names ending in ".bias", or containing "norm", ".position" or ".type"), as in BERT.
// Moments are kept per parameter name, so they can be saved and restored (State, SetState).
type AdamW struct {
	Beta1, Beta2, Eps, WeightDecay float64
	step                           int
	m, v                           map[string][]float32
	window                         LogWindow // Run's log window, for State
}

// NewAdamW returns AdamW with β1 = 0.9, β2 = 0.999, ε = 1e-8 and the given decoupled weight decay.
func NewAdamW(weightDecay float64) *AdamW {
	return &AdamW{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: weightDecay,
		m: map[string][]float32{}, v: map[string][]float32{}}
}

// Decays reports whether decoupled weight decay applies to the parameter of that name.
func Decays(name string) bool {
	return !(strings.HasSuffix(name, ".bias") || strings.Contains(name, "norm") ||
		strings.Contains(name, ".position") || strings.Contains(name, ".type"))
}

// Step applies one update with learning rate lr to every parameter that has a gradient.
func (o *AdamW) Step(params []Param, lr float64) {
	o.step++
	bc1 := 1 - math.Pow(o.Beta1, float64(o.step))
	bc2 := 1 - math.Pow(o.Beta2, float64(o.step))
	b1, b2 := float32(o.Beta1), float32(o.Beta2)
	stepSize := float32(lr / bc1)
	sqrtBC2 := float32(math.Sqrt(bc2))
	eps := float32(o.Eps)
	for _, p := range params {
		if p.Grad == nil {
			continue
		}
		m, v := o.m[p.Name], o.v[p.Name]
		if m == nil {
			m, v = make([]float32, len(p.Value)), make([]float32, len(p.Value))
			o.m[p.Name], o.v[p.Name] = m, v
		}
		step, plr := stepSize, lr
		if p.LRScale != 0 && p.LRScale != 1 {
			plr = lr * p.LRScale
			step = float32(plr / bc1)
		}
		decay := float32(1)
		if Decays(p.Name) {
			decay = float32(1 - plr*o.WeightDecay)
		}
		w, g := p.Value, p.Grad[:len(p.Value)]
		m, v = m[:len(w)], v[:len(w)]
		for i := range w {
			gi := g[i]
			m[i] = b1*m[i] + (1-b1)*gi
			v[i] = b2*v[i] + (1-b2)*gi*gi
			denom := float32(math.Sqrt(float64(v[i])))/sqrtBC2 + eps
			w[i] = w[i]*decay - step*m[i]/denom
		}
	}
}

// OptimizerState is AdamW's state: the step count and both moments per parameter name.
type OptimizerState struct {
	Step int
	M, V map[string][]float32
	// Window is the training loop's log window when the state was taken (Run keeps it in the
	// optimizer it drives): the steps since the last log line, restored with the optimizer so
	// that a run resumed from a step that is not a multiple of LogEvery logs the mean over the
	// same steps as an uninterrupted one.
	Window LogWindow
}

// LogWindow is the part of a log window the loop has run: the sum of the losses, the steps and
// the examples since the last log line.
type LogWindow struct {
	Loss            float64
	Steps, Examples int
}

// State returns the optimizer state (the slices are the optimizer's own; copy before mutating).
func (o *AdamW) State() OptimizerState {
	return OptimizerState{Step: o.step, M: o.m, V: o.v, Window: o.window}
}

// SetState restores a state saved by State.
func (o *AdamW) SetState(s OptimizerState) error {
	if len(s.M) != len(s.V) {
		return fmt.Errorf("adamw: state has %d first moments but %d second moments", len(s.M), len(s.V))
	}
	o.step, o.m, o.v, o.window = s.Step, map[string][]float32{}, map[string][]float32{}, s.Window
	for k, m := range s.M {
		v, ok := s.V[k]
		if !ok || len(v) != len(m) {
			return fmt.Errorf("adamw: parameter %q: moments of different sizes or missing", k)
		}
		o.m[k], o.v[k] = append([]float32(nil), m...), append([]float32(nil), v...)
	}
	return nil
}

// ClipGlobalNorm scales every gradient by min(1, maxNorm/‖g‖₂), ‖g‖₂ over all parameters
// together (Pascanu et al. 2013), and returns the norm before clipping. maxNorm <= 0 only
// measures.
//
// Parameters with a ClipGroup are clipped by their group's own norm; the norm returned is then
// that of every gradient together.
func ClipGlobalNorm(params []Param, maxNorm float64) float64 {
	grouped := false
	for _, p := range params {
		grouped = grouped || p.ClipGroup != ""
	}
	if grouped {
		groups := map[string][]Param{}
		var order []string
		for _, p := range params {
			if _, ok := groups[p.ClipGroup]; !ok {
				order = append(order, p.ClipGroup)
			}
			groups[p.ClipGroup] = append(groups[p.ClipGroup], p)
		}
		var sq float64
		for _, g := range order {
			n := ClipGlobalNorm(ungrouped(groups[g]), maxNorm)
			sq += n * n
		}
		return math.Sqrt(sq)
	}
	var sq float64
	for _, p := range params {
		for _, g := range p.Grad {
			sq += float64(g) * float64(g)
		}
	}
	norm := math.Sqrt(sq)
	if maxNorm > 0 && norm > maxNorm {
		s := float32(maxNorm / norm)
		for _, p := range params {
			for i := range p.Grad {
				p.Grad[i] *= s
			}
		}
	}
	return norm
}

// ungrouped returns params with ClipGroup cleared (the gradients are shared).
func ungrouped(params []Param) []Param {
	out := make([]Param, len(params))
	for i, p := range params {
		p.ClipGroup = ""
		out[i] = p
	}
	return out
}

// Schedule is a learning-rate schedule: linear warm-up from 0 to the peak over Warmup steps,
// then "linear" decay to 0 at Total, "cosine" decay to 0 at Total, or "constant".
type Schedule struct {
	Peak          float64
	Warmup, Total int
	Kind          string
}

// LR returns the learning rate for step (0-based: the rate used by the step-th update).
func (s Schedule) LR(step int) float64 {
	if s.Warmup > 0 && step < s.Warmup {
		return s.Peak * float64(step+1) / float64(s.Warmup)
	}
	if s.Kind == "constant" || s.Total <= s.Warmup {
		return s.Peak
	}
	frac := float64(step-s.Warmup) / float64(s.Total-s.Warmup)
	if frac > 1 {
		frac = 1
	}
	switch s.Kind {
	case "cosine":
		return s.Peak * 0.5 * (1 + math.Cos(math.Pi*frac))
	default: // linear
		return s.Peak * (1 - frac)
	}
}
