package losses

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// input is one graph input of a test: a float64 array bound as a node of the test's dtype.
// Gradients are taken with respect to the inputs with wrt set.
type input struct {
	name  string
	shape []int
	data  []float64
	wrt   bool
}

// builder builds a loss from the input nodes, keyed by input name.
type builder func(in map[string]*G.Node) (*G.Node, error)

// evalGraph builds the loss over the inputs in dtype dt, differentiates it with gorgonia.Grad
// (when grad is set) and runs a TapeMachine, the way the trainer does. It returns the loss and
// the gradient of every wrt input, as float64.
func evalGraph(dt tensor.Dtype, build builder, grad bool, ins ...input) (float64, map[string][]float64, error) {
	g := G.NewGraph()
	nodes := make(map[string]*G.Node, len(ins))
	var wrt G.Nodes
	for _, in := range ins {
		if len(in.data) != tensor.Shape(in.shape).TotalSize() {
			return 0, nil, fmt.Errorf("input %s: %d values for shape %v", in.name, len(in.data), in.shape)
		}
		v := fromFloat64(append([]float64(nil), in.data...), tensor.Shape(in.shape).Clone(), dt)
		n := G.NewTensor(g, dt, len(in.shape), G.WithShape(in.shape...), G.WithName(in.name), G.WithValue(v))
		nodes[in.name] = n
		if in.wrt {
			wrt = append(wrt, n)
		}
	}
	loss, err := build(nodes)
	if err != nil {
		return 0, nil, err
	}
	if grad && len(wrt) > 0 {
		if _, err := G.Grad(loss, wrt...); err != nil {
			return 0, nil, fmt.Errorf("grad: %w", err)
		}
	}
	var opts []G.VMOpt
	if grad {
		opts = append(opts, G.BindDualValues(wrt...))
	}
	vm := G.NewTapeMachine(g, opts...)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return 0, nil, err
	}
	l, err := scalarOf(loss.Value())
	if err != nil {
		return 0, nil, err
	}
	grads := make(map[string][]float64)
	if grad {
		for _, in := range ins {
			if !in.wrt {
				continue
			}
			gv, err := nodes[in.name].Grad()
			if err != nil {
				return 0, nil, fmt.Errorf("grad of %s: %w", in.name, err)
			}
			a, _, err := toArr(gv)
			if err != nil {
				return 0, nil, fmt.Errorf("grad of %s: %w", in.name, err)
			}
			grads[in.name] = a.data
		}
	}
	return l, grads, nil
}

// mustEval is evalGraph with gradients, failing the test on error.
func mustEval(t testing.TB, dt tensor.Dtype, build builder, ins ...input) (float64, map[string][]float64) {
	t.Helper()
	l, grads, err := evalGraph(dt, build, true, ins...)
	if err != nil {
		t.Fatal(err)
	}
	return l, grads
}

func scalarOf(v G.Value) (float64, error) {
	switch d := v.Data().(type) {
	case float64:
		return d, nil
	case float32:
		return float64(d), nil
	case []float64:
		if len(d) == 1 {
			return d[0], nil
		}
	case []float32:
		if len(d) == 1 {
			return float64(d[0]), nil
		}
	}
	return 0, fmt.Errorf("loss is not a scalar: %v (%T)", v, v.Data())
}

