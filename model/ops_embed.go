package model

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Gather looks up rows of an embedding matrix: out[i] = w[ids[i]].
//
// w is [V,H] (float32 or float64); ids is an int tensor of N ids, each in
// [0,V) (Run fails naming the first id out of range). The result is [N,H].
// The gradient with respect to w is a scatter-add of the output gradient into
// a zeroed [V,H] tensor, touching only the rows of the ids; ids get none.
func Gather(w, ids *gorgonia.Node) (*gorgonia.Node, error) {
	return apply(gatherK{}, w, ids)
}

type gatherK struct{}

func (gatherK) name() string { return "Gather" }
func (gatherK) typ() hm.Type { return fnType(ft(2), it(1), ft(2)) }
func (gatherK) diff() []bool { return []bool{true, false} }
func (gatherK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{k: scatterK{rows: in[0][0]}, args: []int{1, argGrad}}, nil}
}

func (k gatherK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	if err := wantVec(k.name(), 1, in[1], -1); err != nil {
		return nil, err
	}
	return tensor.Shape{in[1][0], in[0][1]}, nil
}

func (k gatherK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	ids, err := ints(k.name(), in[1])
	if err != nil {
		return err
	}
	v, h := in[0].Shape()[0], in[0].Shape()[1]
	if err := checkIDs(k.name(), ids, v); err != nil {
		return err
	}
	switch o := out.Data().(type) {
	case []float32:
		gatherRows(o, data[float32](in[0]), ids, h)
	case []float64:
		gatherRows(o, data[float64](in[0]), ids, h)
	}
	return nil
}

func checkIDs(op string, ids []int, v int) error {
	for i, id := range ids {
		if id < 0 || id >= v {
			return fmt.Errorf("model: %s: id %d at position %d is out of range [0,%d)", op, id, i, v)
		}
	}
	return nil
}

func gatherRows[T float](out, w []T, ids []int, h int) {
	for i, id := range ids {
		copy(out[i*h:(i+1)*h], w[id*h:(id+1)*h])
	}
}

// scatterK is the gradient of Gather: (ids [N], g [N,H]) -> [rows,H] with
// out[ids[i]] += g[i].
type scatterK struct {
	noGrad
	rows int
}

func (k scatterK) name() string { return fmt.Sprintf("ScatterAdd{%d}", k.rows) }
func (scatterK) typ() hm.Type   { return fnType(it(1), ft(2), ft(2)) }

func (k scatterK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := wantVec(k.name(), 0, in[0], -1); err != nil {
		return nil, err
	}
	if err := want2D(k.name(), 1, in[1]); err != nil {
		return nil, err
	}
	if in[1][0] != in[0][0] {
		return nil, fmt.Errorf("model: %s: %d ids but gradient %v", k.name(), in[0][0], in[1])
	}
	return tensor.Shape{k.rows, in[1][1]}, nil
}

func (k scatterK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	ids, err := ints(k.name(), in[0])
	if err != nil {
		return err
	}
	if err := checkIDs(k.name(), ids, k.rows); err != nil {
		return err
	}
	h := in[1].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		scatterRows(o, data[float32](in[1]), ids, h)
	case []float64:
		scatterRows(o, data[float64](in[1]), ids, h)
	}
	return nil
}

func scatterRows[T float](out, g []T, ids []int, h int) {
	clear(out)
	for i, id := range ids {
		addInto(out[id*h:(id+1)*h], g[i*h:(i+1)*h])
	}
}

// Embed sums BERT's three input embeddings:
//
//	out[b*L+l] = word[ids[b*L+l]] + pos[l] + typ[types[b*L+l]]
//
// word is [V,H], pos [P,H] with P >= L, typ [T,H]; ids and types are int
// tensors of N = B*L ids (row-major, sequence b at rows b*L..b*L+L-1). The
// result is [N,H]. Gradients flow to word, pos and typ (scatter-adds).
func Embed(word, pos, typ, ids, types *gorgonia.Node, L int) (*gorgonia.Node, error) {
	return apply(embedK{l: L}, word, pos, typ, ids, types)
}

