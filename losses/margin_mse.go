package losses

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// MarginMSE distils a teacher ranker into a bi-encoder: it makes the student's score margin
// between a query's positive and negative passage equal the teacher's margin.
//
//	L = mean_i ((s(q_i, p+_i) - s(q_i, p-_i)) - (t+_i - t-_i))²
//
// Inputs: q [B,H] query embeddings; pPos [B,H] and pNeg [B,H] the embeddings of each query's
// positive and negative passage; tPos [B] and tNeg [B] the teacher's scores of (q_i, p+_i) and
// (q_i, p-_i). All have one dtype, float32 or float64; the result is a scalar node of it.
// sim is Dot (the paper's bi-encoders) or Cosine (rows normalised with NormEps first). The
// teacher's scores are constants: they receive no gradient, and a NaN or infinite one makes
// the machine running the graph fail with an error naming the element. Only the margins are
// compared, so the teacher's scores may carry any offset, but they are in the teacher's units
// (a cross-encoder's logits, about ±10): the student's scores must be able to reach that range,
// which dot products can and cosine similarities (in [-1,1]) cannot unless the teacher's
// scores are rescaled. The gradient on s(q_i, p+_i) is 2 e_i / B, e_i the margin error, and
// the opposite on s(q_i, p-_i).
//
// Reference: Hofstätter et al. 2020, "Improving Efficient Neural Ranking Models with
// Cross-Architecture Knowledge Distillation" (arXiv:2010.02666), the Margin-MSE loss;
// sentence-transformers' MarginMSELoss.
//
// Prefer it to InfoNCE when a cross-encoder's scores of (query, positive, negative) triples are
// available: the student learns how much better the positive is, not only that it is, which
// also tolerates a mined negative that is in fact relevant (the teacher's margin is then small).
// Use KLDistill when the teacher scores a whole list of candidates per query.
func MarginMSE(q, pPos, pNeg, tPos, tNeg *G.Node, sim Similarity) (*G.Node, error) {
	const loss = "MarginMSE"
	if _, err := floatDtype(loss, []string{"q", "pPos", "pNeg", "tPos", "tNeg"}, q, pPos, pNeg, tPos, tNeg); err != nil {
		return nil, err
	}
	if err := wantShape(loss, "q", q, -1, -1); err != nil {
		return nil, err
	}
	b, h := q.Shape()[0], q.Shape()[1]
	for _, in := range []struct {
		name string
		n    *G.Node
		dims []int
	}{{"pPos", pPos, []int{b, h}}, {"pNeg", pNeg, []int{b, h}}, {"tPos", tPos, []int{b}}, {"tNeg", tNeg, []int{b}}} {
		if err := wantShape(loss, in.name, in.n, in.dims...); err != nil {
			return nil, err
		}
	}
	if err := applySimilarity(loss, sim, &q, &pPos, &pNeg); err != nil {
		return nil, err
	}
	rowDot := func(a, b *G.Node) (*G.Node, error) { // [B]: a_i · b_i
		ab, err := G.HadamardProd(a, b)
		if err != nil {
			return nil, errors.Wrapf(err, "losses: %s: row dot", loss)
		}
		return G.Sum(ab, 1)
	}
	sPos, err := rowDot(q, pPos)
	if err != nil {
		return nil, err
	}
	sNeg, err := rowDot(q, pNeg)
	if err != nil {
		return nil, err
	}
	student, err := G.Sub(sPos, sNeg)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: student margin", loss)
	}
	teacher, err := teacherMarginOp.apply(tPos, tNeg) // [B] constant
	if err != nil {
		return nil, err
	}
	e, err := G.Sub(student, teacher)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: margin error", loss)
	}
	sq, err := G.Square(e)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: square", loss)
	}
	return mean(loss, sq)
}

// teacherMarginOp computes the constant tPos - tNeg of two [B] nodes after checking that every
// teacher score is finite. It has no derivative: the teacher is not trained.
var teacherMarginOp = &fop{
	name:    "marginMSETeacherMargin",
	inDims:  []int{1, 1},
	outDims: 1,
	fwd: func(in []arr) ([]float64, error) {
		pos, neg := in[0].data, in[1].data
		out := make([]float64, len(pos))
		for i := range pos {
			for _, t := range []struct {
				name string
				v    float64
			}{{"tPos", pos[i]}, {"tNeg", neg[i]}} {
				if math.IsNaN(t.v) || math.IsInf(t.v, 0) {
					return nil, errors.Errorf("losses: MarginMSE: teacher score %s[%d] = %g, want a finite number", t.name, i, t.v)
				}
			}
			out[i] = pos[i] - neg[i]
		}
		return out, nil
	},
}

// margin_mse distils a teacher's margins into a bi-encoder from contrastive batches with one
// hard negative per query (N = 2B: p_i the positive and p_{B+i} the negative of query i) and
// Inputs.Teacher [B,2] (the teacher's scores of p_i and p_{B+i}). It reads Similarity, not Temperature, and
// ignores Mask: each query is compared with its own two passages only.
func init() {
	Register(Spec{Name: "margin_mse", Batch: Contrastive, Teacher: true, Build: func(in Inputs) (*G.Node, error) {
		const loss = "margin_mse"
		if in.Q == nil || in.P == nil {
			return nil, errors.Errorf("losses: %s: built without Inputs.Q or Inputs.P", loss)
		}
		if err := wantShape(loss, "Q", in.Q, -1, -1); err != nil {
			return nil, err
		}
		b := in.Q.Shape()[0]
		if in.P.Dims() != 2 || in.P.Shape()[0] != 2*b {
			return nil, errors.Errorf("losses: %s: P has shape %v for %d queries, want %d rows (each query's positive, then its one hard negative)", loss, in.P.Shape(), b, 2*b)
		}
		t, err := teacherInput(loss, in.Q.Graph(), in, b, 2)
		if err != nil {
			return nil, err
		}
		rows := func(n *G.Node, from, to int) (*G.Node, error) { return G.Slice(n, G.S(from, to)) }
		col := func(n *G.Node, c int) (*G.Node, error) { return G.Slice(n, nil, G.S(c)) }
		pPos, err := rows(in.P, 0, b)
		if err != nil {
			return nil, err
		}
		pNeg, err := rows(in.P, b, 2*b)
		if err != nil {
			return nil, err
		}
		tPos, err := col(t, 0)
		if err != nil {
			return nil, err
		}
		tNeg, err := col(t, 1)
		if err != nil {
			return nil, err
		}
		return MarginMSE(in.Q, pPos, pNeg, tPos, tNeg, in.Similarity)
	}})
}
