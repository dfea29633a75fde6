package eval

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/index"
)

func TestWriteReadTREC(t *testing.T) {
	run := Run{
		"10":  {{DocID: "d3", Score: 2.5}, {DocID: "d1", Score: 1.0 / 3}},
		"2":   {{DocID: "d9", Score: -1e-20}},
		"abc": {{DocID: "x", Score: 0}},
		"1":   nil,
	}
	path := filepath.Join(t.TempDir(), "run.trec")
	if err := WriteTREC(path, run, "bm25"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "2 Q0 d9 1 -1e-20 bm25\n" +
		"10 Q0 d3 1 2.5 bm25\n" +
		"10 Q0 d1 2 0.3333333333333333 bm25\n" +
		"abc Q0 x 1 0 bm25\n"
	if string(data) != want {
		t.Errorf("file:\n%s\nwant:\n%s", data, want)
	}
	back, err := ReadTREC(path)
	if err != nil {
		t.Fatal(err)
	}
	delete(run, "1") // a query without hits has no line
	if !reflect.DeepEqual(back, run) {
		t.Errorf("read back %v, want %v", back, run)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestWriteTRECErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		run  Run
		tag  string
		want string
	}{
		{"empty tag", Run{}, "", "empty tag"},
		{"space in tag", Run{}, "my run", "white space"},
		{"space in query", Run{"q 1": nil}, "t", "query id"},
		{"empty doc", Run{"q": {{DocID: "", Score: 1}}}, "t", "empty doc id"},
		{"tab in doc", Run{"q": {{DocID: "a\tb", Score: 1}}}, "t", "doc id"},
		{"NaN", Run{"q": {{DocID: "a", Score: math.NaN()}}}, "t", "NaN"},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, "out.trec")
		err := WriteTREC(path, tt.run, tt.tag)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
		if _, statErr := os.Stat(path); statErr == nil {
			t.Errorf("%s: file written despite the error", tt.name)
		}
	}
}

func TestReadTRECErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, body, want string
	}{
		{"fields", "1 Q0 d1 1 2.0 tag\n1 Q0 d2 2 1.0\n", ":2: run: want 6 fields"},
		{"rank", "1 Q0 d1 first 2.0 tag\n", ":1: run: rank \"first\""},
		{"rank zero", "\n1 Q0 d1 0 2.0 tag\n", ":2: run: rank \"0\""},
		{"score", "1 Q0 d1 1 high tag\n", ":1: run: score \"high\""},
		{"score nan", "1 Q0 d1 1 NaN tag\n", ":1: run: score \"NaN\""},
		{"duplicate", "1 Q0 d1 1 2 t\n1 Q0 d2 2 1 t\n1 Q0 d1 3 0.5 t\n", ":3: run: query \"1\" lists doc \"d1\" again (first on line 1)"},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, tt.name+".trec")
		if err := os.WriteFile(path, []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadTREC(path)
		if err == nil || !strings.Contains(err.Error(), path+tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, path+tt.want)
		}
	}
	if _, err := ReadTREC(filepath.Join(dir, "missing.trec")); err == nil {
		t.Errorf("missing file: no error")
	}
}

func TestReadTRECRankOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.trec")
	body := "q Q0 b 2 5 t\nq 0 a 1 5 t\nq Q0 c 3 7 t\n" // ranks, not file order or scores, order hits
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := ReadTREC(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []index.Hit{{DocID: "a", Score: 5}, {DocID: "b", Score: 5}, {DocID: "c", Score: 7}}
	if !reflect.DeepEqual(run["q"], want) {
		t.Errorf("hits %v, want %v", run["q"], want)
	}
}

func TestSortQueryIDs(t *testing.T) {
	ids := []string{"b", "10", "2", "a", "1", "01x"}
	SortQueryIDs(ids)
	want := []string{"1", "2", "10", "01x", "a", "b"}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("SortQueryIDs = %v, want %v", ids, want)
	}
}

func TestFormatTable(t *testing.T) {
	got := FormatTable([]string{"nDCG@10", "MAP"}, []Row{
		{System: "bm25", Scores: map[string]float64{"nDCG@10": 0.35104, "MAP": 0.28}},
		{System: "dense bow", Scores: map[string]float64{"nDCG@10": 0.1844}},
	})
	want := "" +
		"system     nDCG@10     MAP\n" +
		"bm25        0.3510  0.2800\n" +
		"dense bow   0.1844       -\n"
	if got != want {
		t.Errorf("FormatTable:\n%s\nwant:\n%s", got, want)
	}
}
