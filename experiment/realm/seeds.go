package realm

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment/internal/study"
	"gonum.org/v1/gonum/stat"
)

// realm.seeds: each REALM system trained once per seed from the same saved start.
//
// One seed's run of system "async" is the system "async_seed<S>" (phase "realm_async_seed<S>"):
// it trains like "async" with S in place of the top-level seed, which in a REALM phase draws
// the question order (ragreader.Cycle of StreamJoint; joint training builds its graphs without
// dropout, and the refresh steps are fixed by [index_refresh]). That is what editing the
// top-level seed and resuming from the saved start did, so the first seed, which is the
// top-level seed, gives the numbers of a run without realm.seeds.
//
// metrics.json: each seed's metrics under its phase ("dense+realm_async_seed7/Recall@1",
// "realm_async_seed7_top1/EM", "dev/dense+realm_async_seed7/Recall@1",
// "realm_async_seed7/train_seconds", ...); under the key a run without realm.seeds writes
// ("dense+realm_async/Recall@1", ...) their mean over the seeds, so that readers of that key get
// the number the seeds estimate (one seed: the value itself), and "<that key>.sd" their sample
// standard deviation (n - 1; 0 for one seed). "supervised" (the ceiling) trains once, at the
// top-level seed. runs/test.dense+realm_async_seed<S>.trec holds each seed's test ranking and
// runs/test.dense+realm_async.trec the first seed's.

// seededSystems lists the systems RunStudy trains: supervised once, every other system once per
// seed ("async_seed42", "async_seed7", ...), or systems itself when seeds is empty.
func seededSystems(systems []string, seeds []int64) []string {
	if len(seeds) == 0 {
		return systems
	}
	var out []string
	for _, name := range systems {
		if name == "supervised" {
			out = append(out, name)
			continue
		}
		for _, seed := range seeds {
			out = append(out, seedName(name, seed))
		}
	}
	return out
}

// seedName is the system name of one seed's run of system.
func seedName(system string, seed int64) string {
	return system + study.SeedSuffix + strconv.FormatInt(seed, 10)
}

// splitSeed splits "async_seed7" into "async" and 7; a name without a seed is returned as is.
func splitSeed(name string) (string, uint64, bool, error) {
	base, s, ok := strings.Cut(name, study.SeedSuffix)
	if !ok {
		return name, 0, false, nil
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return "", 0, false, fmt.Errorf("realm: system %q: bad seed: %w", name, err)
	}
	return base, seed, true, nil
}

// seedColumns are the seed table's columns and the metric key of each for a phase.
var seedColumns = []struct {
	name string
	key  func(phase string) string
}{
	{"Recall@1", func(p string) string { return "dense+" + p + "/Recall@1" }},
	{"Recall@5", func(p string) string { return "dense+" + p + "/Recall@5" }},
	{"EM top-1", func(p string) string { return p + "_top1/EM" }},
	{"dev Recall@1", func(p string) string { return "dev/dense+" + p + "/Recall@1" }},
	{"train s", func(p string) string { return p + "/train_seconds" }},
}

