package experiment

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
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
//     replaying pretraining rows (rag_reader.go has the format);
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

// Dropout and sampling streams of the rag phases (XORed into the seed).
const (
	streamLM       = 0x6c6d7072 // "lmpr"
	streamFinetune = 0x66696e65 // "fine"
	streamReplay   = 0x7265706c // "repl"
	streamJoint    = 0x6a6f696e // "join"
)

// ragRun holds what the phases of a rag run share.
type ragRun struct {
	runEnv
	world    *garden.World
	tok      *tokenize.Tokenizer
	f        *readerFormat
	reader   *model.Reader
	enc      *model.BiEncoder
	cfg      model.RAGConfig
	loss     contrastiveLoss // the bi-encoder's [loss]
	metrics  map[string]float64
	trainSec float64
	// retrievalNote, if set, replaces the training settings named above the retrieval table.
	retrievalNote string
}

func init() { Register("rag", runRAG) }

func runRAG(ctx context.Context, rec *configs.Recipe, o Options) (string, error) {
	if o.ResumeDir != "" && finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, MetricsFile)
		return o.ResumeDir, nil
	}
	start := time.Now()
	// Where to start: a resumed run whose start and its evaluation were saved continues from
	// there; any other run starts at the first phase.
	var prog *ragProgress
	fromStart := false
	if o.ResumeDir != "" {
		var err error
		if prog, err = readRAGProgress(o.ResumeDir); err != nil {
			return o.ResumeDir, err
		}
		_, saved := prog.done(studyStartDir)
		fromStart = saved && hasCheckpoint(filepath.Join(o.ResumeDir, studyStartDir))
		if !fromStart {
			prog = &ragProgress{dir: o.ResumeDir}
		}
	}
	run, d, dir, err := newGardenRun(rec, o, rec.RAG.Chunking, rec.RAG.HeldOutQuestions, fromStart, false)
	if run != nil && run.lg != nil {
		defer run.lg.Close()
	}
	if err != nil {
		return dir, err
	}
	if prog == nil {
		prog = &ragProgress{dir: dir}
	}
	world := run.world
	ev := run.newEval(d)
	all := append(run.reader.Params(), run.enc.Params()...)
	bm25 := index.NewBM25(d.ids, d.texts, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})

	startDir := filepath.Join(dir, studyStartDir)
	if fromStart {
		ck, err := checkpoints.Load(startDir)
		if err != nil {
			return dir, err
		}
		if err := setParams(all, ck.Params); err != nil {
			return dir, fmt.Errorf("%s: %w", ck.Dir, err)
		}
		st, _ := prog.done(studyStartDir)
		prog.restore(run, ev, st)
		fmt.Fprintf(o.Out, "resume: the start in %s\n", ck.Dir)
	} else {
		if o.ResumeDir != "" {
			fmt.Fprintf(o.Out, "resume: %s has no saved start yet; starting from the first phase\n", dir)
		}
		prog.begin(run, ev)
		// The reader: language-model pretraining, then fine-tuning on training questions.
		rows, cutDocs := run.f.packDocuments(d.docs)
		fmt.Fprintf(o.Out, "reader: %d parameters; corpus packed into %d rows of <= %d tokens (%d documents cut)\n",
			countParams(run.reader.Params()), len(rows), run.f.L, cutDocs)
		if err := run.pretrainReader(ctx, rows); err != nil {
			return dir, err
		}
		if rec.Reader.PretrainPasses > 0 {
			if err := ev.addCloze(run.reader, "lm_cloze"); err != nil {
				return dir, err
			}
		}
		if err := run.finetuneReader(ctx, rows, d.finetuneQ, d.gold); err != nil {
			return dir, err
		}
		// The retriever: label-free warm-up, then the index joint training starts from.
		if err := run.warmupRetriever(ctx, d.texts); err != nil {
			return dir, err
		}
	}
	x, err := newRAGIndex(run.enc, run.tok, d.ids, d.texts, bm25, run.loss.cosine(), run.loss.tau, rec.Tokenizer.MaxLength)
	if err != nil {
		return dir, err
	}
	reportTruncation(o.Out, "datastore index", x.L, truncPart{"passages", &x.pCut})
	if !fromStart {
		if err := run.evaluateStart(ev, x); err != nil {
			return dir, err
		}
		if err := run.save(startDir, all, run.cfg, nil, checkpoints.TrainerState{Phase: "start", Seed: run.seed, LogBytes: run.lg.Size()}); err != nil {
			return dir, err
		}
		if err := prog.finish(studyStartDir, run, ev); err != nil {
			return dir, err
		}
	}

	// Joint training, each objective from the same start.
	var resumeCk *checkpoints.Checkpoint
	if fromStart && hasCheckpoint(dir) {
		if resumeCk, err = checkpoints.Load(dir); err != nil {
			return dir, err
		}
	}
	startParams := snapshot(all)
	qs := jointQuestions(world, d.jointQ, run.f)
	for _, obj := range rec.RAG.Objectives {
		name := "rag_" + obj
		if st, ok := prog.done(name); ok {
			prog.restore(run, ev, st)
			fmt.Fprintf(o.Out, "%s: finished in an earlier segment\n", name)
			continue
		}
		restore(startParams)
		prog.begin(run, ev)
		var from *checkpoints.Checkpoint
		if resumeCk != nil && resumeCk.Trainer.Phase == name {
			if err := setParams(all, resumeCk.Params); err != nil {
				return dir, fmt.Errorf("%s: %w", resumeCk.Dir, err)
			}
			from = resumeCk
			fmt.Fprintf(o.Out, "resume: %s at step %d\n", from.Dir, from.Trainer.Step)
		}
		if err := run.joint(ctx, name, obj, x, qs, from); err != nil {
			return dir, err
		}
		if err := run.evaluateDense(ev, x, name); err != nil {
			return dir, err
		}
		if err := prog.finish(name, run, ev); err != nil {
			return dir, err
		}
	}

	run.metrics["rag/candidate_mass."+rec.RAG.CandidateMass] = 1
	run.metrics["rag/top_k"] = float64(rec.RAG.TopK)
	run.metrics["train/seconds"] = run.trainSec
	run.metrics["run/seconds"] = time.Since(start).Seconds()
	run.report(ev)
	fmt.Fprintf(o.Out, "run: %.0fs\n", time.Since(start).Seconds())
	return dir, WriteMetrics(dir, run.metrics)
}

