package rag

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/ragresume"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/tokenize"
)

// kind = "rag": the garden world, a generative reader and joint retriever-reader training.
//
//  1. generate the world of [world] and write it under <run>/world (corpus, datastore in BEIR
//     layout, questions, counts);
//  2. train a WordPiece tokenizer on the pretraining corpus, the datastore and the training
//     gardeners' questions, plus the special tokens <ctx> and </ctx>;
//  3. pretrain the reader (decoder-only causal Transformer, tied embeddings) as a language
//     model on the corpus, reader.pretrain_passes passes over packed rows; evaluate its cloze
//     completions ("Ines Ronus lives in" -> "Larkhill");
//  4. fine-tune it on (half) the training gardeners' questions: "<ctx> passage </ctx>
//     question cloze" (or an empty context) -> answer, loss on the answer tokens only,
//     replaying pretraining rows (ragreader/reader.go has the format);
//  5. warm up the bi-encoder without labels by independent cropping on the datastore
//     ([pretrain]), encode the datastore once (the index joint training starts from);
//  6. evaluate on the test gardeners: closed-book, reader over the gold entry, over BM25 top-1
//     and over dense top-1; Recall@1/5 of BM25 and dense;
//  7. for each objective of rag.objectives, from the same start: train the query tower and
//     the reader with the RAG marginal likelihood on the other half of the training
//     gardeners' questions (no passage labels), then evaluate dense Recall@1/5 and the reader
//     over dense top-1 again.
//
// Everything prints as two tables and goes to metrics.json.
func init() {
	experiment.Register("rag", runRAG, configs.KindSpec{Sections: ragkit.Sections(), Losses: []string{"infonce"}})
}

// runRAG runs a rag recipe as named stages, methods of ragRun, which carries the run's state
// from one to the next: the resume point, the world and the models, the start (reader and
// retriever trained, or restored), the datastore index and the start's evaluation, the joint
// objectives and the metrics.
func runRAG(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	if o.ResumeDir != "" && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		return o.ResumeDir, nil
	}
	r := &ragRun{start: time.Now(), dir: o.ResumeDir}
	defer r.close()
	err := experiment.RunStages(
		func() error { return r.resume(o) },    // a resumed run's progress: does its saved start hold?
		func() error { return r.open(rec, o) }, // the world, the tokenizer, the run directory, the models, BM25
		func() error { return r.train(ctx) },   // the start: the reader pretrained and fine-tuned, the retriever warmed up
		r.index,                                // the datastore index; the start evaluated and saved
		func() error { return r.joint(ctx) },   // each objective of rag.objectives from the start
		r.finish,                               // metrics.json
	)
	return r.dir, err
}

// ragRun is the state a rag run hands from stage to stage.
type ragRun struct {
	*ragkit.GardenRun
	start     time.Time
	dir       string              // the run directory once made (the resumed one before)
	prog      *ragresume.Progress // the finished stages
	fromStart bool                // a resumed run continuing from its saved start
	d         *ragkit.Data
	ev        *ragkit.Eval
	all       []*model.Param // the reader's and the bi-encoder's parameters
	bm25      *index.BM25
	x         *ragjoint.Index // the datastore index joint training starts from
}

// resume reads a resumed run's progress: a run whose start and its evaluation were saved
// continues from there; any other run starts at the first phase.
func (r *ragRun) resume(o experiment.Options) error {
	if o.ResumeDir == "" {
		return nil
	}
	var err error
	if r.prog, err = ragresume.ReadProgress(o.ResumeDir); err != nil {
		return err
	}
	_, saved := r.prog.Done(ragkit.StudyStartDir)
	r.fromStart = saved && experiment.HasCheckpoint(filepath.Join(o.ResumeDir, ragkit.StudyStartDir))
	if !r.fromStart {
		r.prog = &ragresume.Progress{Dir: o.ResumeDir}
	}
	return nil
}

