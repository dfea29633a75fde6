package losses

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// Listwise is the ListNet loss: it matches each query's softmax over candidate scores to the
// distribution given by its graded relevance labels.
//
//	t_bi = labels_bi / sum_j labels_bj
//	L = mean_b -sum_i t_bi log softmax(a_b)_i
//
// Inputs: a [B,K] scores of K candidates per query (finite); labels [B,K] graded relevance
// (for example qrels scores 0..3), non-negative with a positive sum in every row, of the same
// dtype (float32 or float64). A negative or NaN label, or a row of zeros, makes the machine
// fail with an error naming the row. Labels receive no gradient. The log-softmax is computed
// max-subtracted; the gradient on a_b is (softmax(a_b) - t_b)/B.
//
// Reference: Cao et al. 2007, "Learning to Rank: From Pairwise Approach to Listwise Approach"
// (ListNet, top-one probability).
//
// Prefer it when every query comes with a fixed candidate list and graded labels (several
// relevant passages of different grades): it uses the grades, which InfoNCE (one positive)
// and Pairwise (binary preference) ignore.
func Listwise(a, labels *G.Node) (*G.Node, error) {
	if _, err := floatDtype("Listwise", []string{"a", "labels"}, a, labels); err != nil {
		return nil, err
	}
	if err := wantShape("Listwise", "a", a, -1, -1); err != nil {
		return nil, err
	}
	if err := wantShape("Listwise", "labels", labels, a.Shape()[0], a.Shape()[1]); err != nil {
		return nil, err
	}
	t, err := labelDistOp.apply(labels)
	if err != nil {
		return nil, err
	}
	logp, err := logSoftmaxRows(a)
	if err != nil {
		return nil, err
	}
	tl, err := G.HadamardProd(t, logp)
	if err != nil {
		return nil, errors.Wrap(err, "losses: Listwise")
	}
	rows, err := G.Sum(tl, 1) // [B]: sum_i t_bi log softmax(a_b)_i
	if err != nil {
		return nil, errors.Wrap(err, "losses: Listwise")
	}
	return negMean("Listwise", rows)
}

// labelDistOp turns [B,K] graded labels into per-row distributions t = labels / row sum, a
// constant (no gradient), after checking that labels are non-negative and rows are not all 0.
var labelDistOp = &fop{
	name:    "listwiseLabelDistribution",
	inDims:  []int{2},
	outDims: 2,
	fwd: func(in []arr) ([]float64, error) {
		l, k := in[0], rowLen(in[0])
		out := make([]float64, len(l.data))
		for b := 0; b < l.shape[0]; b++ {
			sum := 0.0
			for i, v := range l.data[b*k : (b+1)*k] {
				if !(v >= 0) || math.IsInf(v, 1) {
					return nil, errors.Errorf("losses: Listwise: labels[%d][%d] = %g, want a finite value >= 0", b, i, v)
				}
				sum += v
			}
			if sum == 0 {
				return nil, errors.Errorf("losses: Listwise: labels row %d is all zero: the query has no relevant candidate, so its target distribution is undefined", b)
			}
			for i, v := range l.data[b*k : (b+1)*k] {
				out[b*k+i] = v / sum
			}
		}
		return out, nil
	},
}

// listwise trains cross-encoders on lists with graded labels.
func init() {
	Register(Spec{Name: "listwise", Batch: Lists, Labels: GradedLabels, Build: func(in Inputs) (*G.Node, error) {
		a, y, err := listInputs(in)
		if err != nil {
			return nil, err
		}
		return Listwise(a, y)
	}})
}