// ragData is what a rag run reads of its world: the datastore chunks, the pretraining
// documents and the questions by role (indices into World.Questions).
// jointQuestions are the world's questions jointQ as the joint-training loops take them: the
// retriever's query, the reader's prompt and the answer's token ids ending in [SEP].
func jointQuestions(w *garden.World, jointQ []int, f *readerFormat) []ragQuestion {
	qs := make([]ragQuestion, 0, len(jointQ))
	for _, i := range jointQ {
		q := &w.Questions[i]
		qs = append(qs, ragQuestion{query: q.Trained, prompt: readerQuestion(q), answer: f.answer(q.Answer)})
	}
	return qs
}

type ragData struct {
	ids, texts []string   // datastore chunks
	docs       []string   // pretraining corpus
	rel        [][]string // per question, the chunks stating its fact
	gold       []string   // per question, the first of them ("" without an entry)
	// Training gardeners' questions: reader fine-tuning reads finetuneQ, joint training
	// jointQ. With rag.held_out_questions the two are the training gardeners split in halves
	// (alternate gardeners): a reader that has memorised the answers of its fine-tuning
	// questions needs no passage for them, and on those RAG rewards whatever passage leaves
	// the memorised answer undisturbed (news) rather than the one stating the fact.
	finetuneQ, jointQ, testQ []int
}

