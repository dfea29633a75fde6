package ragkit

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// Sections are the recipe sections every garden kind reads, then extra: the garden kinds share
// the rag pipeline: world, tokenizer, reader, the bi-encoder ([model], [loss]), its label-free
// warm-up ([pretrain]), the optimiser settings ([train]), BM25 ([index]) and the datastore
// ([rag]). A kind passes them to experiment.Register.
func Sections(extra ...string) []string {
	return append([]string{"world", "tokenizer", "reader", "model", "loss", "pretrain", "train", "index", "rag"}, extra...)
}

// StudyStartDir is the checkpoint, in the run directory, of the start every system of a
// retriever study trains from (and of a rag run's prepared start).
const StudyStartDir = "start"

// Dropout and sampling streams of the rag phases (XORed into the seed).
const (
	streamLM       = 0x6c6d7072 // "lmpr"
	streamFinetune = 0x66696e65 // "fine"
	StreamReplay   = 0x7265706c // "repl"
	StreamJoint    = 0x6a6f696e // "join"
)

// GardenRun holds what the phases of a rag run share.
type GardenRun struct {
	experiment.Env
	World     *garden.World
	Tok       *tokenize.Tokenizer
	Format    *ragreader.Format
	Reader    *model.Reader
	Encoder   *model.BiEncoder
	RAGConfig model.RAGConfig
	Loss      biencoder.ContrastiveLoss // the bi-encoder's [loss]
	Metrics   map[string]float64
	TrainSec  float64
	// RetrievalNote, if set, replaces the training settings named above the retrieval table.
	RetrievalNote string
	// MidPhase makes the phases run by TrainPhase resumable mid-phase (kind selfrag): they
	// checkpoint every train.checkpoint_every steps, at their end and when interrupted, with
	// the optimizer state. Without it they save only their last step, without the optimizer.
	MidPhase bool
	// From is the checkpoint a resumed MidPhase run continues from: the phase it names starts
	// at its step with its optimizer state (its parameters are the caller's to set).
	From *checkpoints.Checkpoint
}

// JointQuestions are the world's questions jointQ as the joint-training loops take them: the
// retriever's query, the reader's prompt and the answer's token ids ending in [SEP].
func JointQuestions(w *garden.World, jointQ []int, f *ragreader.Format) []ragjoint.Question {
	qs := make([]ragjoint.Question, 0, len(jointQ))
	for _, i := range jointQ {
		q := &w.Questions[i]
		qs = append(qs, ragjoint.Question{Query: q.Trained, Prompt: ragreader.Question(q), Answer: f.Answer(q.Answer)})
	}
	return qs
}

// Data is what a rag run reads of its world: the datastore chunks, the pretraining
// documents and the questions by role (indices into World.Questions).
type Data struct {
	IDs, Texts []string   // datastore chunks
	Docs       []string   // pretraining corpus
	Rel        [][]string // per question, the chunks stating its fact
	Gold       []string   // per question, the first of them ("" without an entry)
	// Training gardeners' questions: reader fine-tuning reads finetuneQ, joint training
	// jointQ. With rag.held_out_questions the two are the training gardeners split in halves
	// (alternate gardeners): a reader that has memorised the answers of its fine-tuning
	// questions needs no passage for them, and on those RAG rewards whatever passage leaves
	// the memorised answer undisturbed (news) rather than the one stating the fact.
	FinetuneQ, JointQ, TestQ []int
}

// NewData splits the world w into the datastore (chunked as rag.chunking says), the
// pretraining documents and the questions by role; heldOut is rag.held_out_questions.
func NewData(w *garden.World, chunking string, heldOut bool) (*Data, error) {
	chunks, err := w.Chunks(chunking)
	if err != nil {
		return nil, err
	}
	d := &Data{IDs: make([]string, len(chunks)), Texts: make([]string, len(chunks)), Docs: make([]string, len(w.Pretrain))}
	textOf := make(map[string]string, len(chunks))
	for i, c := range chunks {
		d.IDs[i], d.Texts[i] = c.ID, c.Text
		textOf[c.ID] = c.Text
	}
	for i, doc := range w.Pretrain {
		d.Docs[i] = doc.Text
	}
	d.Rel = w.Relevant(chunks)
	d.Gold = make([]string, len(w.Questions))
	for i, r := range d.Rel {
		if len(r) > 0 {
			d.Gold[i] = textOf[r[0]]
		}
	}
	for i, q := range w.Questions {
		switch {
		case q.Split != "train":
			d.TestQ = append(d.TestQ, i)
		case heldOut && (q.Gardener/4)%2 == 1:
			d.JointQ = append(d.JointQ, i)
		case heldOut:
			d.FinetuneQ = append(d.FinetuneQ, i)
		default:
			d.FinetuneQ = append(d.FinetuneQ, i)
			d.JointQ = append(d.JointQ, i)
		}
	}
	return d, nil
}

