package splade_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/experiment/splade"
	"github.com/ragtrain/ragtrain/index"
)

// tinyRecipe is a kind = "splade" recipe over the 200-passage Cranfield slice with a tiny random
// BERT (1 layer, H 16, a 600-word vocabulary trained on the slice): the machinery in seconds.
// extra is appended; replace holds (old, new) pairs replaced in the text first (keys of a table
// the text already opens).
func tinyRecipe(t *testing.T, extra string, replace ...string) *configs.Recipe {
	t.Helper()
	dir := testkit.NewSlice(t)
	text := fmt.Sprintf(`kind = "splade"
name = "tiny-splade"
seed = 7
output_dir = %q
[data]
dir = %q
[tokenizer]
train = true
vocab_size = 600
max_length = 24
query_max_length = 12
[model]
encoder = "transformer"
hidden = 16
layers = 1
heads = 2
ffn = 32
max_position = 32
[loss]
name = "splade"
similarity = "dot"
temperature = 1.0
[splade]
lambda_q = 0.01
lambda_d = 0.005
flops_warmup = 4
top_k_passage = 40
top_k_query = 20
decoder_bias_init = -0.2
encode_batch = 8
[sampler]
hard_negatives = 1
negative_window = [1, 20]
false_negatives = "mask"
[train]
steps = 8
batch_size = 4
lr = 1e-3
warmup_steps = 2
log_every = 2
checkpoint_every = 4
[eval]
splits = ["test"]
systems = ["bm25", "zeroshot", "finetuned"]
depth = 100
metrics = ["nDCG@10", "Recall@100"]
%s`, filepath.Join(dir, "runs"), filepath.Join(dir, "data"), extra)
	text = strings.NewReplacer(replace...).Replace(text)
	return testkit.WriteRecipe(t, dir, "recipe.toml", text)
}

// untimed drops the metrics that measure time.
func untimed(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if !strings.Contains(k, "seconds") && !strings.HasSuffix(k, "_ms") {
			out[k] = v
		}
	}
	return out
}

// TestSpladeResumesExactly runs the tiny recipe through, then interrupted at step 3 and
// resumed: the checkpoints are equal bit for bit, and so are the metrics, the TREC runs and the
// index; the index reopens (manifest verified) and ranks as the run did.
func TestSpladeResumesExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	rec := tinyRecipe(t, "")
	full, resumed, _ := testkit.Resume(t, rec, splade.PhaseName, 3)
	testkit.SameCheckpoint(t, "", full, resumed, 8)
	testkit.SameMetrics(t, "", full, resumed, untimed)
	for _, f := range []string{"runs/test.splade.trec", "runs/test.bm25.trec", "runs/test.splade_zeroshot.trec", splade.IndexDir + "/postings.bin"} {
		testkit.SameFile(t, filepath.Join(full, f), filepath.Join(resumed, f))
	}
	m, err := experiment.ReadMetrics(full)
	if err != nil {
		t.Fatal(err)
	}
	if m["splade/passage_terms"] <= 0 || m["splade/passage_terms"] > 40 || m["splade/query_terms"] <= 0 || m["splade/query_terms"] > 20 {
		t.Errorf("terms per passage %v (top 40), per query %v (top 20)", m["splade/passage_terms"], m["splade/query_terms"])
	}
	x, man, err := index.OpenSparse(filepath.Join(full, splade.IndexDir))
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() != 200 || man.Postings != x.Postings() || math.Abs(float64(x.Postings())/200-m["splade/passage_terms"]) > 1e-9 {
		t.Errorf("index of %d passages, %d postings; metrics say %v per passage", x.Len(), x.Postings(), m["splade/passage_terms"])
	}
	var files int64
	for _, n := range man.Sizes {
		files += n
	}
	if m["splade/index_bytes"] != float64(files) || files == 0 || m["train/seconds"] <= 0 {
		t.Errorf("index_bytes %v, the manifest's files %d bytes; train/seconds %v", m["splade/index_bytes"], files, m["train/seconds"])
	}
	run, err := eval.ReadTREC(filepath.Join(full, "runs", "test.splade.trec"))
	if err != nil || len(run) == 0 {
		t.Fatalf("test.splade.trec: %d queries, %v", len(run), err)
	}
	// the saved index serves the same ranking (train search): the run's encoder from the
	// manifest, the queries encoded and pruned as the evaluation did
	s, err := splade.OpenSearcher(filepath.Join(full, splade.IndexDir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ds, err := data.LoadJudged(rec.Data.Dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, q := range ds.Qrels["test"].QueryIDs()[:5] {
		text, _ := ds.Queries.Text(q)
		hits, err := s.Search(text, 100)
		if err != nil {
			t.Fatal(err)
		}
		want := run[q]
		if len(hits) != len(want) {
			t.Fatalf("query %s: searcher %d hits, the run %d", q, len(hits), len(want))
		}
		for i := range want {
			if hits[i].DocID != want[i].DocID || math.Abs(hits[i].Score-want[i].Score) > 1e-4*math.Max(1, math.Abs(want[i].Score)) {
				t.Fatalf("query %s hit %d: searcher %v, run %v", q, i, hits[i], want[i])
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no query checked")
	}
	// a query longer than query_max_length is cut, and counted (train search reports it)
	before := s.Truncated
	if _, err := s.Search("flow", 10); err != nil || s.Truncated != before {
		t.Errorf("a one-word query counted as cut (%d -> %d), err %v", before, s.Truncated, err)
	}
	if _, err := s.Search(strings.Repeat("flow ", 3*s.QueryMaxLength()), 10); err != nil || s.Truncated != before+1 {
		t.Errorf("a long query: %d -> %d counted as cut, err %v", before, s.Truncated, err)
	}
	// the run's latest checkpoint no longer the one that built the index (latest pointed at
	// step 4): refused, instead of encoding the queries with another encoder than the passages
	latest := filepath.Join(full, "latest")
	was, err := os.ReadFile(latest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(latest, []byte("checkpoint-train-4"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(full, "checkpoint-train-4")); err != nil {
		t.Fatal(err)
	}
	if s, err := splade.OpenSearcher(filepath.Join(full, splade.IndexDir)); err == nil || !strings.Contains(err.Error(), "step 4") {
		if err == nil {
			s.Close()
		}
		t.Errorf("an index of step 8 opened with the step-4 encoder: err = %v", err)
	}
	os.WriteFile(latest, was, 0o644)
}
