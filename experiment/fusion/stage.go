package fusion

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/trainer"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// What the trained stages (fid.go, retro.go) share: a resumable training phase, the moved
// gardeners of the swap, the run of one stage alone and the exact-match table.

// resumablePhase runs ph (its Dir, Steps, Params set) from the checkpoint in ph.Dir when one is
// there (its parameters, optimizer, step and the counters), and records time/<phase>_seconds;
// counters are saved in every checkpoint of the phase.
func resumablePhase(ctx context.Context, run *ragkit.GardenRun, ph experiment.Phase, counters map[string]*int, what string) error {
	ph.State = func(_ int, ts *checkpoints.TrainerState) {
		ts.Counters = map[string]int{}
		for k, v := range counters {
			ts.Counters[k] = *v
		}
	}
	if experiment.HasCheckpoint(ph.Dir) {
		ck, err := checkpoints.Load(ph.Dir)
		if err != nil {
			return err
		}
		if err := experiment.SetParams(ph.Params, ck.Params); err != nil {
			return fmt.Errorf("%s: %w", ck.Dir, err)
		}
		ph.Start, ph.Optimizer, ph.SecondsBefore = ck.Trainer.Step, ck.Optimizer, ck.Trainer.TrainSeconds
		for k, v := range counters {
			*v = ck.Trainer.Counters[k]
		}
		fmt.Fprintf(run.Opts.Out, "resume: %s at step %d of %d\n", ck.Dir, ck.Trainer.Step, ph.Steps)
		if ck.Trainer.Step >= ph.Steps {
			run.Metrics["time/"+ph.Name+"_seconds"] = ck.Trainer.TrainSeconds
			return nil
		}
	}
	fmt.Fprintf(run.Opts.Out, "%s: %d parameters, %s\n", ph.Name, ragkit.CountParams(ph.Params), what)
	_, sec, err := run.RunPhase(ctx, ph)
	if err != nil {
		return err
	}
	run.Metrics["time/"+ph.Name+"_seconds"] = sec
	return nil
}

// nllGraph finishes a training graph g (parameters bound by b) whose log-probabilities lp [n]
// the loss averages over the targets its mask keeps (losses.TokenNLL): the mask, the loss and
// the graph's parameters with their machine.
func nllGraph(g *gorgonia.ExprGraph, b *model.Binder, lp *gorgonia.Node, n int, name string) (*tensor.Dense, *gorgonia.Node, trainer.GraphParams, error) {
	mask := tensor.New(tensor.WithShape(n), tensor.Of(tensor.Float32))
	mn := gorgonia.NewTensor(g, tensor.Float32, 1, gorgonia.WithShape(n), gorgonia.WithValue(mask), gorgonia.WithName(name+".targetmask"))
	loss, err := losses.TokenNLL(lp, mn)
	if err != nil {
		return nil, nil, trainer.GraphParams{}, err
	}
	if _, err := gorgonia.Grad(loss, b.Nodes()...); err != nil {
		return nil, nil, trainer.GraphParams{}, fmt.Errorf("%s gradient graph: %w", name, err)
	}
	return mask, loss, trainer.NewGraphParams(b, gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...))), nil
}

// movedQuestions returns the updated world (world.updated_fraction, seed) and its moved test
// questions.
func movedQuestions(run *ragkit.GardenRun, d *ragkit.Data) (*garden.World, []int, error) {
	upd, err := run.World.Updated(run.Rec.World.UpdatedFraction, uint64(run.Rec.Seed))
	if err != nil {
		return nil, nil, err
	}
	var moved []int
	for _, i := range d.TestQ {
		if upd.Questions[i].ID != run.World.Questions[i].ID {
			return nil, nil, fmt.Errorf("updated world: question %d is %s, was %s", i, upd.Questions[i].ID, run.World.Questions[i].ID)
		}
		if upd.Questions[i].Previous != "" {
			moved = append(moved, i)
		}
	}
	if len(moved) == 0 {
		return nil, nil, fmt.Errorf("no test gardener moved (world.updated_fraction = %g)", run.Rec.World.UpdatedFraction)
	}
	return upd, moved, nil
}

// movedEval is the evaluation of the moved test questions of the updated world upd.
func movedEval(run *ragkit.GardenRun, d *ragkit.Data, upd *garden.World, moved []int) *ragkit.Eval {
	old := run.World
	dd := *d
	dd.TestQ = moved
	run.World = upd
	defer func() { run.World = old }()
	return run.NewEval(&dd)
}

// addMoved records which moved gardeners name answered with the new town (correct, in the
// order of ev.Qs) as name/moved_new_town and per bucket.
func addMoved(m map[string]float64, ev *ragkit.Eval, name string, correct []bool) {
	ev.AddRow(name+"/moved", correct, nil, ev.All)
	m[name+"/moved_new_town"] = m[name+"/moved/EM"]
	delete(m, name+"/moved/EM")
	for _, b := range garden.Buckets {
		if v, ok := m[name+"/moved/EM."+b]; ok {
			m[name+"/moved_new_town."+b] = v
			delete(m, name+"/moved/EM."+b)
		}
	}
}

// runOnly is the run of a recipe with <stage>.only: that stage alone, resumable (progress.json
// records it done; its phases resume from their checkpoints).
func runOnly(ctx context.Context, rec *configs.Recipe, o experiment.Options, stage string, f func(context.Context, *ragkit.GardenRun, *ragkit.Data) error, report func(map[string]float64)) (string, error) {
	start := time.Now()
	run, d, dir, err := ragkit.NewGardenRun(rec, o, rec.RAG.Chunking, rec.RAG.HeldOutQuestions, false, "")
	if run != nil && run.Log != nil {
		defer run.Log.Close()
	}
	if err != nil {
		return dir, err
	}
	prog, err := readProgress(dir)
	if err != nil {
		return dir, err
	}
	if prog.done(stage) {
		report(prog.Metrics)
	} else {
		t0 := time.Now()
		if err := f(ctx, run, d); err != nil {
			return dir, fmt.Errorf("%s: %w", stage, err)
		}
		run.Metrics["time/"+stage+"_seconds"] = time.Since(t0).Seconds()
		if err := prog.finish(dir, stage, run.Metrics); err != nil {
			return dir, err
		}
	}
	run.Metrics = prog.Metrics
	run.Metrics["run/seconds"] = time.Since(start).Seconds()
	return dir, experiment.WriteMetrics(dir, run.Metrics)
}

// emTable prints EM per bucket, overall, moved gardeners answered with the new town and seconds
// per question of the systems names.
func emTable(o experiment.Options, title string, names []string, m map[string]float64) {
	var b strings.Builder
	fmt.Fprintf(&b, "%-17s", "system")
	for _, c := range append(slices.Clone(garden.Buckets), "all", "moved→new", "s/question") {
		fmt.Fprintf(&b, " %10s", c)
	}
	b.WriteString("\n")
	for _, name := range names {
		fmt.Fprintf(&b, "%-17s", name)
		for _, c := range append(slices.Clone(garden.Buckets), "") {
			key := name + "/EM"
			if c != "" {
				key += "." + c
			}
			fmt.Fprintf(&b, " %10.3f", m[key])
		}
		fmt.Fprintf(&b, " %10.3f %10.4f\n", m[name+"/moved_new_town"], m["cost/"+name+"/seconds_per_question"])
	}
	fmt.Fprintf(o.Out, "\n%s:\n%s", title, b.String())
}