func newRAGData(w *garden.World, chunking string, heldOut bool) (*ragData, error) {
	chunks, err := w.Chunks(chunking)
	if err != nil {
		return nil, err
	}
	d := &ragData{ids: make([]string, len(chunks)), texts: make([]string, len(chunks)), docs: make([]string, len(w.Pretrain))}
	textOf := make(map[string]string, len(chunks))
	for i, c := range chunks {
		d.ids[i], d.texts[i] = c.ID, c.Text
		textOf[c.ID] = c.Text
	}
	for i, doc := range w.Pretrain {
		d.docs[i] = doc.Text
	}
	d.rel = w.Relevant(chunks)
	d.gold = make([]string, len(w.Questions))
	for i, r := range d.rel {
		if len(r) > 0 {
			d.gold[i] = textOf[r[0]]
		}
	}
	for i, q := range w.Questions {
		switch {
		case q.Split != "train":
			d.testQ = append(d.testQ, i)
		case heldOut && (q.Gardener/4)%2 == 1:
			d.jointQ = append(d.jointQ, i)
		case heldOut:
			d.finetuneQ = append(d.finetuneQ, i)
		default:
			d.finetuneQ = append(d.finetuneQ, i)
			d.jointQ = append(d.jointQ, i)
		}
	}
	return d, nil
}

// vocabTexts are the texts the tokenizer is trained on: the corpus, the datastore and the
// training gardeners' questions in their three phrasings ("?" and the question words appear
// nowhere else).
func (d *ragData) vocabTexts(w *garden.World) []string {
	texts := append(append([]string(nil), d.docs...), d.texts...)
	for _, q := range w.Questions {
		if q.Split == "train" {
			texts = append(texts, q.Cloze, q.Trained, q.Unseen)
		}
	}
	return texts
}

// newEval prepares the evaluation on the test gardeners' questions.
func (run *ragRun) newEval(d *ragData) *ragEval {
	ev := &ragEval{dir: run.dir, f: run.f, maxNew: run.rec.Reader.MaxAnswerTokens, progress: run.o.Progress, metrics: run.metrics,
		qrels: map[string]map[string]int{}}
	for _, i := range d.testQ {
		q := &run.world.Questions[i]
		ev.qs = append(ev.qs, q)
		ev.answers = append(ev.answers, run.tok.Encode(q.Answer))
		ev.gold = append(ev.gold, d.gold[i])
		for _, id := range d.rel[i] {
			if ev.qrels[q.ID] == nil {
				ev.qrels[q.ID] = map[string]int{}
			}
			ev.qrels[q.ID][id] = 1
		}
	}
	ev.all = make([]bool, len(ev.qs))
	ev.hasEntry = make([]bool, len(ev.qs))
	for i := range ev.all {
		ev.all[i], ev.hasEntry[i] = true, ev.gold[i] != ""
	}
	return ev
}

// evaluateStart evaluates the reader closed-book, over the gold entry, over BM25's top passage
// and over the dense retriever's (before joint training), and both retrievers' recall.
func (run *ragRun) evaluateStart(ev *ragEval, x *ragIndex) error {
	if err := ev.addReader(run.reader, "closed_book", make([]string, len(ev.qs)), ev.all); err != nil {
		return err
	}
	if err := ev.addReader(run.reader, "gold_entry", ev.gold, ev.hasEntry); err != nil {
		return err
	}
	bm25Run, bm25Top := ev.bm25Run(x)
	if err := ev.addRetrieval("bm25", bm25Run); err != nil {
		return err
	}
	if err := ev.addReader(run.reader, "bm25_top1", bm25Top, ev.all); err != nil {
		return err
	}
	return run.evaluateDense(ev, x, "")
}

// evaluateDense evaluates the dense retriever's recall and the reader over its top passage,
// as "dense" and "dense_top1" (after joint training with an objective: "dense+<name>" and
// "<name>_top1").
func (run *ragRun) evaluateDense(ev *ragEval, x *ragIndex, name string) error {
	r, top, err := ev.denseRun(x, func(texts []string) ([]float32, error) { return x.encodeQueries(run.enc, run.tok, texts) })
	if err != nil {
		return err
	}
	retr, reader := "dense", "dense_top1"
	if name != "" {
		retr, reader = "dense+"+name, name+"_top1"
	}
	if err := ev.addRetrieval(retr, r); err != nil {
		return err
	}
	return ev.addReader(run.reader, reader, top, ev.all)
}

