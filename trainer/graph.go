package trainer

import (
	"fmt"

	"gorgonia.org/gorgonia"

	"github.com/ragtrain/ragtrain/model"
)

// GraphParams is the trainer's side of a training graph: the parameters bound in it, with the
// gradients of the last run. A task embeds it for Params and AfterUpdate.
type GraphParams struct {
	VM     gorgonia.VM
	bound  []model.Bound
	params []Param
}

// NewGraphParams takes the parameters bound by b in the graph that vm runs.
func NewGraphParams(b *model.Binder, vm gorgonia.VM) GraphParams {
	gp := GraphParams{VM: vm, bound: b.Bound()}
	gp.params = make([]Param, len(gp.bound))
	for i, bd := range gp.bound {
		gp.params[i] = Param{Name: bd.Param.Name, Value: bd.Param.Value.Data().([]float32)}
	}
	return gp
}

// NewGraphParamsOf is NewGraphParams for the bound parameters keep selects: the trainable ones
// (gradients taken and bound as dual values for them only); the others stay frozen.
func NewGraphParamsOf(b *model.Binder, vm gorgonia.VM, keep func(*model.Param) bool) GraphParams {
	gp := GraphParams{VM: vm}
	for _, bd := range b.Bound() {
		if keep(bd.Param) {
			gp.bound = append(gp.bound, bd)
			gp.params = append(gp.params, Param{Name: bd.Param.Name, Value: bd.Param.Value.Data().([]float32)})
		}
	}
	return gp
}

// Run runs the graph's forward and backward pass and points every parameter's Grad at its
// gradient.
func (gp *GraphParams) Run() error {
	if err := gp.VM.RunAll(); err != nil {
		return err
	}
	for i, bd := range gp.bound {
		gv, err := bd.Node.Grad()
		if err != nil {
			return fmt.Errorf("gradient of %s: %w", bd.Param.Name, err)
		}
		gp.params[i].Grad = gv.Data().([]float32)
	}
	return nil
}

// Params are the bound parameters with their gradients of the last run.
func (gp *GraphParams) Params() []Param { return gp.params }

// AfterUpdate zeroes the gradients (a TapeMachine adds each run's gradients to the previous
// ones) and resets the machine for the next step.
func (gp *GraphParams) AfterUpdate() {
	for _, p := range gp.params {
		clear(p.Grad)
	}
	gp.VM.Reset()
}

// ScalarValue reads the value of a scalar (or one-element) node, a loss.
func ScalarValue(n *gorgonia.Node) float64 {
	switch v := n.Value().Data().(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	case []float32:
		return float64(v[0])
	case []float64:
		return v[0]
	}
	panic(fmt.Sprintf("loss node holds %T", n.Value().Data()))
}
