// Package colbert is the recipe kind colbert: a late-interaction retriever (package colbert:
// ColBERT with PyLate's text handling) fine-tuned from model.init_from's BERT body with
// colbert_contrastive (in-batch and BM25 hard negatives) or colbert_kl_distill (a
// cross-encoder teacher's scores, cached as the retriever caches them), checkpointed and resumed
// exactly through experiment.Env.RunPhase; evaluated by exact MaxSim (system colbert) and through
// the PLAID-style index (colbert_plaid, written to plaid/ in the run directory) beside BM25.
// One package and one registration with its own [colbert] table.
package colbert

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/checkpoints"
	cb "github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/retriever"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Kind is the recipe kind and the checkpoints' config.json kind.
const Kind = cb.Kind

// PhaseName names the training phase in log.jsonl and checkpoints.
const PhaseName = "train"

// PlaidDir is the run directory's PLAID-style index.
const PlaidDir = "plaid"

// StreamTrain seeds the training steps' dropout (XORed into the seed), as the retriever's.
const streamTrain = biencoder.StreamTrain

func init() {
	experiment.Register(Kind, runColBERT, configs.KindSpec{
		Sections: []string{"data", "tokenizer", "model", "loss", "sampler", "train", "index", "eval"},
		Losses:   []string{"colbert_contrastive", "colbert_kl_distill"},
		Own:      []configs.Section{section},
		Check:    configs.WarmupWithinSteps,
	})
}