// report prints the reader table and the retrieval table.
func (run *ragRun) report(ev *ragEval) {
	rec := run.rec
	var counts []string
	n := map[string]int{}
	for _, q := range ev.qs {
		n[q.Bucket]++
	}
	for _, b := range garden.Buckets {
		counts = append(counts, fmt.Sprintf("%s: %d", b, n[b]))
	}
	fmt.Fprintf(run.o.Out, "\nreader exact match on the %d test questions (trained phrasing) by pretraining mentions of the fact (%s); gold_entry: the %d questions with an entry:\n%s",
		len(ev.qs), strings.Join(counts, ", "), countTrue(ev.hasEntry), eval.FormatTable(readerColumns(), ev.rows))
	note := fmt.Sprintf("candidates %s, K = %d, candidate mass %s", rec.RAG.CandidateSource, rec.RAG.TopK, rec.RAG.CandidateMass)
	if run.retrievalNote != "" {
		note = run.retrievalNote
	}
	fmt.Fprintf(run.o.Out, "\nretrieval of the passage stating the fact (%d test questions with an entry; %s):\n%s",
		len(ev.qrels), note, eval.FormatTable([]string{"Recall@1", "Recall@5"}, ev.retrRows))
}

// tokenizer trains the WordPiece vocabulary (or loads tokenizer.file), adds the reader's
// special tokens, saves it into the run directory and reloads it from there.
func (run *ragRun) tokenizer(texts []string) error {
	rec := run.rec
	start := time.Now()
	var tok *tokenize.Tokenizer
	var err error
	if rec.Tokenizer.File != "" {
		tok, err = tokenize.Load(rec.Tokenizer.File)
	} else {
		tok, err = tokenize.Train(texts, tokenize.TrainOptions{
			VocabSize: rec.Tokenizer.VocabSize, MinFrequency: rec.Tokenizer.MinFrequency, Lowercase: rec.Tokenizer.Lowercase})
	}
	if err != nil {
		return err
	}
	if _, err := tok.AddSpecialTokens([]string{ctxOpen, ctxClose}); err != nil {
		return err
	}
	run.tokPath = filepath.Join(run.dir, checkpoints.TokenizerFile)
	if err := tok.Save(run.tokPath); err != nil {
		return err
	}
	if run.tok, err = tokenize.Load(run.tokPath); err != nil {
		return err
	}
	fmt.Fprintf(run.o.Out, "tokenizer: %d tokens in %.1fs\n", run.tok.VocabSize(), time.Since(start).Seconds())
	run.f, err = newReaderFormat(run.tok, rec.Reader.MaxLength)
	return err
}

// models creates the reader and the bi-encoder.
func (run *ragRun) models() error {
	rec, rd := run.rec, run.rec.Reader
	v := run.tok.VocabSize()
	rcfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: v, Hidden: rd.Hidden, Layers: rd.Layers, Heads: rd.Heads,
		FFN: rd.FFN, MaxPosition: rd.MaxLength, Dropout: rd.Dropout, Causal: true}
	var err error
	if run.loss, err = newContrastiveLoss(rec); err != nil {
		return err
	}
	if run.reader, err = model.NewReader(rcfg, run.seed); err != nil {
		return fmt.Errorf("reader: %w", err)
	}
	if rd.InitFrom != "" {
		if err := initReader(run.reader, run.tok, rd.InitFrom, run.o.Out); err != nil {
			return err
		}
	}
	run.cfg = model.RAGConfig{Kind: model.KindRAG, Reader: run.reader.Cfg, Encoder: encoderConfig(rec, v), SharedTowers: rec.Model.SharedTowers,
		Similarity: rec.Loss.Similarity, Temperature: rec.Loss.Temperature, MaxLength: rec.Tokenizer.MaxLength, ReaderLength: rd.MaxLength}
	if run.enc, err = model.NewBiEncoder(run.cfg.Encoder, rec.Model.SharedTowers, run.seed); err != nil {
		return fmt.Errorf("retriever: %w", err)
	}
	return nil
}