// VocabTexts are the texts the tokenizer is trained on: the corpus, the datastore and the
// training gardeners' questions in their three phrasings ("?" and the question words appear
// nowhere else).
func (d *Data) VocabTexts(w *garden.World) []string {
	texts := append(append([]string(nil), d.Docs...), d.Texts...)
	for _, q := range w.Questions {
		if q.Split == "train" {
			texts = append(texts, q.Cloze, q.Trained, q.Unseen)
		}
	}
	return texts
}

// NewEval prepares the evaluation on the test gardeners' questions.
func (run *GardenRun) NewEval(d *Data) *Eval {
	ev := &Eval{dir: run.Dir, Format: run.Format, maxNew: run.Rec.Reader.MaxAnswerTokens, progress: run.Opts.Progress, metrics: run.Metrics,
		qrels: map[string]map[string]int{}}
	for _, i := range d.TestQ {
		q := &run.World.Questions[i]
		ev.Qs = append(ev.Qs, q)
		ev.Answers = append(ev.Answers, run.Tok.Encode(q.Answer))
		ev.Gold = append(ev.Gold, d.Gold[i])
		for _, id := range d.Rel[i] {
			if ev.qrels[q.ID] == nil {
				ev.qrels[q.ID] = map[string]int{}
			}
			ev.qrels[q.ID][id] = 1
		}
	}
	ev.All = make([]bool, len(ev.Qs))
	ev.HasEntry = make([]bool, len(ev.Qs))
	for i := range ev.All {
		ev.All[i], ev.HasEntry[i] = true, ev.Gold[i] != ""
	}
	return ev
}

// EvaluateStart evaluates the reader closed-book, over the gold entry, over BM25's top passage
// and over the dense retriever's (before joint training), and both retrievers' recall.
func (run *GardenRun) EvaluateStart(ev *Eval, x *ragjoint.Index) error {
	if err := ev.addReader(run.Reader, "closed_book", make([]string, len(ev.Qs)), ev.All); err != nil {
		return err
	}
	if err := ev.addReader(run.Reader, "gold_entry", ev.Gold, ev.HasEntry); err != nil {
		return err
	}
	bm25Run, bm25Top := ev.BM25Run(x)
	if err := ev.AddRetrieval("bm25", bm25Run); err != nil {
		return err
	}
	if err := ev.addReader(run.Reader, "bm25_top1", bm25Top, ev.All); err != nil {
		return err
	}
	return run.EvaluateDense(ev, x, "")
}

// EvaluateDense evaluates the dense retriever's recall and the reader over its top passage,
// as "dense" and "dense_top1" (after joint training with an objective: "dense+<name>" and
// "<name>_top1").
func (run *GardenRun) EvaluateDense(ev *Eval, x *ragjoint.Index, name string) error {
	r, top, err := ev.denseRun(x, func(texts []string) ([]float32, error) { return x.EncodeQueries(run.Encoder, run.Tok, texts) })
	if err != nil {
		return err
	}
	retr, reader := "dense", "dense_top1"
	if name != "" {
		retr, reader = "dense+"+name, name+"_top1"
	}
	if err := ev.AddRetrieval(retr, r); err != nil {
		return err
	}
	return ev.addReader(run.Reader, reader, top, ev.All)
}

// Report prints the reader table and the retrieval table.
func (run *GardenRun) Report(ev *Eval) {
	rec := run.Rec
	fmt.Fprintf(run.Opts.Out, "\nreader exact match on the %d test questions (trained phrasing) by pretraining mentions of the fact (%s); gold_entry: the %d questions with an entry:\n%s",
		len(ev.Qs), ev.BucketCounts(), CountTrue(ev.HasEntry), eval.FormatTable(ReaderColumns(), ev.Rows))
	note := fmt.Sprintf("candidates %s, K = %d, candidate mass %s", rec.RAG.CandidateSource, rec.RAG.TopK, rec.RAG.CandidateMass)
	if run.RetrievalNote != "" {
		note = run.RetrievalNote
	}
	fmt.Fprintf(run.Opts.Out, "\nretrieval of the passage stating the fact (%d test questions with an entry; %s):\n%s",
		len(ev.qrels), note, eval.FormatTable([]string{"Recall@1", "Recall@5"}, ev.RetrRows))
}

