package realm

import (
	"context"
	"fmt"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/study"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/ragreader"
)

// kind = "realm": REALM-style joint training (Guu et al. 2020) on the garden world. After the
// rag pipeline's preparation (experiment/internal/study), each system of realm.systems trains from the
// same start on the retriever-training questions:
//
//   - "supervised": both towers with InfoNCE on the gold entries (the ceiling);
//   - "async", "sync", "off": RAG-Sequence updating the query tower, the passage tower (over
//     the candidates' texts, in the graph) and the reader (realm.update_reader), each question's
//     K candidates retrieved from the serving index of an index_refresh.Refresher that
//     re-encodes the datastore every index_refresh.refresh_every steps in that mode (the dense
//     top K, or with rag.candidate_source = "bm25+dense" BM25's top rag.bm25_depth rescored
//     by the serving index); the passage tower learns at realm.passage_lr_scale times realm.lr,
//     frozen for its first realm.passage_warmup_steps;
//   - "frozen": the same with the passage tower frozen: the starting index stays exact.
//
// Each system is then evaluated with a freshly encoded index: Recall@1/5 and the reader's exact
// match over the top passage. log.jsonl has, per step, the serving index's version and
// staleness; metrics.json "<system>/encoding_seconds" and "<system>/waited_seconds".
//
// With realm.seeds set, each system but "supervised" trains once per seed (seeds.go): its
// runs are the systems "async_seed42", "async_seed7", ... (phases "realm_async_seed42", ...),
// each checkpointed, resumed and kept in study.json like any system, and the report adds
// their mean and standard deviation.
func init() {
	experiment.Register("realm", runRealm, configs.KindSpec{Sections: ragkit.Sections("realm", "index_refresh"), Losses: []string{"infonce"}, Keys: []string{"realm.systems"}})
}

func runRealm(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	seeds := rec.Realm.Seeds
	return study.RunStudy(ctx, rec, o, seededSystems(rec.Realm.Systems, seeds), true, trainRealm, func(s *study.Study) {
		s.RetrievalNote = fmt.Sprintf("REALM: RAG-Sequence, K = %d, refresh every %d steps", rec.Realm.TopK, rec.IndexRefresh.RefreshEvery)
		s.Metrics["realm/refresh_every"] = float64(rec.IndexRefresh.RefreshEvery)
		s.Metrics["realm/top_k"] = float64(rec.Realm.TopK)
		if len(seeds) > 0 {
			s.Epilogue = func() { reportSeeds(s, rec.Realm.Systems, seeds) }
		}
	})
}

// trainRealm trains one REALM system (name "async", "sync", "off" or "frozen", or one seed's
// run of it, "async_seed7": the seed replaces the top-level seed while it trains).
func trainRealm(s *study.Study, ctx context.Context, name, phase string, qs []ragjoint.Question, startStep int, opt *checkpoints.OptimizerState, before float64) error {
	g := s.Rec.Realm
	if g.Steps == 0 || len(qs) == 0 {
		return nil
	}
	name, seed, seeded, err := splitSeed(name)
	if err != nil {
		return err
	}
	if seeded {
		defer func(old uint64) { s.Seed = old }(s.Seed)
		s.Seed = seed
		if int64(seed) == g.Seeds[0] { // runs/test.dense+realm_async.trec is the first seed's
			s.AlsoTREC("dense+"+phase, "dense+"+study.SystemPhase(name))
		}
	}
	frozen := name == "frozen"
	src := s.Rec.RAG.CandidateSource
	o := ragjoint.TaskOptions{B: g.BatchSize, K: g.TopK, Objective: "sequence", Mass: "renormalize", Source: src, BM25Depth: s.Rec.RAG.BM25Depth,
		Similarity: s.Loss.Similarity, UpdateReader: g.UpdateReader, TrainPassages: !frozen,
		PassageLRScale: g.PassageLRScale, PassageWarmupSteps: g.PassageWarmupSteps, InBatch: g.InBatchNegatives,
		ClipPerTower: g.ClipPerTower}
	var li *study.LiveIndex
	if !frozen {
		if li, err = s.NewLiveIndex(ctx, phase, study.RefreshMode(name), startStep); err != nil {
			return err
		}
		defer li.Close()
		o.Retrieve = li.Retrieve(g.TopK)
		if src == "bm25+dense" {
			o.Retrieve = li.RetrieveBM25(g.TopK, s.Rec.RAG.BM25Depth)
		}
	}
	task, err := ragjoint.NewTask(s.Encoder, s.Reader, s.Tok, s.Format, s.Index, qs, o, func(step int) []int {
		return ragreader.Cycle(len(qs), g.BatchSize, step, s.Seed^ragkit.StreamJoint)
	})
	if err != nil {
		return err
	}
	defer task.Close()
	ph := experiment.Phase{Name: phase, Steps: g.Steps, Task: task, LR: g.LR, Start: startStep, Optimizer: opt, SecondsBefore: before}
	if li != nil {
		ph.State, ph.Tensors = li.State, li.Tensors // a resumed system searches the indexes it would have
	}
	sec, err := s.RunSystemPhase(ctx, ph)
	if err != nil {
		return err
	}
	var extra map[string]float64
	if li != nil {
		extra = li.Close()
		if err := li.Refresher.Err(); err != nil && study.RefreshMode(name) != indexrefresh.ModeOff {
			fmt.Fprintf(s.Opts.Out, "%s: the last refresh failed (the index before it kept serving): %v\n", phase, err)
		}
	}
	s.AddTrainRow(phase, sec, extra)
	return s.EvaluateSystem(phase)
}
