package atlas

import (
	"context"
	"fmt"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/study"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/trainer"
)

// kind = "atlas": after the rag pipeline's preparation (experiment/internal/study), each system of
// atlas.systems trains the retriever from the same start on the retriever-training questions,
// with no passage label: per step B questions, each with K candidates (BM25's top
// atlas.bm25_depth rescored by the dense retriever), the frozen reader scores every
// (question, candidate) row, and the retrieval logits s [B,K] are trained towards the reader's
// teacher by one of the losses table's Atlas objectives:
//
//   - "attention": attention_distill, the reader's attention mass on each candidate's tokens;
//   - "emdr2": emdr2, the marginal likelihood with the reader's likelihoods fixed;
//   - "perplexity": perplexity_distill, the reader's log-likelihood of the answer per candidate;
//   - "loo": loo_distill, how much the reader's loss over the K candidates (their uniform
//     mixture: the garden reader reads one passage per row) worsens without each one.
//
// "_query" trains the query tower (the index stays exact); "_both" trains the passage tower too
// (atlas.passage_lr_scale), its index refreshed by [index_refresh] (candidates rescored with
// the serving index). "supervised" is InfoNCE on the gold entries (the ceiling). Each system is
// then evaluated with a freshly encoded index, on the dev questions and the test questions; the
// run ends with one table of every system.
func init() {
	experiment.Register("atlas", runAtlas, configs.KindSpec{Sections: ragkit.Sections("realm", "index_refresh"), Own: []configs.Section{section}, Losses: []string{"infonce"}})
}

// objectives maps an objective of atlas.systems to its loss in the losses table.
var objectives = map[string]string{
	"attention": "attention_distill", "emdr2": "emdr2", "perplexity": "perplexity_distill", "loo": "loo_distill",
}

func runAtlas(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	a := Of(rec)
	return study.RunStudy(ctx, rec, o, a.Systems, true, trainAtlas, func(s *study.Study) {
		s.RetrievalNote = fmt.Sprintf("Atlas objectives: BM25 top %d rescored to K = %d, frozen reader as teacher; tau attention %g, lm %g, loo %g",
			a.BM25Depth, a.TopK, a.TauAttention, a.TauLM, a.TauLOO)
		s.Summary = true
	})
}

// trainAtlas trains one system "<objective>_<towers>".
func trainAtlas(s *study.Study, ctx context.Context, name, phase string, qs []ragjoint.Question, startStep int, opt *checkpoints.OptimizerState, before float64) error {
	a := Of(s.Rec)
	objective, towers, _ := System(name)
	if a.Steps == 0 || len(qs) == 0 {
		return nil
	}
	sc, err := ragreader.NewScorer(s.Reader, s.Format, a.ScoreBatch, true)
	if err != nil {
		return err
	}
	defer sc.Close()
	o := taskOptions{B: a.BatchSize, K: a.TopK, BM25Depth: a.BM25Depth, Objective: objective, Similarity: s.Loss.Similarity, Both: towers == "both", PassageLRScale: a.PassageLRScale}
	switch objective {
	case "attention":
		o.TeacherTemperature = a.TauAttention
	case "perplexity":
		o.TeacherTemperature = a.TauLM
	case "loo":
		o.TeacherTemperature = a.TauLOO
	default:
		o.TeacherTemperature = 1
	}
	return s.TrainFromReader(ctx, study.ReaderTraining{Phase: phase, Steps: a.Steps, LR: a.LR, Start: startStep, Optimizer: opt, SecondsBefore: before,
		Both:     o.Both,
		Retrieve: func(li *study.LiveIndex) ragjoint.RetrieveFunc { return li.RetrieveBM25(a.TopK, a.BM25Depth) },
		NewTask: func(retrieve ragjoint.RetrieveFunc) (study.TeacherTask, error) {
			o.Retrieve = retrieve
			return newTask(s, sc, qs, o, func(step int) []int {
				return ragreader.Cycle(len(qs), a.BatchSize, step, s.Seed^streamAtlas)
			})
		}})
}

// streamAtlas is the batch stream of Atlas training (XORed into the seed).
const streamAtlas = 0x61746c73 // "atls"

