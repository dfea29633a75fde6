package serve_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	_ "github.com/ragtrain/ragtrain/experiment/kinds"
	"github.com/ragtrain/ragtrain/experiment/retriever"
	"github.com/ragtrain/ragtrain/experiment/serve"
)

// train search of a retriever run's embedding shards writes the run's own test.dense.trec
// byte for byte, searched shard by shard and (index.ann_threshold) through the HNSW graph the
// run built: a streamed run's shards, and those a loaded run writes of the vectors it searched
// in memory (also when checkpoint selection's index of the chosen model served the final
// evaluation); BM25 over the run's corpus its test.bm25.trec.
func TestDenseShardsReproduceTheRunsTREC(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	for _, c := range []struct{ name, index, how string }{
		{"exact", "[index]\nstream_above = 10\n", "exact, shard by shard"},
		{"hnsw", "[index]\nstream_above = 10\nann_threshold = 10\n", "HNSW"},
		{"loaded", "", "exact, shard by shard"},
		{"loaded_hnsw", "[index]\nann_threshold = 10\n", "HNSW"},
		{"loaded_selected", "select_metric = \"nDCG@10\"\n", "exact, shard by shard"}, // appended to [eval]
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := testkit.NewSlice(t)
			rec := testkit.SmallRecipe(t, dir, c.index)
			run, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			if m, err := experiment.ReadMetrics(run); err != nil || (strings.Contains(c.index, "select_metric") != (m["select/step"] > 0)) {
				t.Fatalf("select/step = %v (err %v): selection must run in the loaded_selected case only", m["select/step"], err)
			}
			queries := filepath.Join(t.TempDir(), "queries.jsonl")
			testkit.SplitQueries(t, rec.Data.Dir, rec.Data.TestSplit, queries)
			var log strings.Builder
			shards := filepath.Join(run, retriever.StreamDir, retriever.ShardsDir)
			for _, s := range []struct{ index, system string }{{shards, "dense"}, {run, "bm25"}} {
				out := filepath.Join(t.TempDir(), s.system+".trec")
				if err := serve.Search(s.index, queries, out, rec.Eval.Depth, &log); err != nil {
					t.Fatalf("%s: %v", s.system, err)
				}
				testkit.SameFile(t, filepath.Join(run, experiment.RunsDir, rec.Data.TestSplit+"."+s.system+".trec"), out)
			}
			if !strings.Contains(log.String(), "search: dense: "+c.how) {
				t.Errorf("search log:\n%s", log.String())
			}
			// shards of another model: refused
			mpath := filepath.Join(shards, "manifest.json")
			b, err := os.ReadFile(mpath)
			if err != nil {
				t.Fatal(err)
			}
			i := strings.Index(string(b), `"model_hash": "`) + len(`"model_hash": "`)
			b[i] ^= 1
			if err := os.WriteFile(mpath, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := serve.Search(shards, queries, filepath.Join(t.TempDir(), "x.trec"), 10, io.Discard); err == nil || !strings.Contains(err.Error(), "model_hash") {
				t.Errorf("shards of another model: err = %v", err)
			}
		})
	}
}