// TrainTokenizer trains the WordPiece vocabulary (or loads tokenizer.file), adds the reader's
// special tokens, saves it into the run directory and reloads it from there.
func (run *GardenRun) TrainTokenizer(texts []string) error {
	rec := run.Rec
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
	if _, err := tok.AddSpecialTokens([]string{ragreader.CtxOpen, ragreader.CtxClose}); err != nil {
		return err
	}
	run.TokenizerPath = filepath.Join(run.Dir, checkpoints.TokenizerFile)
	if err := tok.Save(run.TokenizerPath); err != nil {
		return err
	}
	if run.Tok, err = tokenize.Load(run.TokenizerPath); err != nil {
		return err
	}
	fmt.Fprintf(run.Opts.Out, "tokenizer: %d tokens in %.1fs\n", run.Tok.VocabSize(), time.Since(start).Seconds())
	run.Format, err = ragreader.NewFormat(run.Tok, rec.Reader.MaxLength)
	return err
}

// BuildModels creates the reader and the bi-encoder.
func (run *GardenRun) BuildModels() error {
	rec, rd := run.Rec, run.Rec.Reader
	v := run.Tok.VocabSize()
	rcfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: v, Hidden: rd.Hidden, Layers: rd.Layers, Heads: rd.Heads,
		FFN: rd.FFN, MaxPosition: rd.MaxLength, Dropout: rd.Dropout, Causal: true}
	var err error
	if run.Loss, err = biencoder.NewContrastiveLoss(rec); err != nil {
		return err
	}
	if run.Reader, err = model.NewReader(rcfg, run.Seed); err != nil {
		return fmt.Errorf("reader: %w", err)
	}
	if rd.InitFrom != "" {
		if err := ragreader.InitReader(run.Reader, run.Tok, rd.InitFrom, run.Opts.Out); err != nil {
			return err
		}
	}
	run.RAGConfig = model.RAGConfig{Kind: model.KindRAG, Reader: run.Reader.Cfg, Encoder: biencoder.EncoderConfig(rec, v), SharedTowers: rec.Model.SharedTowers,
		Similarity: rec.Loss.Similarity, Temperature: rec.Loss.Temperature, MaxLength: rec.Tokenizer.MaxLength, ReaderMaxLength: rd.MaxLength}
	if run.Encoder, err = model.NewBiEncoder(run.RAGConfig.Encoder, rec.Model.SharedTowers, run.Seed); err != nil {
		return fmt.Errorf("retriever: %w", err)
	}
	return nil
}

// Phase runs one training phase with a fresh AdamW (TrainPhase of name, task, steps, lr).
func (run *GardenRun) Phase(ctx context.Context, task trainer.Task, name string, steps int, lr float64) error {
	return run.TrainPhase(ctx, experiment.Phase{Name: name, Steps: steps, Task: task, LR: lr})
}

// TrainPhase runs ph (its Name, Steps, ragjoint.Task, LR and, optionally, State) as every garden phase
// runs: warm-up ShortWarmup(train.warmup_steps, Steps), checkpoints of every parameter of the
// reader and the bi-encoder under RAGConfig, at the phase's end only, or mid-phase with the
// optimizer state under MidPhase, continuing From when it names ph. A phase of no steps does
// nothing.
func (run *GardenRun) TrainPhase(ctx context.Context, ph experiment.Phase) error {
	if ph.Steps == 0 {
		return nil
	}
	ph.Warmup = experiment.ShortWarmup(run.Rec.Train.WarmupSteps, ph.Steps)
	ph.Params, ph.Config = append(run.Reader.Params(), run.Encoder.Params()...), run.RAGConfig
	if !run.MidPhase {
		ph.EndOnly, ph.NoOptimizer = true, true
	} else {
		ph.CheckpointEvery = run.Rec.Train.CheckpointEvery
		if ck := run.From; ck != nil && ck.Trainer.Phase == ph.Name {
			ph.Start, ph.Optimizer, ph.SecondsBefore = ck.Trainer.Step, ck.Optimizer, ck.Trainer.TrainSeconds
			fmt.Fprintf(run.Opts.Out, "resume: %s at step %d\n", ck.Dir, ck.Trainer.Step)
		}
	}
	res, _, err := run.RunPhase(ctx, ph)
	if err != nil {
		return err
	}
	sec := ph.SecondsBefore + res.Seconds
	run.TrainSec += sec
	run.Metrics["time/"+ph.Name+"_seconds"] = sec
	return nil
}

