package hybrid

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// KindName is the recipe kind.
const KindName = "hybrid"

// Files of a hybrid run directory (beside recipe.resolved.toml, log.jsonl, metrics.json and
// runs/<split>.<hybrid>.trec).
const (
	WeightsFile = "weights.json"
	ResultsFile = "results.md"
)

func init() {
	experiment.Register(KindName, runHybrid, configs.KindSpec{
		Sections: []string{"data"},
		Own:      []configs.Section{section},
	})
}

// system is one row of the table: a source system ("alias:system") or a hybrid.
type system struct {
	name   string
	runs   map[string]eval.Run // split -> ranking
	costs  Costs
	fusion string // how a hybrid fuses its parts; "" for a source
	scores map[string]map[string]float64
}

// state is what a run computes before it writes anything.
type state struct {
	rec      *configs.Recipe
	c        *Config
	dirs     map[string]string // alias -> source run directory
	files    map[string]string // source TREC file -> sha256
	sources  []*system
	hybrids  []*system
	weights  map[string]any // hybrid -> its method, systems and weights (weights.json)
	log      []any          // log.jsonl records
	metrics  map[string]float64
	nQueries map[string]int
	ds       *data.Dataset
}

// runHybrid reads the source runs, fuses them, and only then writes the run directory, whose
// metrics.json comes last: a run that fails leaves no directory (or, resumed, none with
// metrics.json).
func runHybrid(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	s := &state{rec: rec, c: Of(rec), weights: map[string]any{}, metrics: map[string]float64{}, files: map[string]string{}, nQueries: map[string]int{}}
	err := experiment.RunStages(func() error { return s.readSources(o.ResumeDir) }, func() error { return s.fuse(ctx) })
	if err != nil {
		return "", err
	}
	dir, err := experiment.PrepareRunDir(rec, o)
	if err != nil {
		return dir, err
	}
	if o.ResumeDir != "" {
		if err := os.Remove(filepath.Join(dir, experiment.MetricsFile)); err != nil && !os.IsNotExist(err) {
			return dir, err
		}
	}
	if err := s.write(dir, o); err != nil {
		if o.ResumeDir == "" {
			removeWritten(dir) // experiment.Run then removes the untrained directory
		}
		return dir, err
	}
	return dir, nil
}

// readSources reads and checks every source system's dev and test rankings, scores them and
// reads their costs.
func (s *state) readSources(resumeDir string) error {
	rec, c := s.rec, s.c
	ds, err := data.Load(rec.Data.Dir, rec.Data.DevSplit, rec.Data.TestSplit)
	if err != nil {
		return err
	}
	s.ds = ds
	if s.dirs, err = resolveSources(c.Sources, rec.OutputDir, resumeDir); err != nil {
		return err
	}
	s.log = append(s.log, map[string]any{"event": "sources", "dirs": s.dirs})
	reported := map[string]map[string]float64{} // alias -> its run's metrics.json (nil: none)
	for _, name := range c.Rows() {
		alias, sys, _ := SplitSystem(name)
		if _, ok := reported[alias]; !ok {
			m, err := experiment.ReadMetrics(s.dirs[alias])
			if err != nil && !os.IsNotExist(err) {
				return err
			}
			reported[alias] = m
		}
		row := &system{name: name, runs: map[string]eval.Run{}, scores: map[string]map[string]float64{},
			costs: sourceCosts(reported[alias], sys)}
		for _, split := range []string{rec.Data.DevSplit, rec.Data.TestSplit} {
			if err := s.readSplit(row, s.dirs[alias], sys, split, reported[alias]); err != nil {
				return err
			}
		}
		for k, v := range row.costs.metrics() {
			s.metrics[name+"/"+k] = v
		}
		s.sources = append(s.sources, row)
	}
	return nil
}

