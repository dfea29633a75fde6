package study

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/ragresume"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// A retriever study (kinds "replug", "realm" and "atlas") runs the rag pipeline up to joint
// training (package ragkit: world, tokenizer, reader pretraining and fine-tuning, retriever warm-up by
// cropping, the starting evaluation), then trains several retrievers from that one start and
// compares them: one table of reader exact match, one of Recall@1/@5, one of training time.
//
// Resume: the start (every parameter after the preparation phases) is saved in <run>/start/;
// each finished system's rows and metrics go to <run>/study.json; a system phase checkpoints
// every realm.checkpoint_every steps and when interrupted. `train -resume` reloads the start
// (or, before it exists, skips the preparation phases whose checkpoint is there), re-runs the
// starting evaluation (deterministic), restores the finished systems' results and continues
// the interrupted system from its latest checkpoint with its optimizer state.

// studyFile holds the results of the finished systems.
const studyFile = "study.json"

// Study is a prepared retriever study.
type Study struct {
	*ragkit.GardenRun
	d      *ragkit.Data
	ev     *ragkit.Eval
	Index  *ragjoint.Index // the starting index (passage tower after warm-up)
	bm25   *index.BM25
	start  ragkit.SavedParams
	t0     time.Time
	done   *ragresume.Stages       // the finished systems (study.json)
	resume *checkpoints.Checkpoint // the latest checkpoint of an interrupted system phase
	// trainRows is the training-time table: seconds, encoding, waiting, refreshes, staleness.
	trainRows []eval.Row
	// dev, when the kind asks for it, scores every retriever on the dev questions too.
	dev *devEval
	// Epilogue, when set by the kind, prints its own lines after the tables (before the
	// summary) and may add metrics: it runs before metrics.json is written.
	Epilogue func()
	// Summary, set by the kind, ends the report with one table of every system: test
	// Recall@1/@5, the reader's exact match over the top passage, training seconds and dev
	// Recall@1, the closed-book reader and the start as rows.
	Summary bool
}

// systemPhases are the phase names of the systems (checkpoint directories, log lines); a
// system not named here (kind atlas's) is its own phase name.
var systemPhases = map[string]string{
	"supervised": "supervised", "replug": "replug",
	"async": "realm_async", "sync": "realm_sync", "off": "realm_off", "frozen": "realm_frozen",
}

// SeedSuffix joins a system and a seed in the name of one seed's run of it ("async_seed7",
// phase "realm_async_seed7"; kind realm's realm.seeds).
const SeedSuffix = "_seed"

// SystemPhase returns the phase name of a system: "realm_async" for "async", and
// "realm_async_seed7" for "async_seed7".
func SystemPhase(name string) string {
	base, seed, seeded := strings.Cut(name, SeedSuffix)
	p, ok := systemPhases[base]
	if !ok {
		p = base
	}
	if seeded {
		p += SeedSuffix + seed
	}
	return p
}

// RunStudy runs a retriever study: the preparation (or its restoration), then each of systems
// from the same start ("supervised" by s.supervised, every other by train), then note (settings
// for the report) and the report.
//
// With dev set, every retriever (the start's and each system's) is also scored on the dev
// questions (DevQuestions), printed as its own table and written as "dev/<system>/Recall@k":
// the numbers to choose settings by, never the test questions'.
func RunStudy(ctx context.Context, rec *configs.Recipe, o experiment.Options, systems []string, dev bool,
	train func(s *Study, ctx context.Context, name, phase string, qs []ragjoint.Question, startStep int, opt *checkpoints.OptimizerState, before float64) error,
	note func(s *Study)) (string, error) {
	if dir, ok := finishedStudy(o); ok {
		return dir, nil
	}
	s, dir, err := prepareStudy(ctx, rec, o, dev)
	if s != nil && s.Log != nil {
		defer s.Log.Close()
	}
	if err != nil {
		return dir, err
	}
	qs := ragkit.JointQuestions(s.World, s.d.JointQ, s.Format)
	err = s.systems(systems, func(name, phase string, startStep int, opt *checkpoints.OptimizerState, before float64) error {
		if name == "supervised" {
			return s.supervised(ctx, name, phase, startStep, opt, before)
		}
		return train(s, ctx, name, phase, qs, startStep, opt, before)
	})
	if err != nil {
		return dir, err
	}
	note(s)
	return dir, s.finish()
}

