package ragresume

import (
	"maps"
	"path/filepath"
	"slices"

	"github.com/ragtrain/ragtrain/experiment/ragkit"
)

// Resume of a rag run. The start every objective trains from (every parameter after the
// reader phases and the retriever warm-up) is saved in <run>/start/ (ragkit.StudyStartDir, as the
// retriever studies do), and the results of each finished stage (the start's evaluation, then
// each objective's) go to <run>/rag.json. `train -resume` reloads the start and the finished
// stages' results, and continues the interrupted objective from its latest checkpoint with its
// optimizer state; a run stopped before its start was saved begins again from its first phase.
// Every batch, dropout mask and initialisation is a function of (seed, step), so the resumed
// run ends with the metrics of an uninterrupted one.

// ProgressFile is the file of a run directory where Progress records the finished stages.
const ProgressFile = "rag.json"

// Progress records the stages of a rag run as they finish (kind selfrag records its stages
// the same way: experiment/selfrag).
type Progress struct {
	Dir  string
	done Stages
	// what the results held when the current stage began
	metrics        map[string]float64
	nRows, nRetr   int
	trainSecBefore float64
}

// ReadProgress reads rag.json of a run directory (none: no stage finished).
func ReadProgress(dir string) (*Progress, error) {
	st, err := ReadStages(dir, ProgressFile)
	if err != nil {
		return nil, err
	}
	return &Progress{Dir: dir, done: *st}, nil
}

// Done returns the finished stage of that name.
func (p *Progress) Done(name string) (Stage, bool) { return p.done.Done(name) }

// Restore puts a finished stage's results back into the run.
func (p *Progress) Restore(run *ragkit.GardenRun, ev *ragkit.Eval, s Stage) {
	maps.Copy(run.Metrics, s.Metrics)
	ev.Rows = append(ev.Rows, s.Rows...)
	ev.RetrRows = append(ev.RetrRows, s.RetrRows...)
	run.TrainSec += s.TrainSeconds
}

// Begin notes the results before a stage, so that finish can record what it added.
func (p *Progress) Begin(run *ragkit.GardenRun, ev *ragkit.Eval) {
	p.metrics, p.nRows, p.nRetr, p.trainSecBefore = maps.Clone(run.Metrics), len(ev.Rows), len(ev.RetrRows), run.TrainSec
}

// Finish records the stage that began at begin and rewrites rag.json.
func (p *Progress) Finish(name string, run *ragkit.GardenRun, ev *ragkit.Eval) error {
	p.done.Path = filepath.Join(p.Dir, ProgressFile)
	return p.done.Add(Stage{Name: name, Metrics: Changed(p.metrics, run.Metrics),
		Rows: slices.Clone(ev.Rows[p.nRows:]), RetrRows: slices.Clone(ev.RetrRows[p.nRetr:]), TrainSeconds: run.TrainSec - p.trainSecBefore})
}
