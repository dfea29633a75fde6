package losses

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// MinMaxEps is added to max - min when ColBERTKLDistill min-max normalises a query's scores
// (PyLate's epsilon), so that equal scores give zeros instead of NaN.
const MinMaxEps = 1e-8

// ColBERTKLDistill distils a teacher's scores of each query's candidates into a
// late-interaction retriever: KLDistill over the MaxSim scores of the query's own candidates,
// optionally min-max normalised per query first.
//
//	s_bk = MaxSim(q_b, p_{c(b,k)})                                 (token masks applied)
//	s_bk <- (s_bk - min_k s_bk) / (max_k s_bk - min_k s_bk + MinMaxEps)   (when minMax)
//	L    = mean_b KL( softmax(t_b/tauTeacher) || softmax(s_b/tauStudent) )
//
// Inputs: q [B,Lq,D] query token embeddings; p [N,Ld,D] passage token embeddings in
// Contrastive's layout, N = B(1+M): query b's candidates are its positive p_b then its own hard
// negatives p_{B+bM} .. p_{B+bM+M-1}, K = 1+M, so that one sampled batch serves both ColBERT
// losses; teacher [B,K] the teacher's scores in that order (a constant, same dtype, e.g. the
// cross-encoder teacher cache); tm the token masks; sim as ColBERTContrastive. The result is
// a scalar node in nats, the mean over the B queries (kl_div "batchmean"). The min and max of a
// row pass gradient to their first occurrence (torch.max/min(dim)).
//
// PyLate's Distillation (pylate/losses/distillation.py) is this loss with sim = Cosine,
// tm.Mode = MaskZero, minMax = true (its normalize_scores default) and both temperatures 1. It
// does not divide scores by the query length: the only normalisation is that min-max, which
// maps every query's scores onto [0, 1] whatever its length, so the student's softmax is over
// scores at most 1 apart (a soft target even for a sharp teacher).
//
// Reference: Santhanam et al. 2022, "ColBERTv2" (KL distillation from a cross-encoder's
// scores over each query's candidates); Hinton et al. 2015 (the KL objective).
//
// Prefer it to ColBERTContrastive when a teacher has scored every candidate: it matches the
// teacher's ranking of the whole list and needs no labels.
func ColBERTKLDistill(q, p *G.Node, tm TokenMasks, teacher *G.Node, sim Similarity, minMax bool, tauStudent, tauTeacher float64) (*G.Node, error) {
	const loss = "ColBERTKLDistill"
	if q == nil || p == nil {
		return nil, errors.Errorf("losses: %s: q or p is nil", loss)
	}
	if err := wantShape(loss, "q", q, -1, -1, -1); err != nil {
		return nil, err
	}
	if err := wantShape(loss, "p", p, -1, -1, -1); err != nil {
		return nil, err
	}
	b, n := q.Shape()[0], p.Shape()[0]
	if b == 0 || n%b != 0 || n < b {
		return nil, errors.Errorf("losses: %s: p has %d passages, want B(1+M) for the %d queries of q", loss, n, b)
	}
	m := n/b - 1
	cand := make([][]int, b)
	for i := range cand {
		cand[i] = append(cand[i], i)
		for k := 0; k < m; k++ {
			cand[i] = append(cand[i], b+i*m+k)
		}
	}
	scores, _, err := lateScores(loss, q, p, tm, sim, cand)
	if err != nil {
		return nil, err
	}
	if minMax {
		if scores, err = minMaxOp.apply(scores); err != nil {
			return nil, err
		}
	}
	return softKL(loss, [4]string{"scores", "teacher", "tauStudent", "tauTeacher"}, scores, teacher, tauStudent, tauTeacher)
}

// minMaxArgs returns the first index of the max and of the min of row, and r = max - min + eps.
func minMaxArgs(row []float64) (hi, lo int, r float64) {
	for k, v := range row {
		if v > row[hi] {
			hi = k
		}
		if v < row[lo] {
			lo = k
		}
	}
	return hi, lo, row[hi] - row[lo] + MinMaxEps
}

// minMaxOp is y_bk = (s_bk - min_k s_bk) / (max_k s_bk - min_k s_bk + MinMaxEps) of a [B,K]
// node. With r the denominator, g the output gradient and G = sum_k g_k: ds_k = g_k/r, plus
// (sum_k g_k y_k - G)/r at the row's first min and -(sum_k g_k y_k)/r at its first max.
var minMaxOp = &fop{
	name:    "minMaxRows",
	inDims:  []int{2},
	outDims: 2,
	fwd: func(in []arr) ([]float64, error) {
		return byRow(in, func(out []float64, s [][]float64) {
			row := s[0]
			_, lo, den := minMaxArgs(row)
			for k, v := range row {
				out[k] = (v - row[lo]) / den
			}
		}), nil
	},
	diff: []bool{true},
	grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
		ds, err := minMaxGradOp.apply(in[0], g)
		return G.Nodes{ds}, err
	},
}

var minMaxGradOp = &fop{
	name:    "minMaxRowsGrad",
	inDims:  []int{2, 2},
	outDims: 2,
	fwd: func(in []arr) ([]float64, error) {
		return byRow(in, func(out []float64, sg [][]float64) {
			row, gr := sg[0], sg[1]
			hi, lo, den := minMaxArgs(row)
			gy, gsum := 0.0, 0.0
			for k, v := range row {
				gy += gr[k] * (v - row[lo]) / den
				gsum += gr[k]
				out[k] = gr[k] / den
			}
			out[lo] += (gy - gsum) / den
			out[hi] -= gy / den
		}), nil
	},
}

// colbert_kl_distill distils a teacher's scores into a late-interaction retriever: Inputs Q,
// P, QTokenMask, PTokenMask, TokenMasking, Similarity, Teacher [B,1+M], Temperature (the student's
// temperature), TeacherTemperature, and NoMinMax.
func init() {
	Register(Spec{Name: "colbert_kl_distill", Batch: LateInteraction, Teacher: true, Build: func(in Inputs) (*G.Node, error) {
		const loss = "colbert_kl_distill"
		tm, err := lateMasks(loss, in)
		if err != nil {
			return nil, err
		}
		if in.P == nil {
			return nil, errors.Errorf("losses: %s: built without Inputs.P", loss)
		}
		b, n := in.Q.Shape()[0], in.P.Shape()[0]
		if b == 0 || n%b != 0 {
			return nil, errors.Errorf("losses: %s: %d passages for %d queries, want B(1+M)", loss, n, b)
		}
		t, err := teacherInput(loss, in.Q.Graph(), in, b, n/b)
		if err != nil {
			return nil, err
		}
		return ColBERTKLDistill(in.Q, in.P, tm, t, in.Similarity, !in.NoMinMax, in.Temperature, in.TeacherTemperature)
	}})
}
