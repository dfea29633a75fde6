package hybrid

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
)

// write writes the run directory: sources.json, log.jsonl, runs/<split>.<hybrid>.trec of both
// splits, weights.json, results.md and, last, metrics.json.
func (s *state) write(dir string, o experiment.Options) error {
	rec, c := s.rec, s.c
	if err := atomicfile.WriteJSON(filepath.Join(dir, SourcesFile), map[string]any{"dirs": s.dirs, "files": s.files}); err != nil {
		return err
	}
	log, err := experiment.OpenRunLog(dir, o.ResumeDir != "")
	if err != nil {
		return err
	}
	for _, r := range s.log {
		if err := log.Write(r); err != nil {
			log.Close()
			return err
		}
	}
	if err := log.Close(); err != nil {
		return err
	}
	for _, split := range []string{rec.Data.DevSplit, rec.Data.TestSplit} {
		systems := make([]experiment.System, len(s.hybrids))
		for i, h := range s.hybrids {
			systems[i] = experiment.System{Name: h.name, Run: h.runs[split]}
		}
		rows, err := experiment.EvaluateSystems(dir, split, split == rec.Data.TestSplit, s.ds.Qrels[split], systems, c.Metrics, s.metrics)
		if err != nil {
			return err
		}
		var table []eval.Row
		for _, r := range s.sources {
			table = append(table, eval.Row{System: r.name, Scores: r.scores[split]})
		}
		for i, r := range rows {
			s.hybrids[i].scores = setScores(s.hybrids[i].scores, split, r.Scores)
		}
		fmt.Fprintf(o.Out, "\n%s split, %d queries (%s):\n%s", split, s.nQueries[split], filepath.Base(rec.Data.Dir), eval.FormatTable(c.Metrics, append(table, rows...)))
	}
	for _, h := range s.hybrids {
		fmt.Fprintf(o.Out, "%s: %s\n", h.name, h.fusion)
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, WeightsFile), s.weights); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ResultsFile), []byte(s.results())); err != nil {
		return err
	}
	return experiment.WriteMetrics(dir, s.metrics)
}

func setScores(m map[string]map[string]float64, split string, v map[string]float64) map[string]map[string]float64 {
	if m == nil {
		m = map[string]map[string]float64{}
	}
	m[split] = v
	return m
}

// results is results.md: every source system and hybrid with dev select_metric, the test
// metrics of hybrid.table, and the costs.
func (s *state) results() string {
	rec, c := s.rec, s.c
	dev, test := rec.Data.DevSplit, rec.Data.TestSplit
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: hybrids of saved runs\n\n", rec.Name)
	fmt.Fprintf(&b, "Data %s: %s split (%d queries) chooses the convex weights on %s, %s split (%d queries) reports. Sources:\n\n",
		rec.Data.Dir, dev, s.nQueries[dev], c.SelectMetric, test, s.nQueries[test])
	for _, a := range slices.Sorted(maps.Keys(s.dirs)) {
		fmt.Fprintf(&b, "- %s: %s\n", a, s.dirs[a])
	}
	b.WriteString("\nCosts are read from each source run's metrics.json (test split) where it reports them, a hybrid's as the sum of its parts' (\"-\": not reported). Convex: per-query min-max normalised scores (Bruch et al. 2023); RRF: Cormack et al. 2009.\n\n")
	header := []string{"system", dev + " " + c.SelectMetric}
	for _, m := range c.Table {
		header = append(header, test+" "+m)
	}
	header = append(header, "index bytes", "query ms", "train s", "fusion")
	fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for _, r := range append(append([]*system{}, s.sources...), s.hybrids...) {
		cells := []string{r.name, fmt.Sprintf("%.4f", r.scores[dev][c.SelectMetric])}
		for _, m := range c.Table {
			cells = append(cells, fmt.Sprintf("%.4f", r.scores[test][m]))
		}
		cells = append(cells, cost(r.costs.IndexBytes, r.costs.HasIndex, "%.0f"), cost(r.costs.QueryMS, r.costs.HasQuery, "%.2f"),
			cost(r.costs.TrainSeconds, r.costs.HasTrain, "%.4g"), r.fusion)
		if r.fusion == "" {
			cells[len(cells)-1] = "-"
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	return b.String()
}

func cost(v float64, ok bool, format string) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// removeWritten removes what write wrote into a fresh run directory, so that experiment.Run
// removes the directory as untrained: a failed run leaves nothing that looks complete.
func removeWritten(dir string) {
	for _, f := range []string{SourcesFile, WeightsFile, ResultsFile, experiment.MetricsFile, experiment.LogFile} {
		os.Remove(filepath.Join(dir, f))
	}
	entries, _ := os.ReadDir(filepath.Join(dir, experiment.RunsDir))
	for _, e := range entries {
		os.Remove(filepath.Join(dir, experiment.RunsDir, e.Name()))
	}
}