// taskOptions are the settings of an Atlas task.
type taskOptions struct {
	B, K, BM25Depth    int
	Objective          string
	TeacherTemperature float64 // the teacher's temperature (losses.Inputs.TeacherTemperature)
	Similarity         losses.Similarity
	Both               bool    // train the passage tower too (over the candidates' texts, in the graph)
	PassageLRScale     float64 // its learning rate, times the phase's
	Retrieve           ragjoint.RetrieveFunc
}

// task trains the retriever with one Atlas objective: the retrieval logits s [B,K]
// (ragjoint.ReaderRetrieval) against the teacher [B,K] computed from the frozen reader each
// step (no cache: a resumed step scores what the uninterrupted one did).
type task struct {
	ragjoint.ReaderRetrieval
	sc        *ragreader.Scorer
	objective string
	teacher   *tensor.Dense // [B,K]
	loss      *gorgonia.Node
	trainer.GraphParams
}

func newTask(s *study.Study, sc *ragreader.Scorer, qs []ragjoint.Question, o taskOptions, next func(step int) []int) (*task, error) {
	B, K := o.B, o.K
	t := &task{ReaderRetrieval: ragjoint.ReaderRetrieval{JointBatch: ragjoint.JointBatch{Name: "atlas", M: s.Encoder, Tok: s.Tok, Index: s.Index, Qs: qs, Next: next, Retrieve: o.Retrieve,
		B: B, K: K, Source: "bm25+dense", BM25Depth: o.BM25Depth}}, sc: sc, objective: o.Objective}
	spec, err := losses.Lookup(objectives[o.Objective])
	if err != nil {
		return nil, err
	}
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	s2, err := t.Logits(g, b, o.Both, o.Similarity)
	if err != nil {
		return nil, err
	}
	flat, err := gorgonia.Reshape(s2, tensor.Shape{B * K})
	if err != nil {
		return nil, err
	}
	t.teacher = tensor.New(tensor.WithShape(B, K), tensor.Of(tensor.Float32))
	// The logits already hold sim / tau, so the student's temperature is 1.
	if t.loss, err = spec.Build(losses.Inputs{Scores: flat, B: B, K: K, Temperature: 1, TeacherTemperature: o.TeacherTemperature, Teacher: t.teacher}); err != nil {
		return nil, err
	}
	if _, err := gorgonia.Grad(t.loss, b.Nodes()...); err != nil {
		return nil, fmt.Errorf("atlas gradient graph: %w", err)
	}
	t.GraphParams = trainer.NewGraphParams(b, gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...)))
	if o.Both {
		ps := t.GraphParams.Params()
		for i := range ps {
			if strings.HasPrefix(ps[i].Name, model.PrefixPassage+".") {
				ps[i].LRScale = o.PassageLRScale
			}
		}
	}
	return t, nil
}

func (t *task) Step(step int) (float64, int, error) {
	batch, cands, err := t.DrawK(step)
	if err != nil {
		return 0, 0, err
	}
	pairs := make([]ragreader.ScorePair, 0, t.B*t.K)
	for b, qi := range batch {
		q := t.Qs[qi]
		for _, row := range cands[b] {
			pairs = append(pairs, ragreader.ScorePair{Passage: t.Index.Texts[row], Prompt: q.Prompt, Answer: q.Answer})
		}
	}
	ll, mass, err := t.sc.Score(pairs)
	if err != nil {
		return 0, 0, err
	}
	te := t.teacher.Data().([]float32)
	for b := range batch {
		row := ll[b*t.K : (b+1)*t.K]
		switch t.objective {
		case "attention":
			for k := range t.K {
				te[b*t.K+k] = float32(mass[b*t.K+k])
			}
		case "loo":
			o, err := losses.LeaveOneOut(t.K, losses.MixtureLoss(row))
			if err != nil {
				return 0, 0, err
			}
			for k, v := range o {
				te[b*t.K+k] = float32(v)
			}
		default: // emdr2, perplexity: the log-likelihoods
			for k, v := range row {
				te[b*t.K+k] = float32(v)
			}
		}
	}
	return t.RunStep(cands, &t.GraphParams, t.loss)
}

func (t *task) Close() { t.VM.Close() }

var _ trainer.Task = (*task)(nil)
