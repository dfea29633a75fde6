package hybrid

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// SourcesFile records, in a hybrid run directory, the directory each source alias resolved to
// and the SHA-256 of every TREC file read: a resumed run reads the same directories.
const SourcesFile = "sources.json"

// lineBytes is the most bytes a line of a source TREC file is allowed on average when its size
// is bounded before reading (Config.MaxHits).
const lineBytes = 256

// resolveSources returns each alias's run directory: a path (relative ones against outputDir),
// or "latest:NAME", the newest finished run NAME-YYYYMMDD-HHMMSS[-N] in outputDir (finished:
// it holds metrics.json). A resumed run (resumeDir holding sources.json) reads the directories
// it recorded instead.
func resolveSources(sources map[string]string, outputDir, resumeDir string) (map[string]string, error) {
	if resumeDir != "" {
		path := filepath.Join(resumeDir, SourcesFile)
		b, err := bounded.ReadFile(path, bounded.ConfigJSON)
		if err == nil {
			var rec struct {
				Dirs map[string]string `json:"dirs"`
			}
			if err := json.Unmarshal(b, &rec); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			for a := range sources {
				if rec.Dirs[a] == "" {
					return nil, fmt.Errorf("%s: no directory for source %q", path, a)
				}
			}
			return rec.Dirs, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	out := make(map[string]string, len(sources))
	for a, v := range sources {
		if m := latestRE.FindStringSubmatch(v); m != nil {
			d, err := latestRun(outputDir, m[1])
			if err != nil {
				return nil, fmt.Errorf("hybrid.sources.%s = %q: %w", a, v, err)
			}
			out[a] = d
			continue
		}
		if !filepath.IsAbs(v) {
			v = filepath.Join(outputDir, v)
		}
		if fi, err := os.Stat(v); err != nil {
			return nil, fmt.Errorf("hybrid.sources.%s: %w", a, err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("hybrid.sources.%s: %s is not a directory", a, v)
		}
		out[a] = filepath.Clean(v)
	}
	return out, nil
}

// latestRun returns the newest finished run directory of recipe name in dir: the greatest
// (timestamp, then -N suffix) NAME-YYYYMMDD-HHMMSS[-N] holding metrics.json.
func latestRun(dir, name string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `-(\d{8}-\d{6})(?:-(\d+))?$`)
	best, bestKey := "", ""
	for _, e := range entries {
		m := re.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() || !experiment.Finished(filepath.Join(dir, e.Name())) {
			continue
		}
		n := 1
		if m[2] != "" {
			if n, err = strconv.Atoi(m[2]); err != nil {
				continue
			}
		}
		key := fmt.Sprintf("%s-%012d", m[1], n)
		if key > bestKey {
			best, bestKey = e.Name(), key
		}
	}
	if best == "" {
		return "", fmt.Errorf("no finished run %s-YYYYMMDD-HHMMSS (holding %s) in %s", name, experiment.MetricsFile, dir)
	}
	return filepath.Join(dir, best), nil
}

// TRECPath is where a run directory keeps a system's ranking of a split.
func TRECPath(runDir, split, system string) string {
	return filepath.Join(runDir, experiment.RunsDir, split+"."+system+".trec")
}

// ReadRun reads the TREC file path (eval.ReadTREC: six fields a line, finite scores, no doc
// listed twice for a query) and checks it against the split: it holds exactly the queries
// qids (every one, no other), every doc id is one of the corpus', no query holds more than
// maxHits hits, and along each query's ranks the scores do not increase. Its size is checked
// before it is read: at most len(qids) x maxHits x 256 bytes. Every error names the file, and
// the line where there is one.
func ReadRun(path string, qids []string, corpus *data.Corpus, maxHits int) (eval.Run, error) {
	f, size, err := bounded.Open(path, bounded.NoLimit)
	if err != nil {
		return nil, err
	}
	f.Close()
	if limit := int64(len(qids)) * int64(maxHits) * lineBytes; size > limit {
		return nil, fmt.Errorf("%s: %d bytes, above the %d of %d queries x hybrid.max_hits %d x %d bytes a line", path, size, limit, len(qids), maxHits, lineBytes)
	}
	run, err := eval.ReadTREC(path)
	if err != nil {
		return nil, err
	}
	want := make(map[string]bool, len(qids))
	for _, q := range qids {
		want[q] = true
	}
	got := slices.Collect(maps.Keys(run))
	eval.SortQueryIDs(got) // the same first error whatever the map's order
	for _, q := range got {
		hits := run[q]
		if !want[q] {
			return nil, lineError(path, func(f []string) bool { return f[0] == q }, "query id %q (field 1) is not a query of this split's qrels", q)
		}
		if len(hits) > maxHits {
			return nil, fmt.Errorf("%s: query %q has %d hits, above hybrid.max_hits = %d", path, q, len(hits), maxHits)
		}
		for i, h := range hits {
			if _, ok := corpus.Index(h.DocID); !ok {
				return nil, lineError(path, func(f []string) bool { return f[0] == q && f[2] == h.DocID }, "doc id %q (field 3) is not in the corpus", h.DocID)
			}
			if i > 0 && h.Score > hits[i-1].Score {
				return nil, lineError(path, func(f []string) bool { return f[0] == q && f[2] == h.DocID },
					"query %q: score %v (field 5) of rank %d is above rank %d's %v: ranks and scores disagree", q, h.Score, i+1, i, hits[i-1].Score)
			}
		}
	}
	for _, q := range qids {
		if _, ok := run[q]; !ok {
			return nil, fmt.Errorf("%s: no line for query %q of the split (a source must rank every query of the split)", path, q)
		}
	}
	return run, nil
}

// lineError returns "path:line: msg" for the first line of path whose fields match, or
// "path: msg" when none does. Only called on an error: the file was read whole before.
func lineError(path string, match func(fields []string) bool, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	f, err := bounded.OpenRegular(path)
	if err != nil {
		return fmt.Errorf("%s: %s", path, msg)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if fs := strings.Fields(sc.Text()); len(fs) == 6 && match(fs) {
			return fmt.Errorf("%s:%d: %s", path, n, msg)
		}
	}
	return fmt.Errorf("%s: %s", path, msg)
}

// Costs of a source system read from its run's metrics.json (test split keys), where present.
type Costs struct {
	IndexBytes, QueryMS, TrainSeconds float64
	HasIndex, HasQuery, HasTrain      bool
}

// untrained are the systems of every kind that involve no training (training time 0): BM25 and
// the model.init_from model before training (splade_zeroshot: a splade run's file of it).
var untrained = []string{"bm25", "zeroshot", "splade_zeroshot"}

// sourceCosts reads a system's costs from its run's metrics: index bytes from
// "<system>/index_bytes" or "<system>/total_bytes" (the PLAID-style index), query latency from
// "<system>/query_ms", "<system>/query_milliseconds" or "<system>/query_search_ms", plus
// "<system>/query_encode_ms" where the run times the query's encoding apart (SPLADE; ColBERT,
// whose query_milliseconds is the search alone), training time from "train/seconds" (0 for bm25
// and zeroshot; a run's rrf fuses its trained model, and so has the run's).
func sourceCosts(m map[string]float64, system string) Costs {
	var c Costs
	for _, k := range []string{"/index_bytes", "/total_bytes"} {
		if v, ok := m[system+k]; ok && !c.HasIndex {
			c.IndexBytes, c.HasIndex = v, true
		}
	}
	for _, k := range []string{"/query_ms", "/query_milliseconds", "/query_search_ms"} {
		if v, ok := m[system+k]; ok && !c.HasQuery {
			c.QueryMS, c.HasQuery = v, true
		}
	}
	if v, ok := m[system+"/query_encode_ms"]; ok && c.HasQuery {
		c.QueryMS += v
	}
	if slices.Contains(untrained, system) {
		c.HasTrain = true
	} else if v, ok := m["train/seconds"]; ok {
		c.TrainSeconds, c.HasTrain = v, true
	}
	return c
}

// metrics returns the known costs by their metrics.json names (index_bytes, query_ms,
// train_seconds).
func (c Costs) metrics() map[string]float64 {
	m := map[string]float64{}
	if c.HasIndex {
		m["index_bytes"] = c.IndexBytes
	}
	if c.HasQuery {
		m["query_ms"] = c.QueryMS
	}
	if c.HasTrain {
		m["train_seconds"] = c.TrainSeconds
	}
	return m
}

// sumCosts adds the costs of a hybrid's parts: each column is known when every part's is.
func sumCosts(parts []Costs) Costs {
	s := Costs{HasIndex: true, HasQuery: true, HasTrain: true}
	for _, p := range parts {
		s.IndexBytes, s.HasIndex = s.IndexBytes+p.IndexBytes, s.HasIndex && p.HasIndex
		s.QueryMS, s.HasQuery = s.QueryMS+p.QueryMS, s.HasQuery && p.HasQuery
		s.TrainSeconds, s.HasTrain = s.TrainSeconds+p.TrainSeconds, s.HasTrain && p.HasTrain
	}
	return s
}

// checkReported compares the metrics recomputed from a source's TREC file with those its run
// reported (metricsKey -> value), where it reported them: a difference means the run was
// evaluated on other judgements than data.dir's.
func checkReported(path string, reported map[string]float64, key string, got map[string]float64) error {
	for _, n := range slices.Sorted(maps.Keys(got)) {
		if v, ok := reported[key+"/"+n]; ok && math.Abs(v-got[n]) > 1e-9 {
			return fmt.Errorf("%s: scores %s = %.6f against data.dir's qrels, but its run's %s reports %s = %.6f: the run was evaluated on other judgements",
				path, n, got[n], experiment.MetricsFile, key+"/"+n, v)
		}
	}
	return nil
}