// PretrainReader trains the reader as a language model on the packed corpus rows.
func (run *GardenRun) PretrainReader(ctx context.Context, rows [][]int) error {
	rd := run.Rec.Reader
	B := rd.PretrainBatchSize
	steps := rd.PretrainPasses * ((len(rows) + B - 1) / B)
	if steps == 0 || len(rows) == 0 {
		return nil
	}
	task, err := ragreader.NewTask(run.Reader, B, run.Format.L, run.Format.L-1, run.Seed, streamLM, func(step int) ([]ragreader.LMRow, error) {
		batch := make([]ragreader.LMRow, 0, B)
		for _, i := range ragreader.Cycle(len(rows), B, step, run.Seed^streamLM) {
			batch = append(batch, ragreader.TextRow(rows[i], ragreader.GroupMain))
		}
		return batch, nil
	})
	if err != nil {
		return err
	}
	defer task.Close()
	return run.Phase(ctx, task, "reader_lm", steps, rd.PretrainLR)
}

// FinetuneReader trains the reader on the training gardeners' questions, the loss on the answer
// only; every step replays reader.replay pretraining rows. A question is asked with an empty
// context (closed_book_fraction of them, and always when the gardener has no entry), else with
// the passage stating the fact, in counterfactual_fraction of those with the fact's value
// replaced by another value of its type and the answer changed to match: the answer then cannot
// be recalled, only read (counterfactual contexts, as in Longpre et al. 2021), so the reader
// learns to copy from its context instead of memorising the training gardeners.
func (run *GardenRun) FinetuneReader(ctx context.Context, rows [][]int, trainQ []int, gold []string) error {
	rd := run.Rec.Reader
	if rd.FinetuneSteps == 0 || len(trainQ) == 0 {
		return nil
	}
	B, R := rd.FinetuneBatchSize, min(rd.Replay, len(rows))
	qs := run.World.Questions
	task, err := ragreader.NewTask(run.Reader, B+R, run.Format.L, run.Format.L-1, run.Seed, streamFinetune, func(step int) ([]ragreader.LMRow, error) {
		rng := rand.New(rand.NewPCG(run.Seed^streamFinetune, uint64(step)))
		batch := make([]ragreader.LMRow, 0, B+R)
		for _, i := range ragreader.Cycle(len(trainQ), B, step, run.Seed^streamFinetune) {
			qi := trainQ[i]
			q := &qs[qi]
			ctxText, answer := gold[qi], q.Answer
			switch u := rng.Float64(); {
			case u < rd.ClosedBookFraction:
				ctxText = ""
			case ctxText != "" && u < rd.ClosedBookFraction+(1-rd.ClosedBookFraction)*rd.CounterfactualFraction:
				ctxText, answer = Counterfactual(ctxText, answer, run.World.Values[q.Relation], rng)
			}
			ans := run.Format.Answer(answer)
			prompt, _, err := run.Format.Prompt(ctxText, ragreader.Question(q), len(ans))
			if err != nil {
				return nil, err
			}
			batch = append(batch, ragreader.QARow(prompt, ans))
		}
		if R > 0 {
			for _, i := range ragreader.Cycle(len(rows), R, step, run.Seed^StreamReplay) {
				batch = append(batch, ragreader.TextRow(rows[i], ragreader.GroupReplay))
			}
		}
		return batch, nil
	})
	if err != nil {
		return err
	}
	defer task.Close()
	return run.Phase(ctx, task, "reader_finetune", rd.FinetuneSteps, rd.FinetuneLR)
}