// runColBERT: load the judged splits, mine BM25 negatives, build the model from init_from (or
// the latest checkpoint with -resume), train, then encode the corpus and rank every eval split by
// exact MaxSim and through the PLAID-style index.
func runColBERT(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	c := Of(rec)
	if err := experiment.ResolveInitFrom(rec, o.Out); err != nil {
		return "", err
	}
	lossSpec, err := losses.Lookup(rec.Loss.Name)
	if err != nil {
		return "", fmt.Errorf("loss.name: %w", err)
	}
	resume := o.ResumeDir != ""
	if resume && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		return o.ResumeDir, nil
	}
	splits := []string{rec.Data.TrainSplit}
	for _, s := range rec.Eval.Splits {
		if !slices.Contains(splits, s) {
			splits = append(splits, s)
		}
	}
	ds, err := data.LoadJudged(rec.Data.Dir, splits...)
	if err != nil {
		return "", err
	}
	passages := make([]string, ds.Corpus.Len())
	for i := range passages {
		passages[i] = ds.Corpus.Passage(i, rec.Data.TitleField)
	}
	tok, err := experiment.PrepareTokenizer(rec, o.ResumeDir, passages, o.Out)
	if err != nil {
		return "", err
	}
	bm25 := index.NewBM25(ds.Corpus.IDs, passages, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	seed := uint64(rec.Seed)
	var smp *sampler.Sampler
	if rec.Train.Steps > 0 {
		if smp, err = bm25Sampler(rec, ds, bm25, passages, seed); err != nil {
			return "", fmt.Errorf("[train]/[sampler] do not fit the %s qrels of %s: %w", rec.Data.TrainSplit, rec.Data.Dir, err)
		}
	}
	cfg := cb.Config{Encoder: biencoder.EncoderConfig(rec, tok.VocabSize()), Dim: c.Dim, QueryLength: c.QueryLength,
		DocumentLength: c.DocumentLength, AttendExpansion: c.AttendToExpansionTokens}
	if err := cfg.Validate(); err != nil {
		return "", err
	}
	dir, err := experiment.PrepareRunDir(rec, o)
	if err != nil {
		return "", err
	}
	tok, tokPath, err := experiment.SaveTokenizer(tok, dir, resume)
	if err != nil {
		return dir, err
	}
	m, err := cb.New(cfg, seed)
	if err != nil {
		return dir, err
	}
	fromCheckpoint := resume && experiment.HasCheckpoint(dir)
	if rec.Model.InitFrom != "" && !fromCheckpoint {
		if err := experiment.InitFrom(m.Enc, rec.Model.InitFrom, o.Out); err != nil {
			return dir, err
		}
	}
	ph := experiment.Phase{Name: PhaseName, Steps: rec.Train.Steps, LR: rec.Train.LR, Warmup: rec.Train.WarmupSteps,
		CheckpointEvery: rec.Train.CheckpointEvery, Params: m.Params(), Config: m.Cfg}
	if fromCheckpoint {
		ck, err := checkpoints.Load(dir)
		if err != nil {
			return dir, err
		}
		if err := experiment.SetParams(m.Params(), ck.Params); err != nil {
			return dir, fmt.Errorf("%s: %w", ck.Dir, err)
		}
		ph.Start, ph.Optimizer, ph.SecondsBefore = ck.Trainer.Step, ck.Optimizer, ck.Trainer.TrainSeconds
		fmt.Fprintf(o.Out, "resume: %s at step %d\n", ck.Dir, ck.Trainer.Step)
	}
	fmt.Fprintf(o.Out, "colbert: %d layers, H = %d -> %d per token, queries %d tokens ([MASK]-expanded), passages <= %d tokens; loss %s\n",
		cfg.Encoder.Layers, cfg.Encoder.Hidden, cfg.Dim, cfg.QueryLength, cfg.DocumentLength, lossSpec.Name)
	lg, err := experiment.OpenRunLog(dir, resume)
	if err != nil {
		return dir, err
	}
	defer lg.Close()
	env := &experiment.Env{Rec: rec, Opts: o, Dir: dir, Seed: seed, TokenizerPath: tokPath, Log: lg}
	metrics := map[string]float64{}
	if rec.Train.Steps > 0 && ph.Start < rec.Train.Steps {
		var teacher *retriever.Teacher
		if lossSpec.Teacher {
			if teacher, err = retriever.PrepareTeacher(rec, smp, ds, passages, bm25, dir, o); err != nil {
				return dir, err
			}
		}
		loss := cb.Loss{Name: lossSpec.Name, Temperature: rec.Loss.Temperature, TeacherTemperature: rec.Loss.TeacherTemperature}
		M := rec.Sampler.HardNegatives
		next := func(step int) (cb.Batch, error) {
			b, _, err := smp.Batch(step)
			if err != nil {
				return cb.Batch{}, err
			}
			out := cb.Batch{Queries: b.Queries, Passages: append(slices.Clone(b.Positives), b.Negatives...)}
			if teacher != nil {
				out.Teacher, err = teacher.BatchScores(b)
			}
			return out, err
		}
		task, err := cb.NewTask(m, tok, rec.Train.BatchSize, rec.Train.BatchSize*(1+M), loss, seed^streamTrain, next)
		if err != nil {
			return dir, err
		}
		ph.Task = task
		ph.State = func(done int, ts *checkpoints.TrainerState) {
			ts.Epoch, ts.SamplerPosition = smp.Epoch(done), done*rec.Train.BatchSize
		}
		res, seconds, err := env.RunPhase(ctx, ph)
		task.Close()
		if err != nil {
			return dir, err
		}
		metrics["train/seconds"], metrics["train/last_loss"] = seconds, res.LastLoss
	} else if rec.Train.Steps == 0 { // the untrained model is checkpoint 0: its index can be searched, the model exported
		if err := env.SaveZeroStep(PhaseName, m.Params(), m.Cfg); err != nil {
			return dir, err
		}
	}
	if err := evaluate(rec, c, ds, tok, m, bm25, passages, dir, metrics, o); err != nil {
		return dir, err
	}
	return dir, experiment.WriteMetrics(dir, metrics)
}