// prepareStudy runs (or, resuming, restores) the rag pipeline up to joint training, as named
// stages: the world and the models, the saved start or the phases a checkpoint says are done,
// the phases left, and the start's index and evaluation.
func prepareStudy(ctx context.Context, rec *configs.Recipe, o experiment.Options, dev bool) (*Study, string, error) {
	s, dir, err := openStudy(rec, o)
	if err != nil {
		return s, dir, err
	}
	prepared, err := s.restoreStart()
	if err != nil {
		return s, dir, err
	}
	if err := s.prepare(ctx, prepared); err != nil {
		return s, dir, err
	}
	return s, dir, s.evaluateStart(dev)
}

// openStudy generates the world, makes the run directory (or reopens the resumed one) with the
// world, the log, the tokenizer and the models.
func openStudy(rec *configs.Recipe, o experiment.Options) (*Study, string, error) {
	t0 := time.Now()
	world, dir, err := ragkit.OpenWorld(rec, o)
	if err != nil {
		return nil, dir, err
	}
	resume := o.ResumeDir != ""
	d, err := ragkit.NewData(world, rec.RAG.Chunking, rec.RAG.HeldOutQuestions)
	if err != nil {
		return nil, dir, err
	}
	fmt.Fprintf(o.Out, "world: %d gardeners, %d pretraining documents, %d datastore chunks (%s), %d questions (%d reader fine-tuning, %d retriever training, %d test), in %.1fs\n",
		len(world.Gardeners), len(world.Pretrain), len(d.IDs), rec.RAG.Chunking, len(world.Questions), len(d.FinetuneQ), len(d.JointQ), len(d.TestQ), time.Since(t0).Seconds())
	run := &ragkit.GardenRun{Env: experiment.Env{Rec: rec, Opts: o, Dir: dir, Seed: uint64(rec.Seed)}, World: world, Metrics: map[string]float64{}}
	if run.Log, err = experiment.OpenRunLog(dir, resume, filepath.Join(dir, ragkit.StudyStartDir)); err != nil {
		return nil, dir, err
	}
	s := &Study{GardenRun: run, d: d, t0: t0, done: &ragresume.Stages{Path: filepath.Join(dir, studyFile)}}
	if resume {
		err = s.RestoreTokenizer("")
	} else {
		err = run.TrainTokenizer(d.VocabTexts(world))
	}
	if err != nil {
		return s, dir, err
	}
	if err := run.BuildModels(); err != nil {
		return s, dir, err
	}
	run.RAGConfig.Kind = rec.Kind
	s.ev = run.NewEval(d)
	return s, dir, nil
}

// params are the reader's and the bi-encoder's parameters, the start the systems share.
func (s *Study) params() []*model.Param {
	return append(s.Reader.Params(), s.Encoder.Params()...)
}

// restoreStart restores a resumed study's parameters from its saved start (every preparing phase
// done; the latest checkpoint of a system phase and the finished systems read too) or else from
// a checkpoint of a preparing phase, and returns the phases done.
func (s *Study) restoreStart() (prepared map[string]bool, err error) {
	prepared = map[string]bool{}
	if s.Opts.ResumeDir == "" {
		return prepared, nil
	}
	dir, all := s.Dir, s.params()
	if startDir := filepath.Join(dir, ragkit.StudyStartDir); experiment.HasCheckpoint(startDir) {
		ck, err := checkpoints.Load(startDir)
		if err != nil {
			return nil, err
		}
		if err := experiment.SetParams(all, ck.Params); err != nil {
			return nil, fmt.Errorf("%s: %w", ck.Dir, err)
		}
		prepared = map[string]bool{"reader_lm": true, "reader_finetune": true, "retriever_warmup": true, "start": true}
		fmt.Fprintf(s.Opts.Out, "resume: the start in %s\n", ck.Dir)
		if experiment.HasCheckpoint(dir) {
			if s.resume, err = checkpoints.Load(dir); err != nil {
				return nil, err
			}
		}
		return prepared, s.readDone()
	}
	if !experiment.HasCheckpoint(dir) {
		return prepared, nil
	}
	ck, err := checkpoints.Load(dir)
	if err != nil {
		return nil, err
	}
	order := []string{"reader_lm", "reader_finetune", "retriever_warmup"}
	if i := slices.Index(order, ck.Trainer.Phase); i >= 0 {
		if err := experiment.SetParams(all, ck.Params); err != nil {
			return nil, fmt.Errorf("%s: %w", ck.Dir, err)
		}
		for _, p := range order[:i+1] {
			prepared[p] = true
		}
		fmt.Fprintf(s.Opts.Out, "resume: %s (phases up to %s done)\n", ck.Dir, ck.Trainer.Phase)
	}
	return prepared, nil
}

