package rag

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	"github.com/ragtrain/ragtrain/index"
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
//     replaying pretraining rows (ragkit/rag_reader.go has the format);
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

func runRAG(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	if o.ResumeDir != "" && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		return o.ResumeDir, nil
	}
	start := time.Now()
	// Where to start: a resumed run whose start and its evaluation were saved continues from
	// there; any other run starts at the first phase.
	var prog *ragkit.Progress
	fromStart := false
	if o.ResumeDir != "" {
		var err error
		if prog, err = ragkit.ReadProgress(o.ResumeDir); err != nil {
			return o.ResumeDir, err
		}
		_, saved := prog.Done(ragkit.StudyStartDir)
		fromStart = saved && experiment.HasCheckpoint(filepath.Join(o.ResumeDir, ragkit.StudyStartDir))
		if !fromStart {
			prog = &ragkit.Progress{Dir: o.ResumeDir}
		}
	}
	run, d, dir, err := ragkit.NewGardenRun(rec, o, rec.RAG.Chunking, rec.RAG.HeldOutQuestions, fromStart, "")
	if run != nil && run.Log != nil {
		defer run.Log.Close()
	}
	if err != nil {
		return dir, err
	}
	if prog == nil {
		prog = &ragkit.Progress{Dir: dir}
	}
	world := run.World
	ev := run.NewEval(d)
	all := append(run.Reader.Params(), run.Encoder.Params()...)
	bm25 := index.NewBM25(d.IDs, d.Texts, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})

	startDir := filepath.Join(dir, ragkit.StudyStartDir)
	if fromStart {
		ck, err := checkpoints.Load(startDir)
		if err != nil {
			return dir, err
		}
		if err := experiment.SetParams(all, ck.Params); err != nil {
			return dir, fmt.Errorf("%s: %w", ck.Dir, err)
		}
		st, _ := prog.Done(ragkit.StudyStartDir)
		prog.Restore(run, ev, st)
		fmt.Fprintf(o.Out, "resume: the start in %s\n", ck.Dir)
	} else {
		if o.ResumeDir != "" {
			fmt.Fprintf(o.Out, "resume: %s has no saved start yet; starting from the first phase\n", dir)
		}
		prog.Begin(run, ev)
		// The reader: language-model pretraining, then fine-tuning on training questions.
		rows, cutDocs := run.Format.PackDocuments(d.Docs)
		fmt.Fprintf(o.Out, "reader: %d parameters; corpus packed into %d rows of <= %d tokens (%d documents cut)\n",
			ragkit.CountParams(run.Reader.Params()), len(rows), run.Format.L, cutDocs)
		if err := run.PretrainReader(ctx, rows); err != nil {
			return dir, err
		}
		if rec.Reader.PretrainPasses > 0 {
			if err := ev.AddCloze(run.Reader, "lm_cloze"); err != nil {
				return dir, err
			}
		}
		if err := run.FinetuneReader(ctx, rows, d.FinetuneQ, d.Gold); err != nil {
			return dir, err
		}
		// The retriever: label-free warm-up, then the index joint training starts from.
		if err := run.WarmupRetriever(ctx, d.Texts); err != nil {
			return dir, err
		}
	}
	x, err := ragkit.NewIndex(run.Encoder, run.Tok, d.IDs, d.Texts, bm25, run.Loss.Cosine(), run.Loss.Temperature, rec.Tokenizer.MaxLength)
	if err != nil {
		return dir, err
	}
	tokenize.ReportTruncation(o.Out, "datastore index", x.L, tokenize.TruncPart{Name: "passages", Count: &x.PassageCut})
	if !fromStart {
		if err := run.EvaluateStart(ev, x); err != nil {
			return dir, err
		}
		if err := run.Save(startDir, all, run.RAGConfig, nil, checkpoints.TrainerState{Phase: "start", Seed: run.Seed, LogBytes: run.Log.Size()}); err != nil {
			return dir, err
		}
		if err := prog.Finish(ragkit.StudyStartDir, run, ev); err != nil {
			return dir, err
		}
	}

	// Joint training, each objective from the same start.
	var resumeCk *checkpoints.Checkpoint
	if fromStart && experiment.HasCheckpoint(dir) {
		if resumeCk, err = checkpoints.Load(dir); err != nil {
			return dir, err
		}
	}
	startParams := ragkit.Snapshot(all)
	qs := ragkit.JointQuestions(world, d.JointQ, run.Format)
	for _, obj := range rec.RAG.Objectives {
		name := "rag_" + obj
		if st, ok := prog.Done(name); ok {
			prog.Restore(run, ev, st)
			fmt.Fprintf(o.Out, "%s: finished in an earlier segment\n", name)
			continue
		}
		ragkit.Restore(startParams)
		prog.Begin(run, ev)
		var from *checkpoints.Checkpoint
		if resumeCk != nil && resumeCk.Trainer.Phase == name {
			if err := experiment.SetParams(all, resumeCk.Params); err != nil {
				return dir, fmt.Errorf("%s: %w", resumeCk.Dir, err)
			}
			from = resumeCk
			fmt.Fprintf(o.Out, "resume: %s at step %d\n", from.Dir, from.Trainer.Step)
		}
		if err := run.Joint(ctx, name, obj, x, qs, from); err != nil {
			return dir, err
		}
		if err := run.EvaluateDense(ev, x, name); err != nil {
			return dir, err
		}
		if err := prog.Finish(name, run, ev); err != nil {
			return dir, err
		}
	}

	run.Metrics["rag/candidate_mass."+rec.RAG.CandidateMass] = 1
	run.Metrics["rag/top_k"] = float64(rec.RAG.TopK)
	run.Metrics["train/seconds"] = run.TrainSec
	run.Metrics["run/seconds"] = time.Since(start).Seconds()
	run.Report(ev)
	fmt.Fprintf(o.Out, "run: %.0fs\n", time.Since(start).Seconds())
	return dir, experiment.WriteMetrics(dir, run.Metrics)
}