// reportSeeds writes the mean and standard deviation over seeds of every metric of each
// seeded system and prints the table of them (mean ± sd per system, a line per seed) and the
// comparison of async (both towers) with frozen (the passage tower frozen) on test Recall@1.
func reportSeeds(s *study.Study, systems []string, seeds []int64) {
	out := s.Opts.Out
	var seedList []string
	for _, seed := range seeds {
		seedList = append(seedList, strconv.FormatInt(seed, 10))
	}
	cells := [][]string{{"system"}}
	for _, c := range seedColumns {
		cells[0] = append(cells[0], c.name)
	}
	var missing []string
	for _, name := range systems {
		if name == "supervised" {
			continue
		}
		phase := study.SystemPhase(name)
		per := make([]map[string]float64, len(seeds))
		for i, seed := range seeds {
			per[i] = s.SystemMetrics(seedName(name, seed))
		}
		// Every key of the first seed's run, with its phase as a hole the others' fill.
		first := study.SystemPhase(seedName(name, seeds[0]))
		var holes []string
		for k := range per[0] {
			if !strings.Contains(k, first) {
				continue // not this system's own metric
			}
			holes = append(holes, strings.Replace(k, first, "\x00", 1))
		}
		slices.Sort(holes)
	keys:
		for _, h := range holes {
			vals := make([]float64, len(seeds))
			for i, seed := range seeds {
				v, ok := per[i][strings.Replace(h, "\x00", study.SystemPhase(seedName(name, seed)), 1)]
				if !ok {
					missing = append(missing, strings.Replace(h, "\x00", phase, 1))
					continue keys
				}
				vals[i] = v
			}
			mean, sd := meanSD(vals)
			key := strings.Replace(h, "\x00", phase, 1)
			s.Metrics[key], s.Metrics[key+".sd"] = mean, sd
		}
		line := []string{name}
		for _, c := range seedColumns {
			cell := "-"
			if v, ok := s.Metrics[c.key(phase)]; ok {
				cell = fmt.Sprintf("%.4f ± %.4f", v, s.Metrics[c.key(phase)+".sd"])
			}
			line = append(line, cell)
		}
		cells = append(cells, line)
		for i, seed := range seeds {
			line := []string{"  seed " + seedList[i]}
			for _, c := range seedColumns {
				cell := "-"
				if v, ok := per[i][c.key(study.SystemPhase(seedName(name, seed)))]; ok {
					cell = fmt.Sprintf("%.4f", v)
				}
				line = append(line, cell)
			}
			cells = append(cells, line)
		}
	}
	fmt.Fprintf(out, "\nREALM systems over %d seeds (%s), each from the same start (test questions but dev Recall@1; mean ± sample standard deviation over the seeds, then each seed):\n%s",
		len(seeds), strings.Join(seedList, ", "), eval.FormatCells(cells))
	if len(missing) > 0 {
		fmt.Fprintf(out, "no mean for %d metrics not written at every seed: %s\n", len(missing), strings.Join(missing, ", "))
	}
	if slices.Contains(systems, "async") && slices.Contains(systems, "frozen") {
		compareFrozen(s, seeds, seedList)
	}
}

// clauseTolerance is how far below the frozen passage tower REALM with both towers may be and
// still count as "at least as good" (issue 18).
const clauseTolerance = 0.01

// compareFrozen prints the difference of async and frozen test Recall@1, mean and per seed,
// and whether async is above the start, and writes the mean difference as
// "realm/async_minus_frozen/Recall@1".
func compareFrozen(s *study.Study, seeds []int64, seedList []string) {
	key := func(name string) string { return "dense+" + study.SystemPhase(name) + "/Recall@1" }
	m := s.Metrics
	var per []string
	above := 0
	for i, seed := range seeds {
		a := m[key(seedName("async", seed))]
		per = append(per, fmt.Sprintf("%+.4f (%s)", a-m[key(seedName("frozen", seed))], seedList[i]))
		if a > m["dense/Recall@1"] {
			above++
		}
	}
	diff := m[key("async")] - m[key("frozen")]
	m["realm/async_minus_frozen/Recall@1"] = diff
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	fmt.Fprintf(s.Opts.Out, "async both towers vs frozen passage tower, test Recall@1: mean difference %+.4f (%.4f vs %.4f), per seed %s; within %.2f: %s; above start (%.4f): %s (%d of %d seeds)\n",
		diff, m[key("async")], m[key("frozen")], strings.Join(per, " / "), clauseTolerance, yes(diff >= -clauseTolerance),
		m["dense/Recall@1"], yes(m[key("async")] > m["dense/Recall@1"]), above, len(seeds))
}

// meanSD returns the mean of x and its sample standard deviation (n - 1), 0 for one value.
func meanSD(x []float64) (float64, float64) {
	if len(x) == 1 {
		return x[0], 0
	}
	mean, sd := stat.MeanStdDev(x, nil)
	if math.IsNaN(sd) {
		sd = 0
	}
	return mean, sd
}
