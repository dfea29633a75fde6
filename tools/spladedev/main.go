// Command spladedev evaluates a SPLADE checkpoint on a split as kind splade's evaluation does
// (splade.EvalCorpus, splade.EncodeTerms, index.Sparse, the run's recipe for the lengths,
// pruning, corpus sample and metrics), against BM25 on the same passages, without training:
//
//	go run ./tools/spladedev -run RUN [-split dev] [-zeroshot]
//
// It prints the table and the terms per query and passage. For a run stopped before its own
// evaluation (e.g. docs/results/scifact-splade.md's small run at step 8).
package main

import (
	"flag"
	"fmt"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	_ "github.com/ragtrain/ragtrain/experiment/kinds"
	"github.com/ragtrain/ragtrain/experiment/splade"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
)

func main() {
	runDir := flag.String("run", "", "a kind = splade run directory")
	split := flag.String("split", "dev", "the split to evaluate")
	zero := flag.Bool("zeroshot", false, "evaluate the model before training instead (model.init_from with the head initialised as the run's)")
	flag.Parse()
	cli.Check("spladedev", do(*runDir, *split, *zero))
}

func do(runDir, split string, zero bool) error {
	r, err := export.OpenRun(runDir)
	if err != nil {
		return err
	}
	if r.Recipe == nil {
		return r.RecipeErr
	}
	rec := r.Recipe
	c := splade.Of(rec)
	s, cfg, err := r.Splade()
	if err != nil {
		return err
	}
	if zero {
		d, err := export.OpenBiEncoder(rec.Model.InitFrom)
		if err != nil {
			return err
		}
		m, err := model.NewBiEncoder(cfg.Encoder, true, uint64(rec.Seed))
		if err != nil {
			return err
		}
		if err := d.Init(m); err != nil {
			return err
		}
		if s, err = model.NewSplade(m.Query, cfg.DecoderBiasInit); err != nil {
			return err
		}
		fmt.Printf("zero-shot: %s with the head initialised (decoder bias %g)\n", rec.Model.InitFrom, cfg.DecoderBiasInit)
	}
	tok, err := r.Tokenizer()
	if err != nil {
		return err
	}
	ds, err := data.LoadJudged(rec.Data.Dir, split)
	if err != nil {
		return err
	}
	passages := make([]string, ds.Corpus.Len())
	for i := range passages {
		passages[i] = ds.Corpus.Passage(i, rec.Data.TitleField)
	}
	ids, texts := splade.EvalCorpus(ds, passages, rec.Eval.Splits, c.EvalCorpusSample, uint64(rec.Seed))
	docs, _, err := splade.EncodeTerms(s, tok, texts, cfg.MaxLength, c.EncodeBatch, cfg.TopKPassage)
	if err != nil {
		return err
	}
	x, err := index.NewSparse(ids, docs, s.Dim())
	if err != nil {
		return err
	}
	qids := ds.Qrels[split].QueryIDs()
	qtexts := make([]string, len(qids))
	for i, q := range qids {
		qtexts[i], _ = ds.Queries.Text(q)
	}
	qv, _, err := splade.EncodeTerms(s, tok, qtexts, cfg.QueryMaxLength, c.EncodeBatch, cfg.TopKQuery)
	if err != nil {
		return err
	}
	bm25 := index.NewBM25(ids, texts, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	sp, bm := eval.Run{}, eval.Run{}
	terms, visited := 0, 0
	for i, q := range qids {
		var n int
		sp[q], n = x.Search(qv[i], rec.Eval.Depth)
		bm[q] = bm25.Search(qtexts[i], rec.Eval.Depth)
		terms, visited = terms+len(qv[i]), visited+n
	}
	var rows []eval.Row
	for _, sys := range []struct {
		name string
		run  eval.Run
	}{{"bm25", bm}, {"splade", sp}} {
		m, err := eval.Evaluate(sys.run, ds.Qrels[split], rec.Eval.Metrics)
		if err != nil {
			return err
		}
		rows = append(rows, eval.Row{System: sys.name, Scores: m})
	}
	fmt.Printf("%s of %s, step %d: %s, %d queries, %d passages\n%s", r.Checkpoint.Dir, runDir, r.Checkpoint.Trainer.Step, split, len(qids), x.Len(), eval.FormatTable(rec.Eval.Metrics, rows))
	nq := float64(len(qids))
	fmt.Printf("splade: %.1f terms per query, %.1f per passage, %.1f postings visited per query (FLOPS %.4f)\n",
		float64(terms)/nq, float64(x.Postings())/float64(x.Len()), float64(visited)/nq, float64(visited)/nq/float64(x.Len()))
	return nil
}
