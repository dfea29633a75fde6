package hybrid

import (
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/configs"
)

// section is the [hybrid] table of the recipe, which this kind owns (configs.Section).
var section = configs.NewSection("hybrid", defaultConfig, check)

// Of returns the [hybrid] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "hybrid") }

// Config is the [hybrid] section: which saved runs are read and how their systems are fused.
type Config struct {
	// Sources name the run directories read, by an alias of one to 40 letters, digits, '_' or
	// '-': alias = "DIR" (a run directory; a relative path is taken relative to output_dir, where
	// the runs of the other recipes are) or alias = "latest:NAME" (the newest finished run of
	// the recipe named NAME in output_dir: NAME-YYYYMMDD-HHMMSS[-N] holding metrics.json). At
	// least one. No default.
	Sources map[string]string `toml:"sources"`
	// Systems are the source systems the table shows, "alias:system", read from
	// DIR/runs/<split>.<system>.trec; every system a fusion names is shown too (after these, in
	// the order the fusions, by name, name them). Default [].
	Systems []string `toml:"systems"`
	// Fuse are the hybrids, by name: [hybrid.fuse.NAME] with systems and method. The name (letters,
	// digits, '_', '+', '-') is the system's name: runs/<split>.NAME.trec and NAME/<metric> in
	// metrics.json. At least one. No default.
	Fuse map[string]Fuse `toml:"fuse"`
	// Depth is the hits per query read from each source list (the first Depth by rank) and
	// written for each hybrid; >= 1 and >= every metric's cut-off. Default 1000.
	Depth int `toml:"depth"`
	// MaxHits bounds the hits per query a source file may hold, checked from the file's size
	// before it is read (at most 256 bytes a line: queries x max_hits x 256 bytes) and per query
	// after; >= depth. Default 10000.
	MaxHits int `toml:"max_hits"`
	// Metrics are computed for every system on both splits, with the retriever's names and
	// code (package eval). Default ["nDCG@10", "MRR@10", "Recall@100", "Recall@1000", "MAP", "P@10"].
	Metrics []string `toml:"metrics"`
	// SelectMetric chooses convex weights on data.dev_split; one of metrics. Default "nDCG@10".
	SelectMetric string `toml:"select_metric"`
	// Table are the test metrics of results.md, beside dev select_metric and the costs; each one
	// of metrics. Default ["nDCG@10", "Recall@100"].
	Table []string `toml:"table"`
}

// Fuse is one [hybrid.fuse.NAME] table.
type Fuse struct {
	// Systems are the fused source systems, "alias:system"; at least two, distinct.
	Systems []string `toml:"systems"`
	// Method is "rrf" (Reciprocal Rank Fusion over the lists' ranks, index.RRF) or "convex" (a
	// convex combination of per-query min-max normalised scores, weights chosen on dev).
	Method string `toml:"method"`
	// RRFK is k in 1 / (k + rank), method rrf only; >= 1. Default 60 (Cormack et al. 2009).
	RRFK int `toml:"rrf_k"`
	// Grid are the values each weight may take, method convex only: every vector of len(systems)
	// grid values summing to 1 (within 1e-9) is tried on dev; each in [0, 1], distinct.
	// Default [0, 0.1, 0.2, ..., 1].
	Grid []float64 `toml:"grid"`
}

// Methods of a fusion.
const (
	MethodRRF    = "rrf"
	MethodConvex = "convex"
)

