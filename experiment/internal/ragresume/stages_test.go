package ragresume

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/eval"
)

// TestStagesRoundTrip: a missing stage file is no stage finished; each Add rewrites the file
// whole, and ReadStages gives back every stage as it was added (a rag stage's train seconds, a
// study system's extra rows); a file that is not a JSON list of stages is refused naming it.
func TestStagesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := ReadStages(dir, "rag.json")
	if err != nil || len(s.List) != 0 {
		t.Fatalf("missing file: %+v, %v", s, err)
	}
	rag := Stage{Name: "start", Metrics: map[string]float64{"a": 1.5}, Rows: []eval.Row{{System: "x", Scores: map[string]float64{"EM": 0.25}}}, RetrRows: []eval.Row{}, TrainSeconds: 3}
	sys := Stage{Name: "dense", Metrics: map[string]float64{"b": 2}, Rows: []eval.Row{}, RetrRows: []eval.Row{}, TrainRows: []eval.Row{{System: "dense", Scores: map[string]float64{"train s": 4}}}}
	for _, x := range []Stage{rag, sys} {
		if err := s.Add(x); err != nil {
			t.Fatal(err)
		}
	}
	back, err := ReadStages(dir, "rag.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.List, []Stage{rag, sys}) {
		t.Errorf("read back %+v, want %+v", back.List, []Stage{rag, sys})
	}
	if d, ok := back.Done("dense"); !ok || d.TrainRows[0].Scores["train s"] != 4 {
		t.Errorf("Done(dense) = %+v, %t", d, ok)
	}
	if _, ok := back.Done("zeroshot"); ok {
		t.Error("Done(zeroshot) found a stage never added")
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"name": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStages(dir, "bad.json"); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "bad.json")) {
		t.Errorf("bad file: err = %v", err)
	}
}

// TestChanged: the metrics a stage set are the new keys and the changed values, not the
// unchanged ones.
func TestChanged(t *testing.T) {
	before := map[string]float64{"a": 1, "b": 2, "c": 3}
	after := map[string]float64{"a": 1, "b": 2.5, "c": 3, "d": 0}
	if got, want := Changed(before, after), map[string]float64{"b": 2.5, "d": 0}; !maps.Equal(got, want) {
		t.Errorf("Changed = %v, want %v", got, want)
	}
}
