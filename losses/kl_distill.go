package losses

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// KLDistill distils a teacher ranker's distribution over each query's candidates into the
// student: it pulls the student's softmax over the candidates towards the teacher's.
//
//	p_S = softmax(student_b / tauStudent)   the student's distribution over the K candidates
//	p_T = softmax(teacher_b / tauTeacher)   the teacher's, a constant
//	L   = mean_b KL(p_T || p_S) = mean_b sum_k p_T,bk (log p_T,bk - log p_S,bk)
//
// Inputs: student [B,K] the student's scores of K candidates per query (a cross-encoder's
// logits, or a bi-encoder's s(q_b, p_bk)); teacher [B,K] the teacher's scores of the same
// candidates, same dtype (float32 or float64); temperatures tauStudent, tauTeacher > 0. The
// result is a scalar node in nats, averaged over the B queries (PyTorch's
// kl_div(reduction="batchmean"), not the mean over the B*K elements). The teacher receives no
// gradient; the gradient on student_b is (p_S,b - p_T,b) / (tauStudent B). There is no
// tau² factor (Hinton et al. multiply by it to keep gradient sizes across temperatures): scale
// the loss's weight instead. Softmax and log-softmax are max-subtracted and 0 log 0 = 0, so
// scores hundreds apart give no Inf or NaN; a teacher score of -Inf removes the candidate from
// the teacher's distribution.
//
// Reference: Hinton et al. 2015, "Distilling the Knowledge in a Neural Network" (the
// temperature softmax and the KL objective); for rankers, listwise distillation from a
// cross-encoder as in RocketQAv2 (Ren et al. 2021). RePlugKL is the same divergence with the
// language model as the teacher.
//
// Prefer it to MarginMSE when the teacher scores a whole list per query: it matches the
// teacher's ranking of every candidate at once, and is invariant to a per-query offset of either
// model's scores. Use Listwise when only relevance labels are available.
func KLDistill(student, teacher *G.Node, tauStudent, tauTeacher float64) (*G.Node, error) {
	return softKL("KLDistill", [4]string{"student", "teacher", "tauStudent", "tauTeacher"}, student, teacher, tauStudent, tauTeacher)
}

// softKL is mean_b KL(softmax(t_b/tauT) || softmax(s_b/tauS)) of [B,K] nodes, t a constant;
// names are those of s, t, tauS and tauT in errors.
func softKL(loss string, names [4]string, s, t *G.Node, tauS, tauT float64) (*G.Node, error) {
	dt, err := floatDtype(loss, names[:2], s, t)
	if err != nil {
		return nil, err
	}
	for i, tau := range []float64{tauS, tauT} {
		if err := validTau(loss, names[2+i], tau); err != nil {
			return nil, err
		}
	}
	if err := wantShape(loss, names[0], s, -1, -1); err != nil {
		return nil, err
	}
	if err := wantShape(loss, names[1], t, s.Shape()[0], s.Shape()[1]); err != nil {
		return nil, err
	}
	target, err := constSoftmaxRows(t, 1/tauT) // [B,K] constant
	if err != nil {
		return nil, err
	}
	negH, err := negEntropyRows(target) // [B]: sum_k p_T log p_T
	if err != nil {
		return nil, err
	}
	scaled, err := G.HadamardProd(s, scalar(dt, 1/tauS))
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: scale by 1/%s", loss, names[2])
	}
	logS, err := logSoftmaxRows(scaled)
	if err != nil {
		return nil, err
	}
	cross, err := G.HadamardProd(target, logS)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s", loss)
	}
	crossRows, err := G.Sum(cross, 1) // [B]: sum_k p_T log p_S
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s", loss)
	}
	return meanDiff(loss, negH, crossRows) // mean_b KL(p_T || p_S)
}

// kl_distill distils a teacher's scores of each list's candidates into the lists' scores:
// Inputs.Teacher [B,K], Temperature the student's temperature and TeacherTemperature the teacher's.
func init() { registerListTeacher("kl_distill", KLDistill) }