// phase runs one training phase with a fresh AdamW and checkpoints every parameter at its end.
func (run *ragRun) phase(ctx context.Context, task trainer.Task, name string, steps int, lr float64) error {
	if steps == 0 {
		return nil
	}
	res, _, err := run.runPhase(ctx, Phase{Name: name, Steps: steps, Task: task, LR: lr,
		Warmup: shortWarmup(run.rec.Train.WarmupSteps, steps), EndOnly: true, NoOptimizer: true,
		Params: append(run.reader.Params(), run.enc.Params()...), Config: run.cfg})
	if err != nil {
		return err
	}
	run.trainSec += res.Seconds
	run.metrics["time/"+name+"_seconds"] = res.Seconds
	return nil
}

// pretrainReader trains the reader as a language model on the packed corpus rows.
func (run *ragRun) pretrainReader(ctx context.Context, rows [][]int) error {
	rd := run.rec.Reader
	B := rd.PretrainBatchSize
	steps := rd.PretrainPasses * ((len(rows) + B - 1) / B)
	if steps == 0 || len(rows) == 0 {
		return nil
	}
	task, err := newReaderTask(run.reader, B, run.f.L, run.f.L-1, run.seed, streamLM, func(step int) ([]lmRow, error) {
		batch := make([]lmRow, 0, B)
		for _, i := range cycle(len(rows), B, step, run.seed^streamLM) {
			batch = append(batch, textRow(rows[i], groupMain))
		}
		return batch, nil
	})
	if err != nil {
		return err
	}
	defer task.Close()
	return run.phase(ctx, task, "reader_lm", steps, rd.PretrainLR)
}

// finetuneReader trains the reader on the training gardeners' questions, the loss on the answer
// only; every step replays reader.replay pretraining rows. A question is asked with an empty
// context (closed_book_fraction of them, and always when the gardener has no entry), else with
// the passage stating the fact, in counterfactual_fraction of those with the fact's value
// replaced by another value of its type and the answer changed to match: the answer then cannot
// be recalled, only read (counterfactual contexts, as in Longpre et al. 2021), so the reader
// learns to copy from its context instead of memorising the training gardeners.
func (run *ragRun) finetuneReader(ctx context.Context, rows [][]int, trainQ []int, gold []string) error {
	rd := run.rec.Reader
	if rd.FinetuneSteps == 0 || len(trainQ) == 0 {
		return nil
	}
	B, R := rd.FinetuneBatchSize, min(rd.Replay, len(rows))
	qs := run.world.Questions
	task, err := newReaderTask(run.reader, B+R, run.f.L, run.f.L-1, run.seed, streamFinetune, func(step int) ([]lmRow, error) {
		rng := rand.New(rand.NewPCG(run.seed^streamFinetune, uint64(step)))
		batch := make([]lmRow, 0, B+R)
		for _, i := range cycle(len(trainQ), B, step, run.seed^streamFinetune) {
			qi := trainQ[i]
			q := &qs[qi]
			ctxText, answer := gold[qi], q.Answer
			switch u := rng.Float64(); {
			case u < rd.ClosedBookFraction:
				ctxText = ""
			case ctxText != "" && u < rd.ClosedBookFraction+(1-rd.ClosedBookFraction)*rd.CounterfactualFraction:
				ctxText, answer = counterfactual(ctxText, answer, run.world.Values[q.Relation], rng)
			}
			ans := run.f.answer(answer)
			prompt, _, err := run.f.prompt(ctxText, readerQuestion(q), len(ans))
			if err != nil {
				return nil, err
			}
			batch = append(batch, qaRow(prompt, ans))
		}
		if R > 0 {
			for _, i := range cycle(len(rows), R, step, run.seed^streamReplay) {
				batch = append(batch, textRow(rows[i], groupReplay))
			}
		}
		return batch, nil
	})
	if err != nil {
		return err
	}
	defer task.Close()
	return run.phase(ctx, task, "reader_finetune", rd.FinetuneSteps, rd.FinetuneLR)
}

