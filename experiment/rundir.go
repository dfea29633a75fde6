package experiment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
)

// Files of a run directory.
const (
	ResolvedRecipeFile = "recipe.resolved.toml"
	MetricsFile        = "metrics.json"
	LogFile            = "log.jsonl"
	RunsDir            = "runs"
)

// NewRunDir creates a fresh run directory <output_dir>/<name>-<YYYYMMDD-HHMMSS> (with a -2,
// -3, ... suffix when taken) and writes the resolved recipe into it.
func NewRunDir(rec *configs.Recipe) (string, error) {
	if err := os.MkdirAll(rec.OutputDir, 0o755); err != nil {
		return "", fmt.Errorf("output_dir: %w", err)
	}
	base := filepath.Join(rec.OutputDir, rec.Name+"-"+time.Now().Format("20060102-150405"))
	dir := base
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !os.IsExist(err) {
			return "", err
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.MkdirAll(filepath.Join(dir, RunsDir), 0o755); err != nil {
		return "", err
	}
	return dir, rec.WriteResolved(filepath.Join(dir, ResolvedRecipeFile))
}

// WriteMetrics writes metrics.json: one flat JSON object from "<system>/<metric>" to a number,
// keys sorted. NaN and infinities are refused (JSON cannot hold them).
func WriteMetrics(dir string, m map[string]float64) error {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("metrics.json: %s is %v", k, v)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range keys {
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(m[k])
		fmt.Fprintf(&b, "  %s: %s", kb, vb)
		if i < len(keys)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return atomicfile.WriteFile(filepath.Join(dir, MetricsFile), b.Bytes())
}

// ReadMetrics reads a metrics.json written by WriteMetrics.
func ReadMetrics(dir string) (map[string]float64, error) {
	b, err := os.ReadFile(filepath.Join(dir, MetricsFile))
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, MetricsFile), err)
	}
	return m, nil
}

// System is one ranked run to evaluate, e.g. "bm25", "dense" or "rrf".
type System struct {
	Name string
	Run  eval.Run
}

// EvaluateSystems scores every system on qrels, writes runs/<split>.<system>.trec for each,
// adds "<system>/<metric>" to metrics (with "<system>.<split>/<metric>" when split is not the
// recipe's test split) and returns the table rows in the order given.
func EvaluateSystems(dir, split string, primary bool, qrels map[string]map[string]int,
	systems []System, metricNames []string, metrics map[string]float64) ([]eval.Row, error) {
	var rows []eval.Row
	for _, s := range systems {
		if err := eval.WriteTREC(filepath.Join(dir, RunsDir, split+"."+s.Name+".trec"), s.Run, s.Name); err != nil {
			return nil, err
		}
		scores, err := eval.Evaluate(s.Run, qrels, metricNames)
		if err != nil {
			return nil, err
		}
		key := s.Name
		if !primary {
			key += "." + split
		}
		for m, v := range scores {
			metrics[key+"/"+m] = v
		}
		rows = append(rows, eval.Row{System: s.Name, Scores: scores})
	}
	return rows, nil
}
