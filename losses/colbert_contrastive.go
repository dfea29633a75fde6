package losses

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ColBERTContrastive is the contrastive loss of late-interaction retrievers: InfoNCE over
// ColBERT's MaxSim scores, raising each query's score for its positive passage relative to
// every other passage in the batch.
//
//	s_ij = MaxSim(q_i, p_j) = sum_t max_u q_it · p_ju          (token masks applied)
//	L    = mean_i -log( exp(s_ii/tau) / sum_j exp(s_ij/tau) )
//
// Inputs: q [B,Lq,D] query token embeddings; p [N,Ld,D] passage token embeddings with N >= B,
// rows 0..B-1 the positives of queries 0..B-1 and rows B..N-1 the hard negatives of all
// queries, flattened (InfoNCE's layout: every passage is a candidate of every query); tm the
// token masks ([B,Lq], [N,Ld]) and how masked passage tokens enter the max (TokenMasking);
// tau > 0; sim Cosine L2-normalises every token vector first (with NormEps), Dot uses them as
// given. float32 or float64; the result is a scalar node of the same dtype.
//
// PyLate's Contrastive (pylate/losses/contrastive.py) is this loss with sim = Cosine (it calls
// F.normalize on the token embeddings), tm.Mode = MaskZero (colbert_scores multiplies by the
// masks), no query mask when queries are expanded with [MASK] (its default), temperature 1 by
// default and the mean over queries: the same candidates in another column order, which
// cross-entropy does not see.
//
// Reference: Khattab & Zaharia 2020, "ColBERT: Efficient and Effective Passage Search via
// Contextualized Late Interaction over BERT" (eq. 3, the pairwise softmax cross-entropy over
// a positive and a negative); in-batch negatives as in ColBERTv2 (Santhanam et al. 2022).
//
// Prefer it to ColBERTKLDistill when the batch has labelled positives and no teacher scores;
// prefer InfoNCE when the model pools one vector per text.
func ColBERTContrastive(q, p *G.Node, tm TokenMasks, tau float64, sim Similarity) (*G.Node, error) {
	return colbertContrastive("ColBERTContrastive", q, p, nil, tm, tau, sim)
}

// ColBERTContrastiveMasked is ColBERTContrastive with an additive mask [B,N] on the MaxSim
// scores, as InfoNCEMasked on InfoNCE's: 0 keeps a candidate, -Inf removes it for that query
// (exactly as if it were absent from p), every value <= 0 and m_ii = 0 (checked when the graph
// runs); the mask receives no gradient. The sampler's false-negative mask
// (sampler.false_negatives = "mask") enters here.
//
// Prefer it over ColBERTContrastive when a batch may hold passages judged relevant to another
// query than their own (multi-relevant queries, duplicates).
func ColBERTContrastiveMasked(q, p, mask *G.Node, tm TokenMasks, tau float64, sim Similarity) (*G.Node, error) {
	if mask == nil {
		return nil, errors.New("losses: ColBERTContrastiveMasked: mask is nil")
	}
	return colbertContrastive("ColBERTContrastiveMasked", q, p, mask, tm, tau, sim)
}

func colbertContrastive(loss string, q, p, mask *G.Node, tm TokenMasks, tau float64, sim Similarity) (*G.Node, error) {
	if err := validTau(loss, "tau", tau); err != nil {
		return nil, err
	}
	scores, dt, err := lateScores(loss, q, p, tm, sim, nil)
	if err != nil {
		return nil, err
	}
	if n, b := p.Shape()[0], q.Shape()[0]; n < b {
		return nil, errors.Errorf("losses: %s: p has %d passages, fewer than the %d queries in q (rows 0..B-1 of p must be the positives)", loss, n, b)
	}
	if mask != nil {
		if err := wantShape(loss, "mask", mask, scores.Shape()...); err != nil {
			return nil, err
		}
		if mask.Dtype() != dt {
			return nil, errors.Errorf("losses: %s: mask is %v, scores %v", loss, mask.Dtype(), dt)
		}
	}
	return diagCrossEntropy(loss, dt, scores, mask, tau)
}