var (
	methods  = []string{MethodRRF, MethodConvex}
	aliasRE  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9_+-]{1,100}$`)
	latestRE = regexp.MustCompile(`^latest:(.+)$`)
)

// DefaultRRFK is the k of Cormack et al. 2009.
const DefaultRRFK = 60

// DefaultGrid is the convex weight grid when a fusion names none: 0, 0.1, ..., 1.
func DefaultGrid() []float64 {
	g := make([]float64, 11)
	for i := range g {
		g[i] = float64(i) / 10
	}
	return g
}

func defaultConfig() Config {
	return Config{Sources: map[string]string{}, Systems: []string{}, Fuse: map[string]Fuse{}, Depth: 1000, MaxHits: 10000,
		Metrics:      []string{"nDCG@10", "MRR@10", "Recall@100", "Recall@1000", "MAP", "P@10"},
		SelectMetric: "nDCG@10", Table: []string{"nDCG@10", "Recall@100"}}
}

// SplitSystem splits "alias:system".
func SplitSystem(s string) (alias, system string, ok bool) {
	alias, system, ok = strings.Cut(s, ":")
	return alias, system, ok && aliasRE.MatchString(alias) && nameRE.MatchString(system)
}

// Names returns the hybrids' names, sorted: the order they are fused, written and tabled in.
func (c *Config) Names() []string { return slices.Sorted(maps.Keys(c.Fuse)) }

// Rows returns the source systems read and tabled: Systems, then those the fusions name.
func (c *Config) Rows() []string {
	rows := slices.Clone(c.Systems)
	for _, n := range c.Names() {
		for _, s := range c.Fuse[n].Systems {
			if !slices.Contains(rows, s) {
				rows = append(rows, s)
			}
		}
	}
	return rows
}

// check validates [hybrid] within the recipe r, and fills each fusion's defaults (rrf_k, grid).
func check(v *configs.Checker, r *configs.Recipe, c *Config) {
	if r.Data.DevSplit == "" {
		v.Fail("data.dev_split", "kind hybrid chooses its weights on the dev split: set data.dev_split")
	}
	if r.Data.DevSplit == r.Data.TestSplit {
		v.Fail(v.SetOf("data.dev_split", "data.test_split"), "data.dev_split and data.test_split are both %q: weights are chosen on dev and reported on test", r.Data.TestSplit)
	}
	if len(c.Sources) == 0 {
		v.Fail("hybrid.sources", `name at least one source run: [hybrid.sources] alias = "RUN_DIR" or "latest:RECIPE_NAME"`)
	}
	aliases := slices.Sorted(maps.Keys(c.Sources))
	for _, a := range aliases {
		key := "hybrid.sources." + a
		if !aliasRE.MatchString(a) {
			v.Fail(key, "alias %q: want 1 to 40 letters, digits, '_' or '-'", a)
		}
		if d := c.Sources[a]; d == "" {
			v.Fail(key, "empty: want a run directory or \"latest:RECIPE_NAME\"")
		} else if m := latestRE.FindStringSubmatch(d); m != nil && (m[1] == "." || m[1] == ".." || strings.ContainsAny(m[1], `/\`)) {
			v.Fail(key, "%q: a recipe name holds no path separator", d)
		}
	}
	checkSystem := func(key, s string) {
		a, _, ok := SplitSystem(s)
		switch {
		case !ok:
			v.Fail(key, `%q: want "alias:system" (alias as in [hybrid.sources], system as in runs/<split>.<system>.trec)`, s)
		case c.Sources[a] == "":
			v.Fail(key, "%q: no source %q in [hybrid.sources] (sources: %s)", s, a, strings.Join(aliases, ", "))
		}
	}
	v.Distinct("hybrid.systems", c.Systems)
	for _, s := range c.Systems {
		checkSystem("hybrid.systems", s)
	}
	if len(c.Fuse) == 0 {
		v.Fail("hybrid.fuse", `name at least one fusion: [hybrid.fuse.NAME] with systems = ["a:x", "b:y"] and method = "rrf" or "convex"`)
	}
	for _, n := range c.Names() {
		c.Fuse[n] = checkFuse(v, n, c.Fuse[n], checkSystem)
	}
	configs.AtLeast(v, "hybrid.depth", c.Depth, 1)
	if c.MaxHits < c.Depth {
		v.Fail(v.SetOf("hybrid.max_hits", "hybrid.depth"), "hybrid.max_hits = %d is below hybrid.depth = %d", c.MaxHits, c.Depth)
	}
	if len(c.Metrics) == 0 {
		v.Fail("hybrid.metrics", "name at least one metric, e.g. \"nDCG@10\"")
	}
	v.Distinct("hybrid.metrics", c.Metrics)
	for _, m := range c.Metrics {
		_, k, err := configs.ParseMetric(m)
		if err != nil {
			v.Fail("hybrid.metrics", "%v", err)
		} else if k > c.Depth {
			v.Fail(v.SetOf("hybrid.metrics", "hybrid.depth"), "metric %q needs %d hits but hybrid.depth = %d", m, k, c.Depth)
		}
	}
	if !slices.Contains(c.Metrics, c.SelectMetric) {
		v.Fail(v.SetOf("hybrid.select_metric", "hybrid.metrics"), "%q is not one of hybrid.metrics %v", c.SelectMetric, c.Metrics)
	}
	v.Distinct("hybrid.table", c.Table)
	for _, m := range c.Table {
		if !slices.Contains(c.Metrics, m) {
			v.Fail(v.SetOf("hybrid.table", "hybrid.metrics"), "%q is not one of hybrid.metrics %v", m, c.Metrics)
		}
	}
}

// checkFuse checks the fusion [hybrid.fuse.<n>] and returns it with its method's defaults set.
func checkFuse(v *configs.Checker, n string, f Fuse, checkSystem func(key, s string)) Fuse {
	key := "hybrid.fuse." + n
	if !nameRE.MatchString(n) {
		v.Fail(key, "name %q: want letters, digits, '_', '+' or '-' (it names runs/<split>.%s.trec)", n, n)
	}
	if len(f.Systems) < 2 {
		v.Fail(key+".systems", "fuse at least two systems, got %d", len(f.Systems))
	}
	v.Distinct(key+".systems", f.Systems)
	for _, s := range f.Systems {
		checkSystem(key+".systems", s)
	}
	v.OneOf(key+".method", f.Method, methods)
	switch f.Method {
	case MethodRRF:
		if f.RRFK == 0 && !v.IsSet(key+".rrf_k") {
			f.RRFK = DefaultRRFK
		}
		configs.AtLeast(v, key+".rrf_k", f.RRFK, 1)
		if len(f.Grid) > 0 {
			v.Fail(key+".grid", "a weight grid is for method = \"convex\"; RRF has no weights")
		}
	case MethodConvex:
		if f.RRFK != 0 {
			v.Fail(key+".rrf_k", "rrf_k is for method = \"rrf\"")
		}
		if f.Grid == nil && !v.IsSet(key+".grid") {
			f.Grid = DefaultGrid()
		}
		if len(f.Grid) == 0 {
			v.Fail(key+".grid", "empty: list the values a weight may take, e.g. [0.0, 0.5, 1.0]")
		}
		for _, w := range f.Grid {
			v.InRange(key+".grid", w, 0, 1, true)
		}
		for i, w := range f.Grid {
			if slices.Contains(f.Grid[:i], w) {
				v.Fail(key+".grid", "%v listed twice", w)
			}
		}
		if len(f.Systems) >= 2 && len(f.Grid) > 0 {
			if vecs, ok := weightVectors(f.Grid, len(f.Systems)); !ok {
				v.Fail(key+".grid", "more than %d weight vectors of %d systems from %d grid values: use a coarser grid", MaxWeightVectors, len(f.Systems), len(f.Grid))
			} else if len(vecs) == 0 {
				v.Fail(key+".grid", "no %d values of %v sum to 1", len(f.Systems), f.Grid)
			}
		}
	}
	return f
}

// WeightVectors returns every vector of n values of grid (repeats allowed) whose sum is 1
// within 1e-9, in lexicographic order of their positions in grid (the first weight varying
// slowest): the convex combinations tried, in the order that breaks ties between equal dev
// scores (the first wins).
func WeightVectors(grid []float64, n int) [][]float64 {
	out, _ := weightVectors(grid, n)
	return out
}

// MaxWeightVectors bounds the convex combinations one fusion tries (each one fuses every dev
// query); maxWeightVisits bounds the partial vectors the search visits to find them. Both are
// checked when the recipe is read, before any source is opened.
const (
	MaxWeightVectors = 20000
	maxWeightVisits  = 10_000_000
)

// weightVectors is WeightVectors with the bounds: ok is false (and the list incomplete) once more
// than MaxWeightVectors vectors are found or more than maxWeightVisits partial vectors visited.
func weightVectors(grid []float64, n int) (out [][]float64, ok bool) {
	w := make([]float64, n)
	visits := 0
	var rec func(i int, sum float64) bool
	rec = func(i int, sum float64) bool {
		if visits++; visits > maxWeightVisits {
			return false
		}
		if i == n {
			if math.Abs(sum-1) <= 1e-9 {
				if len(out) == MaxWeightVectors {
					return false
				}
				out = append(out, slices.Clone(w))
			}
			return true
		}
		for _, g := range grid {
			if sum+g > 1+1e-9 {
				continue
			}
			w[i] = g
			if !rec(i+1, sum+g) {
				return false
			}
		}
		return true
	}
	return out, rec(0, 0)
}