// checkFiniteDiff compares the analytic gradient of every wrt input (float64) with central
// differences of the loss, to rtol relative plus atol absolute.
func checkFiniteDiff(t *testing.T, build builder, rtol, atol float64, ins ...input) {
	t.Helper()
	_, grads := mustEval(t, tensor.Float64, build, ins...)
	for k, in := range ins {
		if !in.wrt {
			continue
		}
		for i, x := range in.data {
			h := 1e-6 * math.Max(1, math.Abs(x))
			at := func(v float64) float64 {
				mod := append([]input(nil), ins...)
				mod[k].data = append([]float64(nil), in.data...)
				mod[k].data[i] = v
				l, _, err := evalGraph(tensor.Float64, build, false, mod...)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			num := (at(x+h) - at(x-h)) / (2 * h)
			if got := grads[in.name][i]; math.Abs(got-num) > atol+rtol*math.Abs(num) {
				t.Errorf("d/d%s[%d]: analytic %.10g, finite difference %.10g", in.name, i, got, num)
			}
		}
	}
}

// assertClose fails unless |got-want| <= rtol |want| + atol elementwise.
func assertClose(t *testing.T, what string, got, want []float64, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad, worst := 0, 0.0
	for i := range want {
		if d := math.Abs(got[i]-want[i]) / math.Max(math.Abs(want[i]), 1e-300); d > worst && math.Abs(want[i]) > atol {
			worst = d
		}
		if !(math.Abs(got[i]-want[i]) <= rtol*math.Abs(want[i])+atol) {
			if bad < 5 {
				t.Errorf("%s[%d] = %.12g, want %.12g", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(want))
	}
	t.Logf("%s: max relative error %.2g over %d values", what, worst, len(want))
}

// Tolerances of the golden comparisons: float64 must agree with PyTorch to 1e-6 relative;
// float32 runs the same graph and must agree to 1e-4 relative (plus a small absolute term for
// gradients near zero).
const (
	rtol64, atol64 = 1e-6, 1e-12
	rtol32, atol32 = 1e-4, 1e-6
)

// goldenCase is one case of testdata/losses.json.
type goldenCase map[string]any

func loadGolden(t *testing.T) []goldenCase {
	t.Helper()
	return loadGoldenFile(t, "testdata/losses.json")
}

// loadGoldenFile reads the cases of a golden file laid out as testdata/losses.json.
func loadGoldenFile(t *testing.T, path string) []goldenCase {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Source string       `json:"source"`
		Cases  []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f.Cases
}

// goldenCases returns the cases of the given kind, failing if there are none.
func goldenCases(t *testing.T, kind string) []goldenCase {
	t.Helper()
	var out []goldenCase
	for _, c := range loadGolden(t) {
		if c["kind"] == kind {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatalf("testdata/losses.json: no %q case", kind)
	}
	return out
}

// num returns a number field.
func (c goldenCase) num(t *testing.T, key string) float64 {
	t.Helper()
	v, ok := c[key].(float64)
	if !ok {
		t.Fatalf("golden %v: field %q is %T, want a number", c["kind"], key, c[key])
	}
	return v
}

// array returns a nested-list field flattened row-major, with its shape.
func (c goldenCase) array(t *testing.T, key string) ([]float64, []int) {
	t.Helper()
	v, ok := c[key]
	if !ok {
		t.Fatalf("golden %v: no field %q", c["kind"], key)
	}
	var data []float64
	var shape []int
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		switch x := v.(type) {
		case float64:
			if depth != len(shape) {
				t.Fatalf("golden %v: field %q is ragged", c["kind"], key)
			}
			data = append(data, x)
		case []any:
			if depth == len(shape) {
				shape = append(shape, len(x))
			} else if shape[depth] != len(x) {
				t.Fatalf("golden %v: field %q is ragged", c["kind"], key)
			}
			for _, e := range x {
				walk(e, depth+1)
			}
		default:
			t.Fatalf("golden %v: field %q holds %T", c["kind"], key, v)
		}
	}
	walk(v, 0)
	return data, shape
}

// wantLoss checks a loss against its golden value.
func wantLoss(t *testing.T, got, want, rtol float64) {
	t.Helper()
	rel := math.Abs(got-want) / math.Abs(want)
	if !(rel <= rtol) {
		t.Errorf("loss = %.12g, want %.12g (rel. err %.2g)", got, want, rel)
	}
	t.Logf("loss %.12g, relative error %.2g", got, rel)
}

// tolerances returns the golden tolerances for a dtype.
func tolerances(dt tensor.Dtype) (rtol, atol float64) {
	if dt == tensor.Float32 {
		return rtol32, atol32
	}
	return rtol64, atol64
}

var dtypes = []tensor.Dtype{tensor.Float64, tensor.Float32}

// evalValue builds the node over the inputs in dtype dt, runs it forward and returns its value.
func evalValue(t testing.TB, dt tensor.Dtype, build builder, ins ...input) ([]float64, []int) {
	t.Helper()
	g := G.NewGraph()
	nodes := make(map[string]*G.Node, len(ins))
	for _, in := range ins {
		v := fromFloat64(append([]float64(nil), in.data...), tensor.Shape(in.shape).Clone(), dt)
		nodes[in.name] = G.NewTensor(g, dt, len(in.shape), G.WithShape(in.shape...), G.WithName(in.name), G.WithValue(v))
	}
	out, err := build(nodes)
	if err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	a, _, err := toArr(out.Value())
	if err != nil {
		t.Fatal(err)
	}
	return a.data, a.shape
}