// readSplit reads one source system's ranking of split from its run directory dir (ReadRun),
// scores it, checks the score against what its run reported, and records it in row.
func (s *state) readSplit(row *system, dir, sys, split string, reported map[string]float64) error {
	c, test := s.c, s.rec.Data.TestSplit
	qrels := s.ds.Qrels[split]
	qids := qrels.QueryIDs()
	s.nQueries[split] = len(qids)
	path := TRECPath(dir, split, sys)
	run, err := ReadRun(path, qids, s.ds.Corpus, c.MaxHits)
	if err != nil {
		return err
	}
	sum, err := bounded.SHA256(path)
	if err != nil {
		return err
	}
	s.files[path] = sum
	scores, err := eval.Evaluate(run, qrels, c.Metrics)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := checkReported(path, reported, metricsKey(sys, split, test), scores); err != nil {
		return err
	}
	for m, v := range scores {
		s.metrics[metricsKey(row.name, split, test)+"/"+m] = v
	}
	row.runs[split], row.scores[split] = run, scores
	s.log = append(s.log, map[string]any{"event": "read", "system": row.name, "split": split, "file": path, "sha256": sum, "queries": len(run)})
	return nil
}

// metricsKey is EvaluateSystems' key of a system's metrics: "<system>" on the test split,
// "<system>.<split>" on another.
func metricsKey(system, split, test string) string {
	if split == test {
		return system
	}
	return system + "." + split
}

// fuse builds every hybrid on dev and test: RRF, or the convex combination whose weights score
// best on dev.
func (s *state) fuse(ctx context.Context) error {
	rec, c := s.rec, s.c
	bySource := map[string]*system{}
	for _, r := range s.sources {
		bySource[r.name] = r
	}
	dev, test := rec.Data.DevSplit, rec.Data.TestSplit
	for _, name := range c.Names() {
		f := c.Fuse[name]
		parts := make([]*system, len(f.Systems))
		costs := make([]Costs, len(f.Systems))
		for i, p := range f.Systems {
			parts[i], costs[i] = bySource[p], bySource[p].costs
		}
		runsOf := func(split string) []eval.Run {
			rs := make([]eval.Run, len(parts))
			for i, p := range parts {
				rs[i] = p.runs[split]
			}
			return rs
		}
		h := &system{name: name, runs: map[string]eval.Run{}, costs: sumCosts(costs)}
		switch f.Method {
		case MethodRRF:
			for _, split := range []string{dev, test} {
				h.runs[split] = RRF(f.RRFK, c.Depth, runsOf(split)...)
			}
			h.fusion = fmt.Sprintf("RRF k = %d of %s", f.RRFK, strings.Join(f.Systems, ", "))
			s.weights[name] = map[string]any{"method": f.Method, "systems": f.Systems, "rrf_k": f.RRFK}
		case MethodConvex:
			best, trials, err := ChooseWeights(ctx, f.Grid, c.Depth, c.SelectMetric, s.ds.Qrels[dev], runsOf(dev)...)
			if err != nil {
				return fmt.Errorf("hybrid %s: %w", name, err)
			}
			for _, t := range trials {
				s.log = append(s.log, map[string]any{"event": "weights", "hybrid": name, "weights": t.Weights, dev + "/" + c.SelectMetric: t.Score})
			}
			for _, split := range []string{dev, test} {
				h.runs[split] = Convex(best.Weights, c.Depth, runsOf(split)...)
			}
			terms := make([]string, len(f.Systems))
			for i, p := range f.Systems {
				terms[i] = strconv.FormatFloat(best.Weights[i], 'g', -1, 64) + " " + p
			}
			h.fusion = "convex " + strings.Join(terms, " + ") + " (min-max; weights from dev " + c.SelectMetric + ")"
			s.weights[name] = map[string]any{"method": f.Method, "systems": f.Systems, "weights": best.Weights,
				"select_metric": c.SelectMetric, "split": dev, "score": best.Score, "grid": f.Grid, "tried": len(trials)}
			s.log = append(s.log, map[string]any{"event": "chosen", "hybrid": name, "weights": best.Weights, dev + "/" + c.SelectMetric: best.Score})
		}
		s.hybrids = append(s.hybrids, h)
	}
	return nil
}