// prepare runs the preparing phases not done: the reader's language-model pretraining and
// fine-tuning, the retriever's warm-up, and saves the start.
func (s *Study) prepare(ctx context.Context, prepared map[string]bool) error {
	run, d := s.GardenRun, s.d
	rows, cutDocs := run.Format.PackDocuments(d.Docs)
	fmt.Fprintf(s.Opts.Out, "reader: %d parameters; corpus packed into %d rows of <= %d tokens (%d documents cut)\n",
		ragkit.CountParams(run.Reader.Params()), len(rows), run.Format.L, cutDocs)
	if !prepared["reader_lm"] {
		if err := run.PretrainReader(ctx, rows); err != nil {
			return err
		}
	}
	if !prepared["reader_finetune"] {
		if err := run.FinetuneReader(ctx, rows, d.FinetuneQ, d.Gold); err != nil {
			return err
		}
	}
	if !prepared["retriever_warmup"] {
		if err := run.WarmupRetriever(ctx, d.Texts); err != nil {
			return err
		}
	}
	if prepared["start"] {
		return nil
	}
	return run.Save(filepath.Join(s.Dir, ragkit.StudyStartDir), s.params(), run.RAGConfig, nil, checkpoints.TrainerState{Phase: "start", Seed: run.Seed, LogBytes: run.Log.Size()})
}