// bm25Sampler mines BM25 hard negatives (sampler.negative_window of BM25's ranking, judged
// passages excluded) for the training queries and returns the batch sampler.
func bm25Sampler(rec *configs.Recipe, ds *data.Dataset, bm25 *index.BM25, passages []string, seed uint64) (*sampler.Sampler, error) {
	qrels := ds.Qrels[rec.Data.TrainSplit]
	lo, hi := rec.Sampler.NegativeWindow[0], rec.Sampler.NegativeWindow[1]
	ranking, queries := map[string][]string{}, map[string]string{}
	for _, qid := range qrels.QueryIDs() {
		text, _ := ds.Queries.Text(qid)
		queries[qid] = text
		for _, h := range bm25.Search(text, hi) {
			ranking[qid] = append(ranking[qid], h.DocID)
		}
	}
	examples, _, err := sampler.Mine(qrels, ranking, sampler.MineOptions{
		Negatives: rec.Sampler.HardNegatives, Lo: lo, Hi: hi, Strategy: sampler.Strategy(rec.Sampler.NegativeStrategy), Seed: seed})
	if err != nil {
		return nil, err
	}
	return sampler.New(sampler.Collection{Queries: queries, DocIDs: ds.Corpus.IDs, DocTexts: passages, Qrels: qrels},
		examples, sampler.Options{BatchSize: rec.Train.BatchSize, HardNegatives: rec.Sampler.HardNegatives, Seed: seed})
}