type embedK struct{ l int }

func (k embedK) name() string { return fmt.Sprintf("Embed{L=%d}", k.l) }
func (embedK) typ() hm.Type   { return fnType(ft(2), ft(2), ft(2), it(1), it(1), ft(2)) }
func (embedK) diff() []bool   { return []bool{true, true, true, false, false} }
func (k embedK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{
		{k: scatterK{rows: in[0][0]}, args: []int{3, argGrad}},
		{k: posGradK{rows: in[1][0], l: k.l}, args: []int{argGrad}},
		{k: scatterK{rows: in[2][0]}, args: []int{4, argGrad}},
		nil, nil,
	}
}

func (k embedK) shape(in []tensor.Shape) (tensor.Shape, error) {
	for i := 0; i < 3; i++ {
		if err := want2D(k.name(), i, in[i]); err != nil {
			return nil, err
		}
	}
	h := in[0][1]
	if in[1][1] != h || in[2][1] != h {
		return nil, fmt.Errorf("model: %s: embedding widths differ: word %v, position %v, type %v", k.name(), in[0], in[1], in[2])
	}
	if k.l > in[1][0] {
		return nil, fmt.Errorf("model: %s: sequence length %d exceeds the %d position embeddings", k.name(), k.l, in[1][0])
	}
	if err := wantVec(k.name(), 3, in[3], -1); err != nil {
		return nil, err
	}
	n := in[3][0]
	if err := wantVec(k.name(), 4, in[4], n); err != nil {
		return nil, err
	}
	if k.l <= 0 || n%k.l != 0 {
		return nil, fmt.Errorf("model: %s: %d ids do not split into sequences of length %d", k.name(), n, k.l)
	}
	return tensor.Shape{n, h}, nil
}

func (k embedK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	ids, err := ints(k.name(), in[3])
	if err != nil {
		return err
	}
	types, err := ints(k.name(), in[4])
	if err != nil {
		return err
	}
	if err := checkIDs(k.name()+" word", ids, in[0].Shape()[0]); err != nil {
		return err
	}
	if err := checkIDs(k.name()+" type", types, in[2].Shape()[0]); err != nil {
		return err
	}
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		embedRows(o, data[float32](in[0]), data[float32](in[1]), data[float32](in[2]), ids, types, k.l, h)
	case []float64:
		embedRows(o, data[float64](in[0]), data[float64](in[1]), data[float64](in[2]), ids, types, k.l, h)
	}
	return nil
}

func embedRows[T float](out, word, pos, typ []T, ids, types []int, l, h int) {
	for i, id := range ids {
		o := out[i*h : (i+1)*h]
		w := word[id*h : (id+1)*h]
		p := pos[(i%l)*h : (i%l+1)*h]
		t := typ[types[i]*h : (types[i]+1)*h]
		for j := range o {
			o[j] = w[j] + p[j] + t[j]
		}
	}
}

// posGradK is the gradient of Embed with respect to the position table:
// g [N,H] -> [rows,H], row l < L being the sum over sequences of g[b*L+l].
type posGradK struct {
	noGrad
	rows, l int
}

func (k posGradK) name() string { return fmt.Sprintf("PositionGrad{%d,L=%d}", k.rows, k.l) }
func (posGradK) typ() hm.Type   { return fnType(ft(2), ft(2)) }

func (k posGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	if in[0][0]%k.l != 0 || k.l > k.rows {
		return nil, fmt.Errorf("model: %s: bad gradient shape %v", k.name(), in[0])
	}
	return tensor.Shape{k.rows, in[0][1]}, nil
}

func (k posGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		posGrad(o, data[float32](in[0]), k.l, h)
	case []float64:
		posGrad(o, data[float64](in[0]), k.l, h)
	}
	return nil
}

func posGrad[T float](out, g []T, l, h int) {
	clear(out)
	n := len(g) / h
	for i := 0; i < n; i++ {
		p := i % l
		addInto(out[p*h:(p+1)*h], g[i*h:(i+1)*h])
	}
}
