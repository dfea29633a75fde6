package losses

import (
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// AttentionDistill trains the retriever to rank passages by how much the reader attends to
// them: it pulls the retrieval distribution towards the softmax of the reader's attention mass
// on each passage's tokens.
//
//	p_R    = softmax(s_b / tauR)            retriever's distribution over the K passages
//	p_ATTN = softmax(alpha_b / tauA)        the reader's attention, a constant
//	L      = mean_b KL(p_ATTN || p_R)
//
// Inputs: s [B,K] retriever scores of K passages per query; alpha [B,K] the reader's attention
// mass on each passage (AttentionMass: the attention probability on the passage's tokens, from
// the positions that predict the answer, averaged over heads and layers), same dtype (float32
// or float64); temperatures tauR, tauA > 0. alpha is a constant: no gradient reaches the reader
// through it. The gradient on s_b is (p_R,b - p_ATTN,b) / (tauR B).
//
// Reference: Izacard and Grave 2021, "Distilling Knowledge from Reader to Retriever for
// Question Answering" (the attention scores as relevance, averaged over heads, layers and
// tokens); Izacard et al. 2022, "Atlas: Few-shot Learning with Retrieval Augmented Language
// Models", section 2.2 ("Attention Distillation", eq. for p_ATTN).
//
// Prefer it when the reader is at hand but a likelihood per passage is costly: one forward pass
// of the reader over its K passages gives every teacher score (perplexity distillation needs the
// answer's likelihood given each passage; leave-one-out needs K more passes). Attention is a
// weaker signal than the likelihood: a passage can draw attention without helping.
func AttentionDistill(s, alpha *G.Node, tauR, tauA float64) (*G.Node, error) {
	return softKL("AttentionDistill", [4]string{"s", "alpha", "tauR", "tauA"}, s, alpha, tauR, tauA)
}

// AttentionMass is the teacher score of AttentionDistill for one reader row: the attention mass
// on the passage's tokens, averaged over layers, heads and the query positions that predict the
// answer.
//
//	alpha = 1/(N_l N_h |Q|) sum_l sum_h sum_{i in Q} sum_{j in P} A_lhij
//
// attn holds the attention probabilities of one row, layer by layer, each [heads, L, L]
// row-major (A_lhij = attn[l][(h*L+i)*L+j], query position i attending to key position j);
// queries Q are the positions whose outputs predict the answer tokens; the passage P is the key
// positions [from, to). Every index must lie in [0, L). In a decoder-only reader that reads
// "<ctx> passage </ctx> question answer" the passage's own tokens lie before Q, so under the
// causal mask every query position sees all of P; alpha is in [0, 1].
//
// Izacard and Grave 2021 average the pre-softmax or post-softmax scores of the decoder's
// cross-attention over the passage's encoder tokens; Atlas (eq. 2) uses the post-softmax weights,
// as here, summed over the passage's tokens.
func AttentionMass(attn [][]float64, heads, L int, queries []int, from, to int) (float64, error) {
	if len(attn) == 0 || heads < 1 || L < 1 || len(queries) == 0 {
		return 0, fmt.Errorf("losses: AttentionMass: %d layers, %d heads, L = %d, %d query positions: want at least one of each", len(attn), heads, L, len(queries))
	}
	if from < 0 || to > L || from > to {
		return 0, fmt.Errorf("losses: AttentionMass: passage positions [%d, %d), want within [0, %d)", from, to, L)
	}
	var sum float64
	for l, a := range attn {
		if len(a) != heads*L*L {
			return 0, fmt.Errorf("losses: AttentionMass: layer %d holds %d weights, want heads*L*L = %d", l, len(a), heads*L*L)
		}
		for h := range heads {
			for _, i := range queries {
				if i < 0 || i >= L {
					return 0, fmt.Errorf("losses: AttentionMass: query position %d, want within [0, %d)", i, L)
				}
				row := a[(h*L+i)*L : (h*L+i+1)*L]
				for _, w := range row[from:to] {
					sum += w
				}
			}
		}
	}
	return sum / float64(len(attn)*heads*len(queries)), nil
}

// attention_distill: Inputs.Scores [B*K] the retriever's scores (already divided by its
// temperature when Temperature is 1), Teacher [B,K] the attention masses, TeacherTemperature their temperature.
func init() { registerListTeacher("attention_distill", AttentionDistill) }

// registerListTeacher registers a loss of a Lists batch and its teacher [B,K], built as
// f(scores [B,K], teacher, Temperature, TeacherTemperature).
func registerListTeacher(name string, f func(s, t *G.Node, tau, tauT float64) (*G.Node, error)) {
	Register(Spec{Name: name, Batch: Lists, Teacher: true, Build: func(in Inputs) (*G.Node, error) {
		s, t, err := listTeacher(name, in)
		if err != nil {
			return nil, err
		}
		return f(s, t, in.Temperature, in.TeacherTemperature)
	}})
}

// listTeacher reshapes a Lists batch's scores to [B,K] and wraps its teacher [B,K].
func listTeacher(loss string, in Inputs) (*G.Node, *G.Node, error) {
	if in.Scores == nil {
		return nil, nil, errors.Errorf("losses: %s: built without Inputs.Scores", loss)
	}
	s, err := G.Reshape(in.Scores, tensor.Shape{in.B, in.K})
	if err != nil {
		return nil, nil, errors.Wrapf(err, "losses: %s: scores as %d lists of %d", loss, in.B, in.K)
	}
	t, err := teacherInput(loss, in.Scores.Graph(), in, in.B, in.K)
	if err != nil {
		return nil, nil, err
	}
	return s, t, nil
}