// modelHash is the sha256 (hex) of the model's parameters (names, shapes, float32 values): the
// PLAID index's manifest names the model whose vectors it holds.
func modelHash(m *cb.Model) string {
	h := sha256.New()
	var buf [4]byte
	for _, p := range m.Params() {
		fmt.Fprintf(h, "%s %v\n", p.Name, p.Value.Shape())
		for _, v := range p.Value.Data().([]float32) {
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
			h.Write(buf[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// evaluate encodes the corpus, ranks each eval split by BM25, exact MaxSim (colbert) and the
// PLAID-style index (colbert_plaid), writes the runs and the table, and adds to metrics the
// index's bytes per passage and, per split, the recall of exact MaxSim's top 10 by PLAID's.
func evaluate(rec *configs.Recipe, c *Config, ds *data.Dataset, tok *tokenize.Tokenizer, m *cb.Model, bm25 *index.BM25,
	passages []string, dir string, metrics map[string]float64, o experiment.Options) error {
	enc, err := cb.NewEncoder(m, tok, c.EncodeBatch)
	if err != nil {
		return err
	}
	defer enc.Close()
	start := time.Now()
	docs, err := enc.Documents(passages)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	tokenize.ReportTruncation(o.Out, "eval corpus", c.DocumentLength, tokenize.TruncPart{Name: "passages", Count: &enc.DocCut})
	nTok := len(docs.Vecs) / docs.Dim
	fmt.Fprintf(o.Out, "colbert: encoded %d passages (%d scored tokens, %.1f per passage) in %.1fs\n", docs.Len(), nTok, float64(nTok)/float64(docs.Len()), secs)
	metrics["colbert/encode_seconds"] = secs
	metrics["colbert/tokens_per_passage"] = float64(nTok) / float64(docs.Len())
	metrics["colbert/float32_bytes_per_passage"] = float64(nTok*docs.Dim*4) / float64(docs.Len())
	exact, err := cb.NewExact(ds.Corpus.IDs, docs)
	if err != nil {
		return err
	}
	var plaid *cb.Plaid
	sp := cb.SearchParams{NCells: c.NCells, CentroidScoreThreshold: c.CentroidScoreThreshold, NDocs: c.NDocs}
	if c.Plaid {
		start := time.Now()
		if plaid, err = cb.BuildPlaid(ds.Corpus.IDs, docs, cb.PlaidOptions{NBits: c.NBits, KMeansIters: c.KMeansIters, Seed: uint64(rec.Seed)}); err != nil {
			return err
		}
		if err := plaid.Save(filepath.Join(dir, PlaidDir), modelHash(m)); err != nil {
			return err
		}
		st := plaid.Stats()
		fmt.Fprintf(o.Out, "colbert: PLAID-style index: %d centroids, %d bits per dimension, %.1f bytes per passage (codes and residuals; float32 vectors %.1f, %.1fx), %d bytes in all with centroids, built in %.1fs\n",
			st.Centroids, c.NBits, st.BytesPerPassage, metrics["colbert/float32_bytes_per_passage"], metrics["colbert/float32_bytes_per_passage"]/st.BytesPerPassage, st.TotalBytes, time.Since(start).Seconds())
		metrics["colbert_plaid/bytes_per_passage"] = st.BytesPerPassage
		metrics["colbert_plaid/total_bytes"] = float64(st.TotalBytes)
		metrics["colbert_plaid/centroids"] = float64(st.Centroids)
	}
	depth := rec.Eval.Depth
	for _, split := range rec.Eval.Splits {
		qrels := ds.Qrels[split]
		qids := qrels.QueryIDs()
		texts := make([]string, len(qids))
		for i, q := range qids {
			texts[i], _ = ds.Queries.Text(q)
		}
		qv, err := enc.Queries(texts)
		if err != nil {
			return err
		}
		runs := map[string]eval.Run{"bm25": {}, "colbert": {}, "colbert_plaid": {}}
		var recall float64
		var exactSecs, plaidSecs float64
		for i, q := range qids {
			runs["bm25"][q] = bm25.Search(texts[i], depth)
			t0 := time.Now()
			ex := exact.Search(qv.Rows(i), depth)
			exactSecs += time.Since(t0).Seconds()
			runs["colbert"][q] = ex
			if plaid != nil {
				t0 = time.Now()
				pl := plaid.Search(qv.Rows(i), depth, sp)
				plaidSecs += time.Since(t0).Seconds()
				runs["colbert_plaid"][q] = pl
				recall += topRecall(ex, pl, 10)
			}
		}
		systems := []experiment.System{{Name: "bm25", Run: runs["bm25"]}, {Name: "colbert", Run: runs["colbert"]}}
		key := func(k string) string {
			if split == rec.Data.TestSplit {
				return k
			}
			return k + "." + split
		}
		metrics[key("colbert/query_milliseconds")] = 1000 * exactSecs / float64(len(qids))
		if plaid != nil {
			systems = append(systems, experiment.System{Name: "colbert_plaid", Run: runs["colbert_plaid"]})
			metrics[key("colbert_plaid/recall_of_exact_top10")] = recall / float64(len(qids))
			metrics[key("colbert_plaid/query_milliseconds")] = 1000 * plaidSecs / float64(len(qids))
		}
		rows, err := experiment.EvaluateSystems(dir, split, split == rec.Data.TestSplit, qrels, systems, rec.Eval.Metrics, metrics)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "\n%s split, %d queries (%s):\n%s", split, len(qids), filepath.Base(rec.Data.Dir), eval.FormatTable(rec.Eval.Metrics, rows))
		if plaid != nil {
			fmt.Fprintf(o.Out, "colbert_plaid: recall of exact MaxSim's top 10: %.4f; %.1f ms per query (exact %.1f ms)\n",
				metrics[key("colbert_plaid/recall_of_exact_top10")], metrics[key("colbert_plaid/query_milliseconds")], metrics[key("colbert/query_milliseconds")])
		}
	}
	return nil
}

// topRecall is the share of ref's first k passages found among got's first k.
func topRecall(ref, got []index.Hit, k int) float64 {
	in := map[string]bool{}
	for _, h := range got[:min(k, len(got))] {
		in[h.DocID] = true
	}
	n, found := min(k, len(ref)), 0
	for _, h := range ref[:n] {
		if in[h.DocID] {
			found++
		}
	}
	if n == 0 {
		return 1
	}
	return float64(found) / float64(n)
}
