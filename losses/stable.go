package losses

import (
	"fmt"
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file holds the numerically stable building blocks shared by the losses: row-wise
// log-sum-exp and log-softmax (max-subtracted, with analytic gradients) and softplus. They are
// custom ops rather than compositions of Gorgonia's SoftMax, whose gradient has been wrong in
// past releases; each is checked against finite differences in stable_test.go.

// lseRow returns log sum_c exp(x_c), subtracting the maximum first. A row of -Inf gives -Inf.
func lseRow(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	if math.IsInf(m, 0) {
		return m
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// rowLen returns the row length of a [R,C] array.
func rowLen(a arr) int { return a.shape[1] }

// byRow is the kernel of an op over [R,C] inputs of one shape that works a row at a time: it
// returns an array of that shape whose row r f writes (out, zeroed), given row r of every input.
func byRow(in []arr, f func(out []float64, rows [][]float64)) []float64 {
	c := rowLen(in[0])
	out := make([]float64, len(in[0].data))
	rows := make([][]float64, len(in))
	for lo := 0; lo < len(out); lo += c {
		for i, a := range in {
			rows[i] = a.data[lo : lo+c]
		}
		f(out[lo:lo+c], rows)
	}
	return out
}

// reduceRows returns the [R] array f(row r) of a [R,C] array.
func reduceRows(x arr, f func(row []float64) float64) []float64 {
	c := rowLen(x)
	out := make([]float64, x.shape[0])
	for r := range out {
		out[r] = f(x.data[r*c : (r+1)*c])
	}
	return out
}

// logSumExpRows returns the [R] node log sum_c exp(x_rc) of a [R,C] node x.
// Gradient: dx_rc = g_r softmax(x_r)_c.
func logSumExpRows(x *G.Node) (*G.Node, error) {
	return lseOp.apply(x)
}

var lseOp = &fop{
	name:    "logSumExpRows",
	inDims:  []int{2},
	outDims: 1,
	shape:   rowsShape("logSumExpRows"),
	fwd: func(in []arr) ([]float64, error) {
		return reduceRows(in[0], lseRow), nil
	},
	diff: []bool{true},
	grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
		dx, err := lseGradOp.apply(in[0], out, g)
		return G.Nodes{dx}, err
	},
}

// lseGradOp computes g_r exp(x_rc - lse_r) from (x [R,C], lse [R], g [R]).
var lseGradOp = &fop{
	name:    "logSumExpRowsGrad",
	inDims:  []int{2, 1, 1},
	outDims: 2,
	shape: func(in []tensor.Shape) (tensor.Shape, error) {
		if _, err := rowsShape("logSumExpRowsGrad")(in); err != nil {
			return nil, err
		}
		return in[0].Clone(), nil
	},
	fwd: func(in []arr) ([]float64, error) {
		x, lse, g := in[0], in[1].data, in[2].data
		c := rowLen(x)
		out := make([]float64, len(x.data))
		for r := range lse {
			if math.IsInf(lse[r], -1) {
				continue // every candidate excluded: no gradient
			}
			for j := r * c; j < (r+1)*c; j++ {
				out[j] = g[r] * math.Exp(x.data[j]-lse[r])
			}
		}
		return out, nil
	},
}

// logSoftmaxRows returns log softmax(x_r) for every row of a [R,C] node.
// Gradient: dx_rc = g_rc - softmax(x_r)_c sum_j g_rj.
func logSoftmaxRows(x *G.Node) (*G.Node, error) {
	return logSoftmaxOp.apply(x)
}

var logSoftmaxOp = &fop{
	name:    "logSoftmaxRows",
	inDims:  []int{2},
	outDims: 2,
	fwd: func(in []arr) ([]float64, error) {
		return byRow(in, func(out []float64, x [][]float64) {
			lse := lseRow(x[0])
			for j, v := range x[0] {
				out[j] = v - lse
			}
		}), nil
	},
	diff: []bool{true},
	grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
		dx, err := logSoftmaxGradOp.apply(out, g)
		return G.Nodes{dx}, err
	},
}

// logSoftmaxGradOp computes g_rc - exp(y_rc) sum_j g_rj from (y = log softmax [R,C], g [R,C]).
var logSoftmaxGradOp = &fop{
	name:    "logSoftmaxRowsGrad",
	inDims:  []int{2, 2},
	outDims: 2,
	fwd: func(in []arr) ([]float64, error) {
		return byRow(in, func(out []float64, yg [][]float64) {
			y, g := yg[0], yg[1]
			sum := 0.0
			for _, v := range g {
				sum += v
			}
			for j, v := range g {
				out[j] = v - math.Exp(y[j])*sum
			}
		}), nil
	},
}

// constSoftmaxRows returns softmax(scale * x_r) for every row of a [R,C] node, as a constant:
// no gradient flows back into x (teacher distributions, posteriors used as targets).
func constSoftmaxRows(x *G.Node, scale float64) (*G.Node, error) {
	op := &fop{
		name:    fmt.Sprintf("constSoftmaxRows(scale=%g)", scale),
		inDims:  []int{2},
		outDims: 2,
		fwd: func(in []arr) ([]float64, error) {
			return byRow(in, func(row []float64, x [][]float64) {
				for j, v := range x[0] {
					row[j] = scale * v
				}
				lse := lseRow(row)
				for j := range row {
					row[j] = math.Exp(row[j] - lse)
				}
			}), nil
		},
	}
	return op.apply(x)
}

// negEntropyRows returns the [R] constant node sum_c t_rc log t_rc of a [R,C] node of
// distributions, with 0 log 0 = 0 (so underflowed probabilities give no NaN).
func negEntropyRows(t *G.Node) (*G.Node, error) {
	return negEntropyOp.apply(t)
}

var negEntropyOp = &fop{
	name:    "negEntropyRows",
	inDims:  []int{2},
	outDims: 1,
	shape:   rowsShape("negEntropyRows"),
	fwd: func(in []arr) ([]float64, error) {
		return reduceRows(in[0], func(row []float64) float64 {
			s := 0.0
			for _, v := range row {
				if v > 0 {
					s += v * math.Log(v)
				}
			}
			return s
		}), nil
	},
}

// softplus returns log(1 + exp(x)) elementwise, computed as max(x,0) + log1p(exp(-|x|)) so
// that it neither overflows for large x nor loses precision for very negative x.
// Gradient: dx = g sigmoid(x).
func softplus(x *G.Node) (*G.Node, error) {
	op := &fop{
		name:    "softplus",
		inDims:  []int{x.Dims()},
		outDims: x.Dims(),
		fwd: func(in []arr) ([]float64, error) {
			out := make([]float64, len(in[0].data))
			for i, v := range in[0].data {
				out[i] = math.Max(v, 0) + math.Log1p(math.Exp(-math.Abs(v)))
			}
			return out, nil
		},
		diff: []bool{true},
		grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
			dx, err := softplusGrad(in[0].Dims()).apply(in[0], g)
			return G.Nodes{dx}, err
		},
	}
	return op.apply(x)
}