// evaluateStart builds BM25 and the starting index over the datastore, evaluates the start (on
// the dev questions too with dev) and keeps its parameters for every system to start from.
func (s *Study) evaluateStart(dev bool) error {
	d, rec := s.d, s.Rec
	s.bm25 = index.NewBM25(d.IDs, d.Texts, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	var err error
	if s.Index, err = s.freshIndex(); err != nil {
		return err
	}
	if err := s.EvaluateStart(s.ev, s.Index); err != nil {
		return err
	}
	if dev {
		s.dev = newDevEval(s.World, d)
		if err := s.devRecall(s.Index, "dense"); err != nil {
			return err
		}
	}
	s.start = ragkit.Snapshot(s.params())
	return nil
}

// freshIndex encodes the datastore with the current passage tower.
func (s *Study) freshIndex() (*ragjoint.Index, error) {
	rec := s.Rec
	x, err := ragjoint.NewIndex(s.Encoder, s.Tok, s.d.IDs, s.d.Texts, s.bm25, s.Loss.Cosine(), s.Loss.Temperature, rec.Tokenizer.MaxLength)
	if err == nil {
		tokenize.ReportTruncation(s.Opts.Out, "datastore index", x.L, tokenize.TruncPart{Name: "passages", Count: &x.PassageCut})
	}
	return x, err
}

// readDone reads study.json, if any: the systems an earlier segment finished.
func (s *Study) readDone() (err error) {
	s.done, err = ragresume.ReadStages(s.Dir, studyFile)
	return err
}

// systems runs every system in order from the start: done ones are restored from study.json,
// the others trained by train(name, phase, startStep, optimizer state) and evaluated.
func (s *Study) systems(names []string, train func(name, phase string, startStep int, opt *checkpoints.OptimizerState, before float64) error) error {
	for _, name := range names {
		if d, ok := s.done.Done(name); ok {
			for k, v := range d.Metrics {
				s.Metrics[k] = v
			}
			s.TrainSec += d.Metrics[SystemPhase(name)+"/train_seconds"]
			s.ev.Rows = append(s.ev.Rows, d.Rows...)
			s.ev.RetrRows = append(s.ev.RetrRows, d.RetrRows...)
			s.trainRows = append(s.trainRows, d.TrainRows...)
			if s.dev != nil {
				s.dev.rows = append(s.dev.rows, d.DevRows...)
			}
			fmt.Fprintf(s.Opts.Out, "%s: finished in an earlier segment\n", name)
			continue
		}
		ragkit.Restore(s.start)
		phase := SystemPhase(name)
		startStep, before := 0, 0.0
		var opt *checkpoints.OptimizerState
		if ck := s.resume; ck != nil && ck.Trainer.Phase == phase {
			if err := experiment.SetParams(append(s.Reader.Params(), s.Encoder.Params()...), ck.Params); err != nil {
				return fmt.Errorf("%s: %w", ck.Dir, err)
			}
			startStep, opt, before = ck.Trainer.Step, ck.Optimizer, ck.Trainer.TrainSeconds
			fmt.Fprintf(s.Opts.Out, "resume: %s at step %d\n", ck.Dir, startStep)
		}
		metricsBefore := maps.Clone(s.Metrics)
		nRows, nRetr, nTrain, nDev := len(s.ev.Rows), len(s.ev.RetrRows), len(s.trainRows), 0
		if s.dev != nil {
			nDev = len(s.dev.rows)
		}
		if err := train(name, phase, startStep, opt, before); err != nil {
			return err
		}
		d := ragresume.Stage{Name: name, Metrics: ragresume.Changed(metricsBefore, s.Metrics),
			Rows: s.ev.Rows[nRows:], RetrRows: s.ev.RetrRows[nRetr:], TrainRows: s.trainRows[nTrain:]}
		if s.dev != nil {
			d.DevRows = s.dev.rows[nDev:]
		}
		if err := s.done.Add(d); err != nil {
			return err
		}
	}
	return nil
}

// SystemPhase runs one system phase with AdamW (restored from opt when resuming at startStep),
// checkpointing every parameter every realm.checkpoint_every steps, at its end and when
// interrupted. It returns the phase's wall-clock training seconds over every segment.
func (s *Study) SystemPhase(ctx context.Context, task trainer.Task, phase string, steps, startStep int, opt *checkpoints.OptimizerState,
	before float64, lr float64) (float64, error) {
	return s.RunSystemPhase(ctx, experiment.Phase{Name: phase, Steps: steps, Task: task, LR: lr,
		Start: startStep, Optimizer: opt, SecondsBefore: before})
}

// RunSystemPhase is SystemPhase of ph (its Name, Steps, ragjoint.Task, LR, resume point and, optionally,
// State and Tensors): warm-up ShortWarmup(train.warmup_steps, Steps), every parameter
// checkpointed under RAGConfig every realm.checkpoint_every steps.
func (s *Study) RunSystemPhase(ctx context.Context, ph experiment.Phase) (float64, error) {
	ph.Warmup, ph.CheckpointEvery = experiment.ShortWarmup(s.Rec.Train.WarmupSteps, ph.Steps), s.Rec.Realm.CheckpointEvery
	ph.Params, ph.Config = append(s.Reader.Params(), s.Encoder.Params()...), s.RAGConfig
	_, sec, err := s.RunPhase(ctx, ph)
	if err != nil {
		return 0, err
	}
	s.TrainSec += sec
	return sec, nil
}

// Resuming returns the checkpoint the system phase continues from (its counters and state,
// beyond the step and optimizer state the train function gets), nil when it starts afresh.
func (s *Study) Resuming(phase string) *checkpoints.Checkpoint {
	if ck := s.resume; ck != nil && ck.Trainer.Phase == phase {
		return ck
	}
	return nil
}

// supervised trains both towers with InfoNCE on the retriever-training questions and their
// gold entries (passage labels: the ceiling), train.steps steps of train.batch_size questions,
// in-batch negatives, a passage that is another question's gold entry too masked out.
func (s *Study) supervised(ctx context.Context, name, phase string, startStep int, opt *checkpoints.OptimizerState, before float64) error {
	rec := s.Rec
	var qs []int
	for _, i := range s.d.JointQ {
		if s.d.Gold[i] != "" {
			qs = append(qs, i)
		}
	}
	B := rec.Train.BatchSize
	if len(qs) < B {
		return fmt.Errorf("supervised: %d training questions with a gold entry, fewer than train.batch_size = %d", len(qs), B)
	}
	task, err := biencoder.NewBiTask(s.Encoder, s.Tok, biencoder.TaskOptions{B: B, N: B, Lengths: biencoder.Lengths{Query: rec.Tokenizer.MaxLength, Passage: rec.Tokenizer.MaxLength}, Loss: s.Loss, Masked: true, Seed: s.Seed, Stream: biencoder.StreamTrain, Next: func(step int) (biencoder.PairBatch, error) {
		pb := biencoder.PairBatch{Mask: make([]float32, B*B)}
		for _, j := range ragreader.Cycle(len(qs), B, step, s.Seed^biencoder.StreamTrain) {
			q := &s.World.Questions[qs[j]]
			pb.Queries = append(pb.Queries, q.Trained)
			pb.Passages = append(pb.Passages, s.d.Gold[qs[j]])
		}
		for i := range B {
			for j := range B {
				if i == j || pb.Passages[i] != pb.Passages[j] {
					pb.Mask[i*B+j] = 1
				}
			}
		}
		return pb, nil
	}})
	if err != nil {
		return err
	}
	defer task.Close()
	sec, err := s.SystemPhase(ctx, task, phase, rec.Train.Steps, startStep, opt, before, rec.Train.LR)
	if err != nil {
		return err
	}
	s.AddTrainRow(phase, sec, nil)
	return s.EvaluateSystem(phase)
}

// EvaluateSystem re-encodes the datastore with the system's passage tower and evaluates
// Recall@1/5 ("dense+<name>") and the reader over the top passage ("<name>_top1").
func (s *Study) EvaluateSystem(name string) error {
	x, err := s.freshIndex()
	if err != nil {
		return err
	}
	if s.dev != nil {
		if err := s.devRecall(x, "dense+"+name); err != nil {
			return err
		}
	}
	return s.EvaluateDense(s.ev, x, name)
}

// devEval scores retrievers on the dev questions.
type devEval struct {
	ids, texts []string // question ids and trained phrasings
	qrels      map[string]map[string]int
	rows       []eval.Row
}

// DevQuestions are the questions a study chooses its settings by: those of the reader
// fine-tuning gardeners (every 4th gardener, the half that joint training does not ask about;
// rag.held_out_questions). No retriever trains on them and they share no gardener with the test
// questions, whose numbers are reported but never tuned on. (The reader was fine-tuned on
// them, so only retrieval is scored.)
func newDevEval(w *garden.World, d *ragkit.Data) *devEval {
	e := &devEval{qrels: map[string]map[string]int{}}
	for _, i := range d.FinetuneQ {
		q := &w.Questions[i]
		e.ids, e.texts = append(e.ids, q.ID), append(e.texts, q.Trained)
		for _, id := range d.Rel[i] {
			if e.qrels[q.ID] == nil {
				e.qrels[q.ID] = map[string]int{}
			}
			e.qrels[q.ID][id] = 1
		}
	}
	return e
}

// devRecall scores the current query tower against x on the dev questions.
func (s *Study) devRecall(x *ragjoint.Index, name string) error {
	qv, err := x.EncodeQueries(s.Encoder, s.Tok, s.dev.texts)
	if err != nil {
		return err
	}
	run := eval.Run{}
	for i, hits := range x.Flat.SearchBatch(qv, 5) {
		run[s.dev.ids[i]] = hits
	}
	scores, err := eval.Evaluate(run, s.dev.qrels, []string{"Recall@1", "Recall@5"})
	if err != nil {
		return err
	}
	for m, v := range scores {
		s.Metrics["dev/"+name+"/"+m] = v
	}
	s.dev.rows = append(s.dev.rows, eval.Row{System: name, Scores: scores})
	return nil
}

// SystemMetrics returns the metrics the finished system name wrote (its entry of study.json,
// restored on resume); nil when it has not finished.
func (s *Study) SystemMetrics(name string) map[string]float64 {
	if d, ok := s.done.Done(name); ok {
		return d.Metrics
	}
	return nil
}

// AlsoTREC makes the test ranking of retrieval system name ("dense+realm_async.seed42") be
// written a second time, to runs/test.<alias>.trec under the run tag alias, when it is
// evaluated.
func (s *Study) AlsoTREC(name, alias string) { s.ev.AlsoTREC(name, alias) }

// AddTrainRow records the system's training wall time (and its refresher's counters).
func (s *Study) AddTrainRow(name string, seconds float64, extra map[string]float64) {
	row := eval.Row{System: name, Scores: map[string]float64{"seconds": seconds}}
	s.Metrics[name+"/train_seconds"] = seconds
	for k, v := range extra {
		row.Scores[k] = v
		s.Metrics[name+"/"+k] = v
	}
	s.trainRows = append(s.trainRows, row)
}

// trainColumns are the columns of the training-time table.
var trainColumns = []string{"seconds", "encoding_seconds", "waited_seconds", "refreshes", "mean_staleness", "max_staleness"}

// finish prints the tables, writes metrics.json and reports the run's time.
func (s *Study) finish() error {
	s.Metrics["train/seconds"] = s.TrainSec
	s.Metrics["run/seconds"] = time.Since(s.t0).Seconds()
	s.Report(s.ev)
	if s.dev != nil {
		fmt.Fprintf(s.Opts.Out, "\nDEV retrieval (%d questions of the reader fine-tuning gardeners, %d with an entry; settings are chosen on these):\n%s",
			len(s.dev.ids), len(s.dev.qrels), eval.FormatTable([]string{"Recall@1", "Recall@5"}, s.dev.rows))
	}
	fmt.Fprintf(s.Opts.Out, "\ntraining wall-clock time of each system (seconds; encoding: time spent re-encoding the corpus, waited: time training was blocked by the refresher; staleness in steps):\n%s",
		eval.FormatTable(trainColumns, s.trainRows))
	if s.Epilogue != nil {
		s.Epilogue()
	}
	if s.Summary {
		s.printSummary()
	}
	fmt.Fprintf(s.Opts.Out, "run: %.0fs\n", time.Since(s.t0).Seconds())
	return experiment.WriteMetrics(s.Dir, s.Metrics)
}

// printSummary prints the one-table summary of Study.Summary.
func (s *Study) printSummary() {
	m := s.Metrics
	row := func(system, retr, reader, phase string) eval.Row {
		r := eval.Row{System: system, Scores: map[string]float64{}}
		put := func(col, key string) {
			if v, ok := m[key]; ok {
				r.Scores[col] = v
			}
		}
		if retr != "" {
			put("Recall@1", retr+"/Recall@1")
			put("Recall@5", retr+"/Recall@5")
			put("dev Recall@1", "dev/"+retr+"/Recall@1")
		}
		put("EM top-1", reader+"/EM")
		if phase != "" {
			put("train s", phase+"/train_seconds")
		}
		return r
	}
	rows := []eval.Row{row("closed-book reader", "", "closed_book", ""), row("dense at the start", "dense", "dense_top1", "")}
	for _, d := range s.done.List {
		p := SystemPhase(d.Name)
		rows = append(rows, row(d.Name, "dense+"+p, p+"_top1", p))
	}
	fmt.Fprintf(s.Opts.Out, "\nsummary (test questions; EM top-1: the reader's exact match over the retriever's top passage; dev Recall@1 on the dev questions):\n%s",
		eval.FormatTable([]string{"Recall@1", "Recall@5", "EM top-1", "train s", "dev Recall@1"}, rows))
}

// finishedStudy reports a resumed study that has nothing left to do.
func finishedStudy(o experiment.Options) (string, bool) {
	if o.ResumeDir != "" && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		return o.ResumeDir, true
	}
	return "", false
}
