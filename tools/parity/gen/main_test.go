package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/export"
)

// tinyRun trains a bow retriever for two steps on a three-passage collection.
func tinyRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"data/corpus.jsonl": `{"_id": "a", "title": "wings", "text": "wing flutter at high speed"}
{"_id": "b", "title": "heat", "text": "heat transfer in a boundary layer"}
{"_id": "c", "title": "misc", "text": "something else entirely"}
`,
		"data/queries.jsonl":   `{"_id": "1", "text": "wing flutter"}` + "\n" + `{"_id": "2", "text": "heat transfer"}` + "\n",
		"data/qrels/train.tsv": "query-id\tcorpus-id\tscore\n1\ta\t1\n2\tb\t1\n",
		"data/qrels/test.tsv":  "query-id\tcorpus-id\tscore\n1\ta\t2\n2\tb\t1\n",
		"data/qrels/dev.tsv":   "query-id\tcorpus-id\tscore\n",
	}
	b, err := os.ReadFile(filepath.Join("testdata", "tiny-retriever.toml"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := string(b)
	for strings.HasPrefix(recipe, "#") { // the comment lines the test recipe opens with
		_, recipe, _ = strings.Cut(recipe, "\n")
	}
	files["recipe.toml"] = recipe
	for name, text := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := configs.Load(filepath.Join(dir, "recipe.toml"))
	if err != nil {
		t.Fatal(err)
	}
	runDir, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return runDir
}

func TestGenBiEncoder(t *testing.T) {
	runDir := tinyRun(t)
	out := filepath.Join(t.TempDir(), "go")
	if err := run([]string{"-run", runDir, "-out", out, "-n", "2"}); err != nil {
		t.Fatal(err)
	}
	var in inputs
	b, _ := os.ReadFile(filepath.Join(out, "inputs.json"))
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	// 2 queries + 3 edge cases; 2 passages, the first of the corpus
	if len(in.Queries) != 5 || in.Queries[2] != "" || !slices.Equal(in.PassageIDs, []string{"a", "b"}) || in.MaxLength != 12 {
		t.Fatalf("inputs %+v", in)
	}
	ids, shape, err := export.ReadNPYInt64(filepath.Join(out, "query_ids.npy"))
	if err != nil || !slices.Equal(shape, []int{5, 12}) {
		t.Fatalf("query_ids %v %v", shape, err)
	}
	mask, _, _ := export.ReadNPYInt64(filepath.Join(out, "query_mask.npy"))
	real := func(row int) (n int64) {
		for _, m := range mask[row*12 : (row+1)*12] {
			n += m
		}
		return n
	}
	// rows are [CLS] (id 2) pieces [SEP] (id 3) padding; the empty text is [CLS] [SEP]; the long
	// one is cut to 12 tokens
	if real(0) < 4 || ids[0] != 2 || ids[real(0)-1] != 3 || ids[real(0)] != 0 || real(2) != 2 || ids[2*12] != 2 || ids[2*12+1] != 3 || real(3) != 12 {
		t.Errorf("masks %d %d %d, ids %v", real(0), real(2), real(3), ids[:24])
	}
	vecs, shape, err := export.ReadNPYFloat32(filepath.Join(out, "passage_go.npy"))
	if err != nil || !slices.Equal(shape, []int{2, 8}) || vecs[0] == 0 {
		t.Errorf("passage_go %v %v %v", shape, err, vecs)
	}
}
