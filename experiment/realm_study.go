package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// A retriever study (kind = "replug" and kind = "realm") runs the rag pipeline up to joint
// training (rag.go: world, tokenizer, reader pretraining and fine-tuning, retriever warm-up by
// cropping, the starting evaluation), then trains several retrievers from that one start and
// compares them: one table of reader exact match, one of Recall@1/@5, one of training time.
//
// Resume: the start (every parameter after the preparation phases) is saved in <run>/start/;
// each finished system's rows and metrics go to <run>/study.json; a system phase checkpoints
// every realm.checkpoint_every steps and when interrupted. `train -resume` reloads the start
// (or, before it exists, skips the preparation phases whose checkpoint is there), re-runs the
// starting evaluation (deterministic), restores the finished systems' results and continues
// the interrupted system from its latest checkpoint with its optimizer state.

const (
	studyStartDir = "start"      // checkpoint of the start every system trains from
	studyFile     = "study.json" // results of the finished systems
)

// studySystem is one finished system's results, as study.json keeps them.
type studySystem struct {
	Name      string             `json:"name"`
	Metrics   map[string]float64 `json:"metrics"`
	Rows      []eval.Row         `json:"reader_rows"`
	RetrRows  []eval.Row         `json:"retrieval_rows"`
	TrainRows []eval.Row         `json:"train_rows"`
}

// study is a prepared retriever study.
type study struct {
	*ragRun
	d      *ragData
	ev     *ragEval
	x      *ragIndex // the starting index (passage tower after warm-up)
	bm25   *index.BM25
	start  savedParams
	t0     time.Time
	done   []studySystem
	resume *checkpoints.Checkpoint // the latest checkpoint of an interrupted system phase
	// trainRows is the training-time table: seconds, encoding, waiting, refreshes, staleness.
	trainRows []eval.Row
}

// systemPhases are the phase names of the systems (checkpoint directories, log lines).
var systemPhases = map[string]string{
	"supervised": "supervised", "replug": "replug",
	"async": "realm_async", "sync": "realm_sync", "off": "realm_off", "frozen": "realm_frozen",
}