// warmupRetriever trains the bi-encoder by independent cropping on the datastore (Contriever;
// no labels), the [pretrain] phase of a retriever recipe.
func (run *ragRun) warmupRetriever(ctx context.Context, texts []string) error {
	rec := run.rec
	pt := rec.Pretrain
	if pt.Steps == 0 {
		return nil
	}
	task, err := newBiTask(run.enc, run.tok, pt.BatchSize, pt.BatchSize, rec.Tokenizer.MaxLength, run.loss, false,
		run.seed, streamPretrain, func(step int) (pairBatch, error) {
			cb, err := sampler.CropPairs(texts, pt.BatchSize, pt.CropMin, pt.CropMax, step, run.seed)
			return pairBatch{Queries: cb.Queries, Passages: cb.Positives}, err
		})
	if err != nil {
		return err
	}
	defer task.Close()
	return run.phase(ctx, task, "retriever_warmup", pt.Steps, rec.Train.LR)
}

// joint trains the query tower (and the reader, unless rag.update_reader = false) with one RAG
// objective on the training questions.
//
// from, when not nil, is the checkpoint of this phase to resume (its parameters already set).
func (run *ragRun) joint(ctx context.Context, name, objective string, x *ragIndex, qs []ragQuestion, from *checkpoints.Checkpoint) error {
	g := run.rec.RAG
	if g.Steps == 0 || len(qs) == 0 {
		return nil
	}
	o := ragOptions{B: g.BatchSize, K: g.TopK, Objective: objective, Mass: g.CandidateMass, Source: g.CandidateSource,
		BM25Depth: g.BM25Depth, Sim: run.loss.sim, UpdateReader: g.UpdateReader}
	task, err := newRAGTask(run.enc, run.reader, run.tok, run.f, x, qs, o, func(step int) []int {
		return cycle(len(qs), g.BatchSize, step, run.seed^streamJoint)
	})
	if err != nil {
		return err
	}
	defer task.Close()
	ph := Phase{Name: name, Steps: g.Steps, Task: task, LR: g.LR, Warmup: shortWarmup(run.rec.Train.WarmupSteps, g.Steps),
		CheckpointEvery: run.rec.Train.CheckpointEvery, Params: append(run.reader.Params(), run.enc.Params()...), Config: run.cfg,
		State: func(_ int, ts *checkpoints.TrainerState) { ts.Counters = map[string]int{"contexts_cut": task.cut} }}
	if from != nil {
		ph.Start, ph.Optimizer, ph.SecondsBefore = from.Trainer.Step, from.Optimizer, from.Trainer.TrainSeconds
		task.cut = from.Trainer.Counters["contexts_cut"]
	}
	_, sec, err := run.runPhase(ctx, ph)
	if err != nil {
		return err
	}
	run.trainSec += sec
	run.metrics["time/"+name+"_seconds"] = sec
	if task.cut > 0 {
		run.metrics[name+"/contexts_cut"] = float64(task.cut)
	}
	return nil
}

// counterfactual replaces the value in the passage's sentence "... value ." by another of the
// values (drawn with rng) and returns the new passage and answer; a passage without the value
// is returned as it is.
func counterfactual(passage, value string, values []string, rng *rand.Rand) (string, string) {
	if !strings.Contains(passage, " "+value+" .") || len(values) < 2 {
		return passage, value
	}
	other := values[rng.IntN(len(values)-1)]
	if other == value {
		other = values[len(values)-1]
	}
	return strings.ReplaceAll(passage, " "+value+" .", " "+other+" ."), other
}

