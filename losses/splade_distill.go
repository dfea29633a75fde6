package losses

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// SpladeMarginMSE distils a teacher ranker into a SPLADE encoder: MarginMSE on the sparse
// vectors' dot products of each query with its positive and its one hard negative, plus the
// FLOPS regulariser of the queries and of all the passages, as SpladeLoss has it.
//
//	s+_i = q_i · p_i,  s-_i = q_i · p_{B+i}
//	L    = mean_i ((s+_i - s-_i) - (t+_i - t-_i))² + lambda_q·FLOPS(q) + lambda_d·FLOPS(p)
//
// Inputs: q [B,V] and p [2B,V] of non-negative term weights (rows 0..B-1 of p the positives,
// B..2B-1 the hard negatives, Contrastive's layout with one negative per query); teacher [B,2]
// the teacher's scores of (q_i, p_i) and (q_i, p_{B+i}), a constant of q's dtype (a
// cross-encoder's logits: SPLADE's unnormalised dot products can reach their range); w the
// regulariser weights read at every run (the warm-up, FlopsWarmup). The result is a scalar of
// q's dtype. Other queries' passages enter the FLOPS terms only.
//
// Reference: Formal et al. 2022, "From Distillation to Hard Negative Sampling: Making Sparse
// Neural IR Models More Effective" (SIGIR, arXiv:2205.04733), section 2: SPLADE++ distils a
// cross-encoder with the Margin-MSE loss of Hofstätter et al. 2020 on (query, positive, hard
// negative) triplets, the FLOPS regularisation of SPLADE v2 kept; sentence-transformers 6's
// SpladeLoss(SparseMarginMSELoss).
//
// Prefer it, as SPLADE++ does, when the teacher has scored each query's positive and one hard
// negative; SpladeKLDistill uses several negatives per query.
func SpladeMarginMSE(q, p, teacher *G.Node, w *FlopsWeights) (*G.Node, error) {
	const loss = "SpladeMarginMSE"
	if err := spladeDistillShapes(loss, q, p, w); err != nil {
		return nil, err
	}
	b := q.Shape()[0]
	if p.Shape()[0] != 2*b {
		return nil, errors.Errorf("losses: %s: p has %d rows for %d queries, want %d (each query's positive, then its one hard negative)", loss, p.Shape()[0], b, 2*b)
	}
	if err := wantShape(loss, "teacher", teacher, b, 2); err != nil {
		return nil, err
	}
	pPos, err := G.Slice(p, G.S(0, b))
	if err != nil {
		return nil, err
	}
	pNeg, err := G.Slice(p, G.S(b, 2*b))
	if err != nil {
		return nil, err
	}
	tPos, err := G.Slice(teacher, nil, G.S(0))
	if err != nil {
		return nil, err
	}
	tNeg, err := G.Slice(teacher, nil, G.S(1))
	if err != nil {
		return nil, err
	}
	mse, err := MarginMSE(q, pPos, pNeg, tPos, tNeg, Dot)
	if err != nil {
		return nil, err
	}
	return addFlops(mse, q, p, w)
}

// SpladeKLDistill distils a teacher's scores of each query's candidates into a SPLADE encoder:
// KLDistill over the sparse dot products of each query with its positive and its own hard
// negatives, plus the FLOPS regulariser of the queries and of all the passages, as SpladeLoss
// has it.
//
//	s_ik = q_i · p_{c(i,k)},  c(i,0) = i,  c(i,k) = B+iM+k-1   (k = 1..M)
//	L    = mean_i KL( softmax(t_i/tauT) || softmax(s_i/tauS) ) + lambda_q·FLOPS(q) + lambda_d·FLOPS(p)
//
// Inputs: q [B,V] and p [N,V], N = B(1+M), M >= 1, of non-negative term weights in
// Contrastive's layout (CandidateScores); teacher [B,1+M] the teacher's scores of each query's
// positive then its hard negatives, a constant of q's dtype; tauS, tauT > 0; w the regulariser
// weights read at every run. The result is a scalar of q's dtype, the KL in nats averaged over
// the B queries (kl_div "batchmean"). Other queries' passages enter the FLOPS terms only.
//
// Reference: Formal et al. 2022 (arXiv:2205.04733) distil SPLADE++ with Margin-MSE
// (SpladeMarginMSE); KL over each query's candidates is ColBERTv2's distillation (Santhanam et
// al. 2022) and, beside MarginMSE, SPLADE-v3's over many negatives per query (Lassance et al.
// 2024, arXiv:2403.06789); Hinton et al. 2015 (the KL objective); FLOPS: Paria et al. 2020.
//
// Prefer it to SpladeMarginMSE when the teacher has scored several hard negatives per query:
// it matches the teacher's whole distribution over them, invariant to a per-query offset.
func SpladeKLDistill(q, p, teacher *G.Node, tauS, tauT float64, w *FlopsWeights) (*G.Node, error) {
	const loss = "SpladeKLDistill"
	if err := spladeDistillShapes(loss, q, p, w); err != nil {
		return nil, err
	}
	b, n := q.Shape()[0], p.Shape()[0]
	if n%b != 0 || n < 2*b {
		return nil, errors.Errorf("losses: %s: p has %d rows for %d queries, want B(1+M) with M >= 1 hard negatives per query", loss, n, b)
	}
	s, err := CandidateScores(q, p, n/b-1, Dot) // [B,1+M]
	if err != nil {
		return nil, err
	}
	kl, err := softKL(loss, [4]string{"scores", "teacher", "tauS", "tauT"}, s, teacher, tauS, tauT)
	if err != nil {
		return nil, err
	}
	return addFlops(kl, q, p, w)
}