// runStudy runs a retriever study: the preparation (or its restoration), then each of systems
// from the same start ("supervised" by s.supervised, every other by train), then note (settings
// for the report) and the report.
func runStudy(ctx context.Context, rec *configs.Recipe, o Options, systems []string,
	train func(s *study, ctx context.Context, name, phase string, qs []ragQuestion, startStep int, opt *checkpoints.OptimizerState, before float64) error,
	note func(s *study)) (string, error) {
	if dir, ok := finishedStudy(o); ok {
		return dir, nil
	}
	s, dir, err := prepareStudy(ctx, rec, o)
	if s != nil && s.lg != nil {
		defer s.lg.Close()
	}
	if err != nil {
		return dir, err
	}
	qs := jointQuestions(s.world, s.d.jointQ, s.f)
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

// prepareStudy runs (or, resuming, restores) the rag pipeline up to joint training.
func prepareStudy(ctx context.Context, rec *configs.Recipe, o Options) (*study, string, error) {
	t0 := time.Now()
	world, err := garden.Generate(rec.World)
	if err != nil {
		return nil, "", fmt.Errorf("world: %w", err)
	}
	resume := o.ResumeDir != ""
	dir, err := prepareRunDir(rec, o)
	if err != nil {
		return nil, "", err
	}
	if !resume {
		if err := world.Write(filepath.Join(dir, "world")); err != nil {
			return nil, dir, err
		}
	}
	d, err := newRAGData(world, rec.RAG.Chunking, rec.RAG.HeldOutQuestions)
	if err != nil {
		return nil, dir, err
	}
	fmt.Fprintf(o.Out, "world: %d gardeners, %d pretraining documents, %d datastore chunks (%s), %d questions (%d reader fine-tuning, %d retriever training, %d test), in %.1fs\n",
		len(world.Gardeners), len(world.Pretrain), len(d.ids), rec.RAG.Chunking, len(world.Questions), len(d.finetuneQ), len(d.jointQ), len(d.testQ), time.Since(t0).Seconds())
	run := &ragRun{runEnv: runEnv{rec: rec, o: o, dir: dir, seed: uint64(rec.Seed)}, world: world, metrics: map[string]float64{}}
	if run.lg, err = openRunLog(dir, resume, filepath.Join(dir, studyStartDir)); err != nil {
		return nil, dir, err
	}
	s := &study{ragRun: run, d: d, t0: t0}
	if resume {
		err = s.restoreTokenizer()
	} else {
		err = run.tokenizer(d.vocabTexts(world))
	}
	if err != nil {
		return s, dir, err
	}
	if err := run.models(); err != nil {
		return s, dir, err
	}
	run.cfg.Kind = rec.Kind
	s.ev = run.newEval(d)
	all := append(run.reader.Params(), run.enc.Params()...)

	// Where to start: the saved start, or the phases a checkpoint says are done.
	prepared := map[string]bool{}
	if resume {
		startDir := filepath.Join(dir, studyStartDir)
		if hasCheckpoint(startDir) {
			ck, err := checkpoints.Load(startDir)
			if err != nil {
				return s, dir, err
			}
			if err := setParams(all, ck.Params); err != nil {
				return s, dir, fmt.Errorf("%s: %w", ck.Dir, err)
			}
			prepared = map[string]bool{"reader_lm": true, "reader_finetune": true, "retriever_warmup": true, "start": true}
			fmt.Fprintf(o.Out, "resume: the start in %s\n", ck.Dir)
			if hasCheckpoint(dir) {
				if s.resume, err = checkpoints.Load(dir); err != nil {
					return s, dir, err
				}
			}
			if err := s.readDone(); err != nil {
				return s, dir, err
			}
		} else if hasCheckpoint(dir) {
			ck, err := checkpoints.Load(dir)
			if err != nil {
				return s, dir, err
			}
			order := []string{"reader_lm", "reader_finetune", "retriever_warmup"}
			if i := slices.Index(order, ck.Trainer.Phase); i >= 0 {
				if err := setParams(all, ck.Params); err != nil {
					return s, dir, fmt.Errorf("%s: %w", ck.Dir, err)
				}
				for _, p := range order[:i+1] {
					prepared[p] = true
				}
				fmt.Fprintf(o.Out, "resume: %s (phases up to %s done)\n", ck.Dir, ck.Trainer.Phase)
			}
		}
	}

	rows, cutDocs := run.f.packDocuments(d.docs)
	fmt.Fprintf(o.Out, "reader: %d parameters; corpus packed into %d rows of <= %d tokens (%d documents cut)\n",
		countParams(run.reader.Params()), len(rows), run.f.L, cutDocs)
	if !prepared["reader_lm"] {
		if err := run.pretrainReader(ctx, rows); err != nil {
			return s, dir, err
		}
	}
	if !prepared["reader_finetune"] {
		if err := run.finetuneReader(ctx, rows, d.finetuneQ, d.gold); err != nil {
			return s, dir, err
		}
	}
	if !prepared["retriever_warmup"] {
		if err := run.warmupRetriever(ctx, d.texts); err != nil {
			return s, dir, err
		}
	}
	if !prepared["start"] {
		if err := run.save(filepath.Join(dir, studyStartDir), all, run.cfg, nil, checkpoints.TrainerState{Phase: "start", Seed: run.seed, LogBytes: run.lg.Size()}); err != nil {
			return s, dir, err
		}
	}

	s.bm25 = index.NewBM25(d.ids, d.texts, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	if s.x, err = s.freshIndex(); err != nil {
		return s, dir, err
	}
	if err := run.evaluateStart(s.ev, s.x); err != nil {
		return s, dir, err
	}
	s.start = snapshot(all)
	return s, dir, nil
}

// restoreTokenizer loads the run directory's tokenizer (it has the reader's special tokens).
func (s *ragRun) restoreTokenizer() error {
	s.tokPath = filepath.Join(s.dir, checkpoints.TokenizerFile)
	var err error
	if s.tok, err = tokenize.Load(s.tokPath); err != nil {
		return err
	}
	s.f, err = newReaderFormat(s.tok, s.rec.Reader.MaxLength)
	return err
}

// freshIndex encodes the datastore with the current passage tower.
func (s *study) freshIndex() (*ragIndex, error) {
	rec := s.rec
	x, err := newRAGIndex(s.enc, s.tok, s.d.ids, s.d.texts, s.bm25, s.loss.cosine(), s.loss.tau, rec.Tokenizer.MaxLength)
	if err == nil {
		reportTruncation(s.o.Out, "datastore index", x.L, truncPart{"passages", &x.pCut})
	}
	return x, err
}

// readDone reads study.json, if any: the systems an earlier segment finished.
func (s *study) readDone() error {
	b, err := os.ReadFile(filepath.Join(s.dir, studyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &s.done); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(s.dir, studyFile), err)
	}
	return nil
}

// systems runs every system in order from the start: done ones are restored from study.json,
// the others trained by train(name, phase, startStep, optimizer state) and evaluated.
func (s *study) systems(names []string, train func(name, phase string, startStep int, opt *checkpoints.OptimizerState, before float64) error) error {
	for _, name := range names {
		if i := slices.IndexFunc(s.done, func(d studySystem) bool { return d.Name == name }); i >= 0 {
			d := s.done[i]
			for k, v := range d.Metrics {
				s.metrics[k] = v
			}
			s.trainSec += d.Metrics[systemPhases[name]+"/train_seconds"]
			s.ev.rows = append(s.ev.rows, d.Rows...)
			s.ev.retrRows = append(s.ev.retrRows, d.RetrRows...)
			s.trainRows = append(s.trainRows, d.TrainRows...)
			fmt.Fprintf(s.o.Out, "%s: finished in an earlier segment\n", name)
			continue
		}
		restore(s.start)
		phase := systemPhases[name]
		startStep, before := 0, 0.0
		var opt *checkpoints.OptimizerState
		if ck := s.resume; ck != nil && ck.Trainer.Phase == phase {
			if err := setParams(append(s.reader.Params(), s.enc.Params()...), ck.Params); err != nil {
				return fmt.Errorf("%s: %w", ck.Dir, err)
			}
			startStep, opt, before = ck.Trainer.Step, ck.Optimizer, ck.Trainer.TrainSeconds
			fmt.Fprintf(s.o.Out, "resume: %s at step %d\n", ck.Dir, startStep)
		}
		metricsBefore := maps.Clone(s.metrics)
		nRows, nRetr, nTrain := len(s.ev.rows), len(s.ev.retrRows), len(s.trainRows)
		if err := train(name, phase, startStep, opt, before); err != nil {
			return err
		}
		d := studySystem{Name: name, Metrics: map[string]float64{},
			Rows: s.ev.rows[nRows:], RetrRows: s.ev.retrRows[nRetr:], TrainRows: s.trainRows[nTrain:]}
		for k, v := range s.metrics {
			if old, ok := metricsBefore[k]; !ok || old != v {
				d.Metrics[k] = v
			}
		}
		s.done = append(s.done, d)
		b, err := json.MarshalIndent(s.done, "", "  ")
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(filepath.Join(s.dir, studyFile), b); err != nil {
			return err
		}
	}
	return nil
}

// systemPhase runs one system phase with AdamW (restored from opt when resuming at startStep),
// checkpointing every parameter every realm.checkpoint_every steps, at its end and when
// interrupted. It returns the phase's wall-clock training seconds over every segment.
func (s *study) systemPhase(ctx context.Context, task trainer.Task, phase string, steps, startStep int, opt *checkpoints.OptimizerState,
	before float64, lr float64) (float64, error) {
	_, sec, err := s.runPhase(ctx, Phase{Name: phase, Steps: steps, Task: task, LR: lr,
		Warmup: shortWarmup(s.rec.Train.WarmupSteps, steps), CheckpointEvery: s.rec.Realm.CheckpointEvery,
		Params: append(s.reader.Params(), s.enc.Params()...), Config: s.cfg,
		Start: startStep, Optimizer: opt, SecondsBefore: before})
	if err != nil {
		return 0, err
	}
	s.trainSec += sec
	return sec, nil
}

// supervised trains both towers with InfoNCE on the retriever-training questions and their
// gold entries (passage labels: the ceiling), train.steps steps of train.batch_size questions,
// in-batch negatives, a passage that is another question's gold entry too masked out.
func (s *study) supervised(ctx context.Context, name, phase string, startStep int, opt *checkpoints.OptimizerState, before float64) error {
	rec := s.rec
	var qs []int
	for _, i := range s.d.jointQ {
		if s.d.gold[i] != "" {
			qs = append(qs, i)
		}
	}
	B := rec.Train.BatchSize
	if len(qs) < B {
		return fmt.Errorf("supervised: %d training questions with a gold entry, fewer than train.batch_size = %d", len(qs), B)
	}
	task, err := newBiTask(s.enc, s.tok, B, B, rec.Tokenizer.MaxLength, s.loss, true, s.seed, streamTrain,
		func(step int) (pairBatch, error) {
			pb := pairBatch{Mask: make([]float32, B*B)}
			for _, j := range cycle(len(qs), B, step, s.seed^streamTrain) {
				q := &s.world.Questions[qs[j]]
				pb.Queries = append(pb.Queries, q.Trained)
				pb.Passages = append(pb.Passages, s.d.gold[qs[j]])
			}
			for i := range B {
				for j := range B {
					if i == j || pb.Passages[i] != pb.Passages[j] {
						pb.Mask[i*B+j] = 1
					}
				}
			}
			return pb, nil
		})
	if err != nil {
		return err
	}
	defer task.Close()
	sec, err := s.systemPhase(ctx, task, phase, rec.Train.Steps, startStep, opt, before, rec.Train.LR)
	if err != nil {
		return err
	}
	s.addTrainRow(phase, sec, nil)
	return s.evaluateSystem(phase)
}

// evaluateSystem re-encodes the datastore with the system's passage tower and evaluates
// Recall@1/5 ("dense+<name>") and the reader over the top passage ("<name>_top1").
func (s *study) evaluateSystem(name string) error {
	x, err := s.freshIndex()
	if err != nil {
		return err
	}
	return s.evaluateDense(s.ev, x, name)
}

// addTrainRow records the system's training wall time (and its refresher's counters).
func (s *study) addTrainRow(name string, seconds float64, extra map[string]float64) {
	row := eval.Row{System: name, Scores: map[string]float64{"seconds": seconds}}
	s.metrics[name+"/train_seconds"] = seconds
	for k, v := range extra {
		row.Scores[k] = v
		s.metrics[name+"/"+k] = v
	}
	s.trainRows = append(s.trainRows, row)
}

// trainColumns are the columns of the training-time table.
var trainColumns = []string{"seconds", "encoding_seconds", "waited_seconds", "refreshes", "mean_staleness", "max_staleness"}

// finish prints the tables, writes metrics.json and reports the run's time.
func (s *study) finish() error {
	s.metrics["train/seconds"] = s.trainSec
	s.metrics["run/seconds"] = time.Since(s.t0).Seconds()
	s.report(s.ev)
	fmt.Fprintf(s.o.Out, "\ntraining wall-clock time of each system (seconds; encoding: time spent re-encoding the corpus, waited: time training was blocked by the refresher; staleness in steps):\n%s",
		eval.FormatTable(trainColumns, s.trainRows))
	fmt.Fprintf(s.o.Out, "run: %.0fs\n", time.Since(s.t0).Seconds())
	return WriteMetrics(s.dir, s.metrics)
}

// finishedStudy reports a resumed study that has nothing left to do.
func finishedStudy(o Options) (string, bool) {
	if o.ResumeDir != "" && finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, MetricsFile)
		return o.ResumeDir, true
	}
	return "", false
}