// lateScores applies sim to the token vectors of q and p and returns their MaxSim scores: [B,N]
// for cand nil, else [B,K] over cand's rows (MaxSimLists).
func lateScores(loss string, q, p *G.Node, tm TokenMasks, sim Similarity, cand [][]int) (*G.Node, tensor.Dtype, error) {
	dt, err := floatDtype(loss, []string{"q", "p"}, q, p)
	if err != nil {
		return nil, dt, err
	}
	if err := wantShape(loss, "q", q, -1, -1, -1); err != nil {
		return nil, dt, err
	}
	if err := wantShape(loss, "p", p, -1, -1, q.Shape()[2]); err != nil {
		return nil, dt, err
	}
	if sim == Cosine {
		if q, err = normalizeTokens(q); err != nil {
			return nil, dt, err
		}
		if p, err = normalizeTokens(p); err != nil {
			return nil, dt, err
		}
	} else if sim != Dot {
		return nil, dt, errors.Errorf("losses: %s: unknown similarity %v", loss, sim)
	}
	var s *G.Node
	if cand == nil {
		s, err = MaxSim(q, p, tm)
	} else {
		s, err = MaxSimLists(q, p, tm, cand)
	}
	if err != nil {
		return nil, dt, errors.Wrap(err, loss)
	}
	return s, dt, nil
}

// normalizeTokens L2-normalises every token vector of a [R,L,D] node (l2NormalizeRows).
func normalizeTokens(x *G.Node) (*G.Node, error) {
	s := x.Shape().Clone()
	flat, err := G.Reshape(x, tensor.Shape{s[0] * s[1], s[2]})
	if err != nil {
		return nil, errors.Wrap(err, "losses: normalise token vectors")
	}
	y, err := l2NormalizeRows(flat)
	if err != nil {
		return nil, err
	}
	return G.Reshape(y, s)
}

// colbert_contrastive trains late-interaction retrievers on contrastive batches: Inputs Q
// [B,Lq,D], P [N,Ld,D], QTokenMask, PTokenMask, TokenMasking, Temperature and Similarity; with Mask
// [B,N] (optional) ColBERTContrastiveMasked.
func init() {
	Register(Spec{Name: "colbert_contrastive", Batch: LateInteraction, Build: func(in Inputs) (*G.Node, error) {
		tm, err := lateMasks("colbert_contrastive", in)
		if err != nil {
			return nil, err
		}
		if in.Mask != nil {
			return ColBERTContrastiveMasked(in.Q, in.P, in.Mask, tm, in.Temperature, in.Similarity)
		}
		return ColBERTContrastive(in.Q, in.P, tm, in.Temperature, in.Similarity)
	}})
}

// lateMasks wraps Inputs.QTokenMask and PTokenMask (either may be nil) in nodes of Q's graph.
func lateMasks(loss string, in Inputs) (TokenMasks, error) {
	tm := TokenMasks{Mode: in.TokenMasking}
	if in.Q == nil {
		return tm, errors.Errorf("losses: %s: built without Inputs.Q", loss)
	}
	for w, m := range []*tensor.Dense{in.QTokenMask, in.PTokenMask} {
		if m == nil {
			continue
		}
		if len(m.Shape()) != 2 {
			return tm, errors.Errorf("losses: %s: token mask %d has shape %v, want rank 2", loss, w, m.Shape())
		}
		n := G.NewMatrix(in.Q.Graph(), m.Dtype(), G.WithShape(m.Shape()...), G.WithValue(m), G.WithName(loss+[]string{".qmask", ".pmask"}[w]))
		if w == 0 {
			tm.Q = n
		} else {
			tm.P = n
		}
	}
	return tm, nil
}
