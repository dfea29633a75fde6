package experiment

import (
	"context"
	"fmt"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
)

// kind = "realm": REALM-style joint training (Guu et al. 2020) on the garden world. After the
// rag pipeline's preparation (realm_study.go), each system of realm.systems trains from the
// same start on the retriever-training questions:
//
//   - "supervised": both towers with InfoNCE on the gold entries (the ceiling);
//   - "async", "sync", "off": RAG-Sequence updating the query tower, the passage tower (over
//     the candidates' texts, in the graph) and the reader (realm.update_reader), each question's
//     K candidates retrieved from the serving index of an index_refresh.Refresher that
//     re-encodes the datastore every index_refresh.refresh_every steps in that mode;
//   - "frozen": the same with the passage tower frozen: the starting index stays exact.
//
// Each system is then evaluated with a freshly encoded index: Recall@1/5 and the reader's exact
// match over the top passage. log.jsonl has, per step, the serving index's version and
// staleness; metrics.json "<system>/encoding_seconds" and "<system>/waited_seconds".
func init() { Register("realm", runRealm) }

func runRealm(ctx context.Context, rec *configs.Recipe, o Options) (string, error) {
	return runStudy(ctx, rec, o, rec.Realm.Systems, (*study).realm, func(s *study) {
		s.retrievalNote = fmt.Sprintf("REALM: RAG-Sequence, K = %d, refresh every %d steps", rec.Realm.TopK, rec.IndexRefresh.RefreshEvery)
		s.metrics["realm/refresh_every"] = float64(rec.IndexRefresh.RefreshEvery)
		s.metrics["realm/top_k"] = float64(rec.Realm.TopK)
	})
}

// realm trains one REALM system (name "async", "sync", "off" or "frozen").
func (s *study) realm(ctx context.Context, name, phase string, qs []ragQuestion, startStep int, opt *checkpoints.OptimizerState, before float64) error {
	g := s.rec.Realm
	if g.Steps == 0 || len(qs) == 0 {
		return nil
	}
	frozen := name == "frozen"
	o := ragOptions{B: g.BatchSize, K: g.TopK, Objective: "sequence", Mass: "renormalize", Source: "dense",
		Sim: s.loss.sim, UpdateReader: g.UpdateReader, TrainPassages: !frozen}
	var li *liveIndex
	var err error
	if !frozen {
		if li, err = s.newLiveIndex(ctx, phase, refreshMode(name), startStep); err != nil {
			return err
		}
		defer li.close()
		o.Retrieve = li.retrieve(g.TopK)
	}
	task, err := newRAGTask(s.enc, s.reader, s.tok, s.f, s.x, qs, o, func(step int) []int {
		return cycle(len(qs), g.BatchSize, step, s.seed^streamJoint)
	})
	if err != nil {
		return err
	}
	defer task.Close()
	sec, err := s.systemPhase(ctx, task, phase, g.Steps, startStep, opt, before, g.LR)
	if err != nil {
		return err
	}
	var extra map[string]float64
	if li != nil {
		extra = li.close()
		if err := li.r.Err(); err != nil && refreshMode(name) != indexrefresh.ModeOff {
			fmt.Fprintf(s.o.Out, "%s: the last refresh failed (the index before it kept serving): %v\n", phase, err)
		}
	}
	s.addTrainRow(phase, sec, extra)
	return s.evaluateSystem(phase)
}