func softplusGrad(dims int) *fop {
	return &fop{
		name:    "softplusGrad",
		inDims:  []int{dims, dims},
		outDims: dims,
		fwd: func(in []arr) ([]float64, error) {
			x, g := in[0].data, in[1].data
			out := make([]float64, len(x))
			for i, v := range x {
				out[i] = g[i] * sigmoid(v)
			}
			return out, nil
		},
	}
}

// sigmoid is 1/(1+exp(-x)) without overflow for large |x|.
func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// identityCheck returns a constant copy of x after check accepts every value; check returns an
// error naming the offending element. It is how a loss validates its labels and masks at run
// time, when their values are known.
func identityCheck(x *G.Node, name string, check func(a arr) error) (*G.Node, error) {
	op := &fop{
		name:    name,
		inDims:  []int{x.Dims()},
		outDims: x.Dims(),
		fwd: func(in []arr) ([]float64, error) {
			if err := check(in[0]); err != nil {
				return nil, err
			}
			return in[0].data, nil
		},
	}
	return op.apply(x)
}

// validTau returns an error unless tau is a finite number > 0.
func validTau(loss, name string, tau float64) error {
	if !(tau > 0) || math.IsInf(tau, 1) {
		return errors.Errorf("losses: %s: %s = %g, want > 0", loss, name, tau)
	}
	return nil
}

// floatDtype returns the dtype shared by the nodes, or an error naming the loss and the input.
func floatDtype(loss string, names []string, ns ...*G.Node) (tensor.Dtype, error) {
	var dt tensor.Dtype
	for i, n := range ns {
		if n == nil {
			return dt, errors.Errorf("losses: %s: %s is nil", loss, names[i])
		}
		d, err := nodeDtype(n)
		if err != nil {
			return dt, errors.Wrapf(err, "losses: %s: %s", loss, names[i])
		}
		if d != tensor.Float32 && d != tensor.Float64 {
			return dt, errors.Errorf("losses: %s: %s is %v, want float32 or float64", loss, names[i], d)
		}
		if i > 0 && d != dt {
			return dt, errors.Errorf("losses: %s: %s is %v but %s is %v", loss, names[i], d, names[0], dt)
		}
		dt = d
	}
	return dt, nil
}

// nodeDtype is n.Dtype() without its panic on a node whose type has no dtype.
func nodeDtype(n *G.Node) (dt tensor.Dtype, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.Errorf("no dtype: %v", r)
		}
	}()
	return n.Dtype(), nil
}

// scalar returns a constant of the given dtype.
func scalar(dt tensor.Dtype, v float64) *G.Node {
	if dt == tensor.Float32 {
		return G.NewConstant(float32(v))
	}
	return G.NewConstant(v)
}

// wantQueryRows checks the inputs of a loss that scores every query against every row of a
// second matrix at temperature tau: tau a finite number > 0, q [B,H] and rows (named rowsName
// in the error) [N,H].
func wantQueryRows(loss string, q *G.Node, rowsName string, rows *G.Node, tau float64) error {
	if err := validTau(loss, "temperature", tau); err != nil {
		return err
	}
	if err := wantShape(loss, "q", q, -1, -1); err != nil {
		return err
	}
	return wantShape(loss, rowsName, rows, -1, q.Shape()[1])
}

// wantShape returns an error unless n has exactly the given rank (and, where a size is >= 0,
// that size).
func wantShape(loss, name string, n *G.Node, dims ...int) error {
	s := n.Shape()
	if len(s) != len(dims) {
		return errors.Errorf("losses: %s: %s has shape %v, want rank %d", loss, name, s, len(dims))
	}
	for i, d := range dims {
		if d >= 0 && s[i] != d {
			return errors.Errorf("losses: %s: %s has shape %v, want size %d on axis %d", loss, name, s, d, i)
		}
	}
	return nil
}
