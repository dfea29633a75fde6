package ragresume

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// Stage is one finished stage of a run (a rag run's stage, a study's system), as its stage
// file keeps it: the metrics it set or changed, the table rows it added and, for a rag run, its
// training seconds.
type Stage struct {
	Name     string             `json:"name"`
	Metrics  map[string]float64 `json:"metrics"`
	Rows     []eval.Row         `json:"reader_rows"`
	RetrRows []eval.Row         `json:"retrieval_rows"`
	// a study's training-time and dev retrieval rows (experiment/internal/study)
	TrainRows []eval.Row `json:"train_rows,omitempty"`
	DevRows   []eval.Row `json:"dev_retrieval_rows,omitempty"`
	// a rag run's training seconds (a study keeps them in its metrics)
	TrainSeconds float64 `json:"train_seconds,omitempty"`
}

// Stages is the list of a run's finished stages, kept in the JSON file Path (rewritten whole,
// atomically, as each stage finishes).
type Stages struct {
	Path string
	List []Stage
}

// ReadStages reads the stage file dir/name (none: no stage finished).
func ReadStages(dir, name string) (*Stages, error) {
	s := &Stages{Path: filepath.Join(dir, name)}
	b, err := bounded.ReadFile(s.Path, bounded.RunState)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &s.List); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Path, err)
	}
	return s, nil
}

// Done returns the finished stage of that name.
func (s *Stages) Done(name string) (Stage, bool) {
	i := slices.IndexFunc(s.List, func(x Stage) bool { return x.Name == name })
	if i < 0 {
		return Stage{}, false
	}
	return s.List[i], true
}

// Add records a finished stage and rewrites the file.
func (s *Stages) Add(x Stage) error {
	s.List = append(s.List, x)
	b, err := json.MarshalIndent(s.List, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(s.Path, b)
}

// Changed returns the entries of after that before lacks or holds with another value: the
// metrics a stage set.
func Changed(before, after map[string]float64) map[string]float64 {
	m := map[string]float64{}
	for k, v := range after {
		if old, ok := before[k]; !ok || old != v {
			m[k] = v
		}
	}
	return m
}