// WarmupRetriever trains the bi-encoder by independent cropping on the datastore (Contriever;
// no labels), the [pretrain] phase of a retriever recipe.
func (run *GardenRun) WarmupRetriever(ctx context.Context, texts []string) error {
	rec := run.Rec
	pt := rec.Pretrain
	if pt.Steps == 0 {
		return nil
	}
	task, err := biencoder.NewBiTask(run.Encoder, run.Tok, biencoder.TaskOptions{B: pt.BatchSize, N: pt.BatchSize, Lengths: biencoder.Lengths{Query: rec.Tokenizer.MaxLength, Passage: rec.Tokenizer.MaxLength}, Loss: run.Loss, Seed: run.Seed, Stream: biencoder.StreamPretrain, Next: func(step int) (biencoder.PairBatch, error) {
		cb, err := sampler.CropPairs(texts, pt.BatchSize, pt.CropMin, pt.CropMax, step, run.Seed)
		return biencoder.PairBatch{Queries: cb.Queries, Passages: cb.Positives}, err
	}})
	if err != nil {
		return err
	}
	defer task.Close()
	return run.Phase(ctx, task, "retriever_warmup", pt.Steps, rec.Train.LR)
}

// Joint trains the query tower (and the reader, unless rag.update_reader = false) with one RAG
// objective on the training questions.
//
// from, when not nil, is the checkpoint of this phase to resume (its parameters already set).
func (run *GardenRun) Joint(ctx context.Context, name, objective string, x *ragjoint.Index, qs []ragjoint.Question, from *checkpoints.Checkpoint) error {
	g := run.Rec.RAG
	if g.Steps == 0 || len(qs) == 0 {
		return nil
	}
	o := ragjoint.TaskOptions{B: g.BatchSize, K: g.TopK, Objective: objective, Mass: g.CandidateMass, Source: g.CandidateSource,
		BM25Depth: g.BM25Depth, Similarity: run.Loss.Similarity, UpdateReader: g.UpdateReader}
	task, err := ragjoint.NewTask(run.Encoder, run.Reader, run.Tok, run.Format, x, qs, o, func(step int) []int {
		return ragreader.Cycle(len(qs), g.BatchSize, step, run.Seed^StreamJoint)
	})
	if err != nil {
		return err
	}
	defer task.Close()
	ph := experiment.Phase{Name: name, Steps: g.Steps, Task: task, LR: g.LR, Warmup: experiment.ShortWarmup(run.Rec.Train.WarmupSteps, g.Steps),
		CheckpointEvery: run.Rec.Train.CheckpointEvery, Params: append(run.Reader.Params(), run.Encoder.Params()...), Config: run.RAGConfig,
		State: func(_ int, ts *checkpoints.TrainerState) { ts.Counters = map[string]int{"contexts_cut": task.Cut} }}
	if from != nil {
		ph.Start, ph.Optimizer, ph.SecondsBefore = from.Trainer.Step, from.Optimizer, from.Trainer.TrainSeconds
		task.Cut = from.Trainer.Counters["contexts_cut"]
	}
	_, sec, err := run.RunPhase(ctx, ph)
	if err != nil {
		return err
	}
	run.TrainSec += sec
	run.Metrics["time/"+name+"_seconds"] = sec
	if task.Cut > 0 {
		run.Metrics[name+"/contexts_cut"] = float64(task.Cut)
	}
	return nil
}

// Counterfactual replaces the value in the passage's sentence "... value ." by another of the
// values (drawn with rng) and returns the new passage and answer; a passage without the value
// is returned as it is.
func Counterfactual(passage, value string, values []string, rng *rand.Rand) (string, string) {
	if !strings.Contains(passage, " "+value+" .") || len(values) < 2 {
		return passage, value
	}
	other := values[rng.IntN(len(values)-1)]
	if other == value {
		other = values[len(values)-1]
	}
	return strings.ReplaceAll(passage, " "+value+" .", " "+other+" ."), other
}

// CountParams is the number of values in the parameters ps.
func CountParams(ps []*model.Param) int {
	n := 0
	for _, p := range ps {
		n += p.Value.Size()
	}
	return n
}

