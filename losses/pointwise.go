package losses

import (
	"strconv"
	"strings"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// Pointwise is binary cross-entropy on logits: it pushes each score towards its own relevance
// label, independently of the other candidates.
//
//	L = mean_i -( y_i log sigma(a_i) + (1 - y_i) log(1 - sigma(a_i)) ) = mean_i softplus(a_i) - y_i a_i
//
// Inputs: a, logits of any shape of rank >= 1 (for example [B,K]); y, labels of the same shape
// in [0,1] (1 relevant, 0 not; soft labels allowed), float32 or float64. A label outside [0,1]
// makes the machine fail with an error naming the element. y receives no gradient.
//
// Reference: the pointwise baseline of learning to rank; monoBERT (Nogueira and Cho 2019,
// "Passage Re-ranking with BERT") trains a reranker with this relevant/non-relevant
// cross-entropy.
//
// Prefer it only as a baseline or when absolute, calibrated probabilities are needed: ranking
// depends on relative scores, which Pairwise, Listwise and InfoNCE optimise directly.
func Pointwise(a, y *G.Node) (*G.Node, error) {
	if _, err := floatDtype("Pointwise", []string{"a", "y"}, a, y); err != nil {
		return nil, err
	}
	if a.Dims() == 0 || !a.Shape().Eq(y.Shape()) {
		return nil, errors.Errorf("losses: Pointwise: a has shape %v and y %v, want the same shape of rank >= 1", a.Shape(), y.Shape())
	}
	labels, err := identityCheck(y, "pointwiseLabels", func(v arr) error {
		for i, x := range v.data {
			if !(x >= 0 && x <= 1) {
				return errors.Errorf("losses: Pointwise: label y%s = %g, want a value in [0,1]", index(v.shape, i), x)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sp, err := softplus(a)
	if err != nil {
		return nil, err
	}
	ya, err := G.HadamardProd(labels, a)
	if err != nil {
		return nil, errors.Wrap(err, "losses: Pointwise")
	}
	return meanDiff("Pointwise", sp, ya)
}

// index formats the row-major flat index i of an array of the given shape as "[i][j]...".
func index(shape []int, i int) string {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
	}
	var b strings.Builder
	for _, v := range idx {
		b.WriteString("[" + strconv.Itoa(v) + "]")
	}
	return b.String()
}

// pointwise trains cross-encoders on lists with binary labels.
func init() {
	Register(Spec{Name: "pointwise", Batch: Lists, Labels: BinaryLabels, Build: func(in Inputs) (*G.Node, error) {
		a, y, err := listInputs(in)
		if err != nil {
			return nil, err
		}
		return Pointwise(a, y)
	}})
}