// spladeDistillShapes checks what both SPLADE distillation losses need of q, p and w.
func spladeDistillShapes(loss string, q, p *G.Node, w *FlopsWeights) error {
	if q == nil || p == nil {
		return errors.Errorf("losses: %s: q or p is nil", loss)
	}
	if w == nil {
		return errors.Errorf("losses: %s: nil FLOPS weights (Inputs.Flops)", loss)
	}
	if err := wantShape(loss, "q", q, -1, -1); err != nil {
		return err
	}
	if q.Shape()[0] == 0 {
		return errors.Errorf("losses: %s: no queries", loss)
	}
	return wantShape(loss, "p", p, -1, q.Shape()[1])
}

// addFlops returns l + w.Query·FLOPS(q) + w.Passage·FLOPS(p).
func addFlops(l, q, p *G.Node, w *FlopsWeights) (*G.Node, error) {
	fq, err := FLOPS(q, &w.Query)
	if err != nil {
		return nil, err
	}
	fd, err := FLOPS(p, &w.Passage)
	if err != nil {
		return nil, err
	}
	sum, err := G.Add(l, fq)
	if err != nil {
		return nil, err
	}
	return G.Add(sum, fd)
}

// splade_margin_mse and splade_kl_distill: Contrastive inputs Q, P (Similarity must be Dot),
// Flops and Teacher [B,1+M] (M = 1 for splade_margin_mse); splade_kl_distill also reads
// Temperature (the student's) and TeacherTemperature. Mask is not read: each query is compared
// with its own candidates only.
func init() {
	for _, s := range []struct {
		name  string
		build func(in Inputs, t *G.Node) (*G.Node, error)
	}{
		{"splade_margin_mse", func(in Inputs, t *G.Node) (*G.Node, error) { return SpladeMarginMSE(in.Q, in.P, t, in.Flops) }},
		{"splade_kl_distill", func(in Inputs, t *G.Node) (*G.Node, error) {
			return SpladeKLDistill(in.Q, in.P, t, in.Temperature, in.TeacherTemperature, in.Flops)
		}},
	} {
		Register(Spec{Name: s.name, Batch: Contrastive, Teacher: true, Build: func(in Inputs) (*G.Node, error) {
			if in.Similarity != Dot {
				return nil, errors.Errorf("losses: %s scores sparse vectors by their dot product, got similarity %v", s.name, in.Similarity)
			}
			if in.Q == nil || in.P == nil || in.Q.Dims() != 2 || in.P.Dims() != 2 || in.Q.Shape()[0] == 0 {
				return nil, errors.Errorf("losses: %s: built without [B,V] Inputs.Q and [N,V] Inputs.P", s.name)
			}
			b, n := in.Q.Shape()[0], in.P.Shape()[0]
			if n%b != 0 {
				return nil, errors.Errorf("losses: %s: %d passages for %d queries, want B(1+M)", s.name, n, b)
			}
			t, err := teacherInput(s.name, in.Q.Graph(), in, b, n/b)
			if err != nil {
				return nil, err
			}
			return s.build(in, t)
		}})
	}
}