// CountTrue is the number of true values in b.
func CountTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// NewGardenRun starts a garden run (kinds rag and selfrag), or reopens the one o.ResumeDir
// names: the world, its variants and the run directory, the datastore chunked by chunking
// (heldOut: joint-training questions apart, rag.held_out_questions), log.jsonl, the tokenizer
// and the models. A resumed run keeps its world and tokenizer; its log is cut back to its
// latest checkpoint, of the run directory or start/ (continues), or to empty when it starts
// again from its first phase. A non-nil run holds an open log to close, even with an error.
//
// tokenizerFile, when set, is the file a resumed run reads its tokenizer from instead of the
// run directory's tokenizer.json (which stays the run's TokenizerPath): a selfrag run's
// tokenizer.json may hold the reflection tokens, which its plain reader has no rows for.
func NewGardenRun(rec *configs.Recipe, o experiment.Options, chunking string, heldOut, continues bool, tokenizerFile string) (*GardenRun, *Data, string, error) {
	start := time.Now()
	world, dir, err := OpenWorld(rec, o)
	if err != nil {
		return nil, nil, dir, err
	}
	resume := o.ResumeDir != ""
	if !resume {
		if err := writeWorldVariants(world, dir, uint64(rec.Seed)); err != nil {
			return nil, nil, dir, err
		}
	}
	d, err := NewData(world, chunking, heldOut)
	if err != nil {
		return nil, nil, dir, err
	}
	fmt.Fprintf(o.Out, "world: %d gardeners, %d pretraining documents, %d datastore chunks (%s), %d questions (%d reader fine-tuning, %d joint training, %d test), in %.1fs\n",
		len(world.Gardeners), len(world.Pretrain), len(d.IDs), chunking, len(world.Questions), len(d.FinetuneQ), len(d.JointQ), len(d.TestQ), time.Since(start).Seconds())
	run := &GardenRun{Env: experiment.Env{Rec: rec, Opts: o, Dir: dir, Seed: uint64(rec.Seed)}, World: world, Metrics: map[string]float64{}}
	switch {
	case continues:
		run.Log, err = experiment.OpenRunLog(dir, true, filepath.Join(dir, StudyStartDir))
	case resume:
		run.Log, err = trainer.OpenLogAt(filepath.Join(dir, experiment.LogFile), 0)
	default:
		run.Log, err = trainer.OpenLog(filepath.Join(dir, experiment.LogFile))
	}
	if err != nil {
		return nil, d, dir, err
	}
	if _, serr := os.Stat(filepath.Join(dir, checkpoints.TokenizerFile)); resume && serr == nil {
		err = run.RestoreTokenizer(tokenizerFile)
	} else {
		err = run.TrainTokenizer(d.VocabTexts(world))
	}
	if err != nil {
		return run, d, dir, err
	}
	return run, d, dir, run.BuildModels()
}

// OpenWorld checks the garden run's memory estimate (CheckMemory), generates the recipe's world
// and creates the run directory with the world written into it (world/), or reopens the
// resumed run's directory, whose world is already there.
func OpenWorld(rec *configs.Recipe, o experiment.Options) (world *garden.World, dir string, err error) {
	if err := CheckMemory(rec, o.Out); err != nil {
		return nil, "", err
	}
	if world, err = garden.Generate(rec.World); err != nil {
		return nil, "", fmt.Errorf("world: %w", err)
	}
	if dir, err = experiment.PrepareRunDir(rec, o); err != nil {
		return nil, "", err
	}
	if o.ResumeDir == "" {
		if err := world.Write(filepath.Join(dir, "world")); err != nil {
			return nil, dir, err
		}
	}
	return world, dir, nil
}

// CheckMemory is experiment.CheckMemory of a garden recipe's reader and bi-encoder
// (experiment.GardenMemory), over the vocabulary tokenizer.vocab_size asks for and the two
// special tokens the reader adds: the tokenizer is trained only once the run directory exists.
func CheckMemory(rec *configs.Recipe, out io.Writer) error {
	return experiment.CheckMemory(rec, out, experiment.GardenMemory(rec, biencoder.EncoderConfig(rec, rec.Tokenizer.VocabSize+2))...)
}

// SavedParams is a copy of parameter values to restore later.
type SavedParams map[*model.Param][]float32

// Snapshot copies the values of the parameters ps.
func Snapshot(ps []*model.Param) SavedParams {
	s := SavedParams{}
	for _, p := range ps {
		s[p] = append([]float32(nil), p.Value.Data().([]float32)...)
	}
	return s
}

// Restore writes the values s copied back into their parameters.
func Restore(s SavedParams) {
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

// RestoreTokenizer loads the run directory's tokenizer (it has the reader's special tokens),
// or the one of file when set; the run directory's stays the run's TokenizerPath.
func (s *GardenRun) RestoreTokenizer(file string) error {
	s.TokenizerPath = filepath.Join(s.Dir, checkpoints.TokenizerFile)
	if file == "" {
		file = s.TokenizerPath
	}
	var err error
	if s.Tok, err = tokenize.Load(file); err != nil {
		return err
	}
	s.Format, err = ragreader.NewFormat(s.Tok, s.Rec.Reader.MaxLength)
	return err
}