// open generates the world and makes the run directory (or reopens the resumed one) with the
// tokenizer, the models and BM25 over the datastore.
func (r *ragRun) open(rec *configs.Recipe, o experiment.Options) error {
	run, d, dir, err := ragkit.NewGardenRun(rec, o, rec.RAG.Chunking, rec.RAG.HeldOutQuestions, r.fromStart, "")
	r.GardenRun, r.d, r.dir = run, d, dir
	if err != nil {
		return err
	}
	if r.prog == nil {
		r.prog = &ragresume.Progress{Dir: dir}
	}
	r.ev = run.NewEval(d)
	r.all = append(run.Reader.Params(), run.Encoder.Params()...)
	r.bm25 = index.NewBM25(d.IDs, d.Texts, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	return nil
}

// close closes the run's log.
func (r *ragRun) close() {
	if r.GardenRun != nil && r.Log != nil {
		r.Log.Close()
	}
}

// train makes the start joint training begins from: the reader pretrained as a language model
// and fine-tuned on training questions, the retriever warmed up without labels; a resumed run
// restores the saved start instead.
func (r *ragRun) train(ctx context.Context) error {
	if r.fromStart {
		ck, err := checkpoints.Load(filepath.Join(r.Dir, ragkit.StudyStartDir))
		if err != nil {
			return err
		}
		if err := experiment.SetParams(r.all, ck.Params); err != nil {
			return fmt.Errorf("%s: %w", ck.Dir, err)
		}
		st, _ := r.prog.Done(ragkit.StudyStartDir)
		r.prog.Restore(r.GardenRun, r.ev, st)
		fmt.Fprintf(r.Opts.Out, "resume: the start in %s\n", ck.Dir)
		return nil
	}
	if r.Opts.ResumeDir != "" {
		fmt.Fprintf(r.Opts.Out, "resume: %s has no saved start yet; starting from the first phase\n", r.Dir)
	}
	r.prog.Begin(r.GardenRun, r.ev)
	rows, cutDocs := r.Format.PackDocuments(r.d.Docs)
	fmt.Fprintf(r.Opts.Out, "reader: %d parameters; corpus packed into %d rows of <= %d tokens (%d documents cut)\n",
		ragkit.CountParams(r.Reader.Params()), len(rows), r.Format.L, cutDocs)
	if err := r.PretrainReader(ctx, rows); err != nil {
		return err
	}
	if r.Rec.Reader.PretrainPasses > 0 {
		if err := r.ev.AddCloze(r.Reader, "lm_cloze"); err != nil {
			return err
		}
	}
	if err := r.FinetuneReader(ctx, rows, r.d.FinetuneQ, r.d.Gold); err != nil {
		return err
	}
	return r.WarmupRetriever(ctx, r.d.Texts)
}

// index encodes the datastore (the index joint training starts from) and, unless the start was
// restored, evaluates the start and saves it with its evaluation.
func (r *ragRun) index() error {
	var err error
	r.x, err = ragjoint.NewIndex(r.Encoder, r.Tok, r.d.IDs, r.d.Texts, r.bm25, r.Loss.Cosine(), r.Loss.Temperature, r.Rec.Tokenizer.MaxLength)
	if err != nil {
		return err
	}
	tokenize.ReportTruncation(r.Opts.Out, "datastore index", r.x.L, tokenize.TruncPart{Name: "passages", Count: &r.x.PassageCut})
	if r.fromStart {
		return nil
	}
	if err := r.EvaluateStart(r.ev, r.x); err != nil {
		return err
	}
	if err := r.Save(filepath.Join(r.Dir, ragkit.StudyStartDir), r.all, r.RAGConfig, nil, checkpoints.TrainerState{Phase: "start", Seed: r.Seed, LogBytes: r.Log.Size()}); err != nil {
		return err
	}
	return r.prog.Finish(ragkit.StudyStartDir, r.GardenRun, r.ev)
}

// joint trains each objective of rag.objectives from the same start (a finished one restored, a
// resumed one continued from the run's latest checkpoint) and evaluates it.
func (r *ragRun) joint(ctx context.Context) error {
	var resumeCk *checkpoints.Checkpoint
	if r.fromStart && experiment.HasCheckpoint(r.Dir) {
		var err error
		if resumeCk, err = checkpoints.Load(r.Dir); err != nil {
			return err
		}
	}
	startParams := ragkit.Snapshot(r.all)
	qs := ragkit.JointQuestions(r.World, r.d.JointQ, r.Format)
	for _, obj := range r.Rec.RAG.Objectives {
		name := "rag_" + obj
		if st, ok := r.prog.Done(name); ok {
			r.prog.Restore(r.GardenRun, r.ev, st)
			fmt.Fprintf(r.Opts.Out, "%s: finished in an earlier segment\n", name)
			continue
		}
		ragkit.Restore(startParams)
		r.prog.Begin(r.GardenRun, r.ev)
		var from *checkpoints.Checkpoint
		if resumeCk != nil && resumeCk.Trainer.Phase == name {
			if err := experiment.SetParams(r.all, resumeCk.Params); err != nil {
				return fmt.Errorf("%s: %w", resumeCk.Dir, err)
			}
			from = resumeCk
			fmt.Fprintf(r.Opts.Out, "resume: %s at step %d\n", from.Dir, from.Trainer.Step)
		}
		if err := r.Joint(ctx, name, obj, r.x, qs, from); err != nil {
			return err
		}
		if err := r.EvaluateDense(r.ev, r.x, name); err != nil {
			return err
		}
		if err := r.prog.Finish(name, r.GardenRun, r.ev); err != nil {
			return err
		}
	}
	return nil
}

// finish prints the tables and writes metrics.json.
func (r *ragRun) finish() error {
	g := r.Rec.RAG
	r.Metrics["rag/candidate_mass."+g.CandidateMass] = 1
	r.Metrics["rag/top_k"] = float64(g.TopK)
	r.Metrics["train/seconds"] = r.TrainSec
	r.Metrics["run/seconds"] = time.Since(r.start).Seconds()
	r.Report(r.ev)
	fmt.Fprintf(r.Opts.Out, "run: %.0fs\n", time.Since(r.start).Seconds())
	return experiment.WriteMetrics(r.Dir, r.Metrics)
}