func countParams(ps []*model.Param) int {
	n := 0
	for _, p := range ps {
		n += p.Value.Size()
	}
	return n
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// newGardenRun starts a garden run (kinds rag and selfrag), or reopens the one o.ResumeDir
// names: the world, its variants and the run directory, the datastore chunked by chunking
// (heldOut: joint-training questions apart, rag.held_out_questions), log.jsonl, the tokenizer
// and the models. A resumed run keeps its world and tokenizer; its log is cut back to its saved
// start and latest checkpoint (fromStart), or to empty when it starts again from its first
// phase. A non-nil run holds an open log to close, even with an error.
//
// retrain trains the tokenizer again even when the resumed run directory holds one.
func newGardenRun(rec *configs.Recipe, o Options, chunking string, heldOut, fromStart, retrain bool) (*ragRun, *ragData, string, error) {
	start := time.Now()
	world, err := garden.Generate(rec.World)
	if err != nil {
		return nil, nil, "", fmt.Errorf("world: %w", err)
	}
	resume := o.ResumeDir != ""
	dir, err := prepareRunDir(rec, o)
	if err != nil {
		return nil, nil, "", err
	}
	if !resume {
		if err := world.Write(filepath.Join(dir, "world")); err != nil {
			return nil, nil, dir, err
		}
		if err := writeWorldVariants(world, dir, uint64(rec.Seed)); err != nil {
			return nil, nil, dir, err
		}
	}
	d, err := newRAGData(world, chunking, heldOut)
	if err != nil {
		return nil, nil, dir, err
	}
	fmt.Fprintf(o.Out, "world: %d gardeners, %d pretraining documents, %d datastore chunks (%s), %d questions (%d reader fine-tuning, %d joint training, %d test), in %.1fs\n",
		len(world.Gardeners), len(world.Pretrain), len(d.ids), chunking, len(world.Questions), len(d.finetuneQ), len(d.jointQ), len(d.testQ), time.Since(start).Seconds())
	run := &ragRun{runEnv: runEnv{rec: rec, o: o, dir: dir, seed: uint64(rec.Seed)}, world: world, metrics: map[string]float64{}}
	switch {
	case fromStart:
		run.lg, err = openRunLog(dir, true, filepath.Join(dir, studyStartDir))
	case resume:
		run.lg, err = trainer.OpenLogAt(filepath.Join(dir, LogFile), 0)
	default:
		run.lg, err = trainer.OpenLog(filepath.Join(dir, LogFile))
	}
	if err != nil {
		return nil, d, dir, err
	}
	if _, serr := os.Stat(filepath.Join(dir, checkpoints.TokenizerFile)); resume && !retrain && serr == nil {
		err = run.restoreTokenizer()
	} else {
		err = run.tokenizer(d.vocabTexts(world))
	}
	if err != nil {
		return run, d, dir, err
	}
	return run, d, dir, run.models()
}

// savedParams is a copy of parameter values to restore later.
type savedParams map[*model.Param][]float32

func snapshot(ps []*model.Param) savedParams {
	s := savedParams{}
	for _, p := range ps {
		s[p] = append([]float32(nil), p.Value.Data().([]float32)...)
	}
	return s
}

func restore(s savedParams) {
	for p, v := range s {
		copy(p.Value.Data().([]float32), v)
	}
}

// writeWorldVariants writes the world's changes over time beside it: world-updated/ (a
// fraction of gardeners moved town; the pretraining corpus unchanged) and world-poisoned/ (a
// fraction of entries stating a wrong value), as docs/garden-world.md specifies.
func writeWorldVariants(world *garden.World, dir string, seed uint64) error {
	variants := []struct {
		name     string
		fraction float64
		make     func(float64, uint64) (*garden.World, error)
	}{
		{"world-updated", world.Config.UpdatedFraction, world.Updated},
		{"world-poisoned", world.Config.PoisonedFraction, world.Poisoned},
	}
	for _, v := range variants {
		if v.fraction == 0 {
			continue
		}
		w, err := v.make(v.fraction, seed)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		if err := w.Write(filepath.Join(dir, v.name)); err != nil {
			return err
		}
	}
	return nil
}
