package experiment

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/trainer"
)

// smallStudyRecipe is a kind = "replug" or "realm" recipe over a small garden world (the reader
// and retriever of smallRAGRecipe, shorter), small enough for a test run of a few seconds.
func smallStudyRecipe(t *testing.T, kind, extra string) *configs.Recipe {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, kind+"-small.toml")
	text := `kind = "` + kind + `"
seed = 3
output_dir = "runs"
[world]
gardeners = 160
biographies = 1600
news = 1600
datastore_news = 100
[tokenizer]
train = true
vocab_size = 800
min_frequency = 1
max_length = 24
[reader]
hidden = 64
layers = 2
heads = 2
ffn = 128
dropout = 0.0
max_length = 48
pretrain_passes = 0
finetune_steps = 400
finetune_batch_size = 32
finetune_lr = 3e-3
replay = 0
closed_book_fraction = 0.0
counterfactual_fraction = 1.0
max_answer_tokens = 3
[model]
encoder = "bow"
hidden = 64
shared_towers = false
[pretrain]
steps = 60
batch_size = 32
crop_min = 3
crop_max = 8
[train]
steps = 60
batch_size = 16
lr = 1e-3
warmup_steps = 5
log_every = 10
` + extra
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestReplugRecallRises trains the retriever by RePlug from the frozen reader, no passage label
// used: dense Recall@1 of the question's entry rises over the starting retriever's.
func TestReplugRecallRises(t *testing.T) {
	skipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := smallStudyRecipe(t, "replug", `[replug]
systems = ["replug"]
steps = 100
batch_size = 12
top_k = 8
lr = 5e-4
tau_lm = 3.0
`)
	var out strings.Builder
	dir, err := Run(context.Background(), rec, Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	m, err := ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	before, after := m["dense/Recall@1"], m["dense+replug/Recall@1"]
	if !(after > before+0.05) {
		t.Errorf("RePlug: dense Recall@1 %.3f -> %.3f, want a rise of > 0.05", before, after)
	}
	// The reader is frozen: each (question, passage) pair is scored once, later steps hit the cache.
	if m["replug/reader_cache_hits"] == 0 || m["replug/reader_scored"] == 0 {
		t.Errorf("reader scored %v pairs, %v cache hits", m["replug/reader_scored"], m["replug/reader_cache_hits"])
	}
}

// tinyRealmRecipe is a kind = "realm" recipe whose reader is too small to read well: the tests
// using it check the machinery (refresh, staleness, interruption, resume), not the accuracy.
func tinyRealmRecipe(t *testing.T, realm string) *configs.Recipe {
	t.Helper()
	return tinyStudyRecipe(t, "realm", realm)
}

// tinyStudyRecipe is tinyRealmRecipe of either study kind ("replug" or "realm").
func tinyStudyRecipe(t *testing.T, kind, extra string) *configs.Recipe {
	t.Helper()
	rec := smallStudyRecipe(t, kind, extra)
	rec.World.Gardeners, rec.World.Biographies, rec.World.News, rec.World.DatastoreNews = 80, 300, 300, 40
	rec.Reader.Hidden, rec.Reader.Layers, rec.Reader.FFN, rec.Reader.FinetuneSteps = 32, 1, 64, 30
	rec.Pretrain.Steps, rec.Train.Steps = 10, 10
	return rec
}

// logLine is one line of log.jsonl as the realm phases write it.
type logLine struct {
	Phase      string  `json:"phase"`
	Step       int     `json:"step"`
	IndexStep  *int    `json:"index_step"`
	IndexHash  string  `json:"index_hash"`
	Staleness  int     `json:"staleness"`
	Refresh    string  `json:"refresh"`
	Version    int     `json:"version_step"`
	EncodeSecs float64 `json:"encoding_seconds"`
}

func readLog(t *testing.T, dir string) []logLine {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []logLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log.jsonl: %v: %s", err, sc.Text())
		}
		lines = append(lines, l)
	}
	return lines
}

// TestRealmRefreshStaleness runs REALM joint training with sync and async (swap_after = 2)
// refresh every 5 steps: every step logs the version of the index it searched, and the
// staleness follows the refresh schedule exactly: step % 5 in sync mode; in async mode the
// refresh started at step s serves from step s+2 on.
func TestRealmRefreshStaleness(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := tinyRealmRecipe(t, `[realm]
systems = ["sync", "async", "frozen"]
steps = 20
batch_size = 8
top_k = 3
[index_refresh]
refresh_every = 5
swap_after = 2
workers = 2
`)
	var out strings.Builder
	dir, err := Run(context.Background(), rec, Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	hashes := map[string]map[int]string{} // phase -> version step -> hash
	seen := map[string]int{}
	for _, l := range readLog(t, dir) {
		if l.IndexStep == nil {
			continue
		}
		v := *l.IndexStep
		want := 5 * (l.Step / 5) // sync
		if l.Phase == "realm_async" {
			want = 0
			if l.Step >= 7 {
				want = 5 * ((l.Step - 2) / 5)
			}
		}
		if v != want || l.Staleness != l.Step-v {
			t.Errorf("%s step %d: index of step %d, staleness %d; want the index of step %d", l.Phase, l.Step, v, l.Staleness, want)
		}
		if hashes[l.Phase] == nil {
			hashes[l.Phase] = map[int]string{}
		}
		if h, ok := hashes[l.Phase][v]; ok && h != l.IndexHash {
			t.Errorf("%s: version step %d has hashes %s and %s", l.Phase, v, h, l.IndexHash)
		}
		hashes[l.Phase][v] = l.IndexHash
		seen[l.Phase]++
	}
	for _, p := range []string{"realm_sync", "realm_async"} {
		if seen[p] != 20 || len(hashes[p]) != 4 {
			t.Errorf("%s: %d steps logged with %d index versions, want 20 with 4 (steps 0, 5, 10, 15)", p, seen[p], len(hashes[p]))
		}
	}
	if seen["realm_frozen"] != 0 {
		t.Errorf("the frozen document tower logged %d index versions; its index never changes", seen["realm_frozen"])
	}
	m, err := ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"realm_sync", "realm_async"} {
		if m[p+"/refreshes"] != 3 || !(m[p+"/encoding_seconds"] > 0) || m[p+"/max_staleness"] != map[string]float64{"realm_sync": 4, "realm_async": 6}[p] {
			t.Errorf("%s: refreshes %v, encoding %vs, max staleness %v", p, m[p+"/refreshes"], m[p+"/encoding_seconds"], m[p+"/max_staleness"])
		}
		for _, k := range []string{"/Recall@1", "/Recall@5"} {
			if _, ok := m["dense+"+p+k]; !ok {
				t.Errorf("metrics.json lacks dense+%s%s", p, k)
			}
		}
	}
	// Sync refresh blocks training for the whole encoding, async only for the snapshots.
	if !(m["realm_sync/waited_seconds"] >= m["realm_sync/encoding_seconds"]*0.9) {
		t.Errorf("sync: waited %vs for %vs of encoding", m["realm_sync/waited_seconds"], m["realm_sync/encoding_seconds"])
	}
}

// TestRealmInterruptMidRefreshAndResume cancels a REALM run (as SIGINT does) while a sync
// refresh is encoding: the run stops with an interruption, no goroutine is left, the latest
// checkpoint loads and holds the completed steps, and -resume finishes the run, taking the
// finished supervised system from study.json.
func TestRealmInterruptMidRefreshAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := tinyRealmRecipe(t, `[realm]
systems = ["supervised", "sync"]
steps = 30
batch_size = 8
top_k = 3
checkpoint_every = 4
[index_refresh]
refresh_every = 5
`)
	baseline := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var encodes atomic.Int32
	var out strings.Builder
	// Encoding 1 is the starting index, 2 the refresh at step 5, 3 the one at step 10.
	dir, err := Run(ctx, rec, Options{Out: &out, Progress: io.Discard, onEncode: func() {
		if encodes.Add(1) == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, trainer.ErrInterrupted) {
		t.Fatalf("interrupted run: err = %v\n%s", err, out.String())
	}
	if finished(dir) {
		t.Fatal("an interrupted run wrote metrics.json")
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines left, %d before the run:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
	}
	ck, err := checkpoints.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Trainer.Phase != "realm_sync" || ck.Trainer.Step != 11 || ck.Optimizer == nil {
		t.Errorf("latest checkpoint: %s step %d (optimizer %t), want realm_sync step 11 with the optimizer", ck.Trainer.Phase, ck.Trainer.Step, ck.Optimizer != nil)
	}
	// The refresh cut short left the index of step 5 serving at step 10.
	for _, l := range readLog(t, dir) {
		if l.Phase == "realm_sync" && l.Step == 10 && l.IndexStep != nil && *l.IndexStep != 5 {
			t.Errorf("step 10 searched the index of step %d, want 5 (the cancelled refresh must not swap in)", *l.IndexStep)
		}
	}

	out.Reset()
	if _, err := Run(context.Background(), rec, Options{Out: &out, Progress: io.Discard, ResumeDir: dir}); err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	for _, want := range []string{"supervised: finished in an earlier segment", "at step 11"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("resumed output lacks %q:\n%s", want, out.String())
		}
	}
	m, err := ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"dense+supervised/Recall@1", "dense+realm_sync/Recall@1", "realm_sync/train_seconds", "supervised/train_seconds"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics.json lacks %s", k)
		}
	}
	ck, err = checkpoints.Load(dir)
	if err != nil || ck.Trainer.Phase != "realm_sync" || ck.Trainer.Step != 30 {
		t.Errorf("after resume the latest checkpoint is %+v (%v), want realm_sync step 30", ck.Trainer, err)
	}
}

// TestReplugBothTowersRefreshes trains both towers by RePlug: the passage tower trains in the
// graph, so the index is refreshed (sync, every 4 steps) and every step logs the version it
// searched.
func TestReplugBothTowersRefreshes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := tinyStudyRecipe(t, "replug", `[replug]
systems = ["replug"]
towers = "both"
steps = 12
batch_size = 8
top_k = 3
[index_refresh]
mode = "sync"
refresh_every = 4
`)
	var out strings.Builder
	dir, err := Run(context.Background(), rec, Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	start, err := checkpoints.Load(filepath.Join(dir, studyStartDir))
	if err != nil {
		t.Fatal(err)
	}
	final, err := checkpoints.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	changed := func(prefix string) bool {
		for i, p := range final.Params {
			if strings.HasPrefix(p.Name, prefix) && !slices.Equal(p.Data, start.Params[i].Data) {
				return true
			}
		}
		return false
	}
	if !changed("passage.") || !changed("query.") || changed("reader.") {
		t.Errorf("changed: passage tower %t, query tower %t, reader %t; want both towers and not the reader",
			changed("passage."), changed("query."), changed("reader."))
	}
	steps := 0
	for _, l := range readLog(t, dir) {
		if l.Phase == "replug" && l.IndexStep != nil {
			if *l.IndexStep != 4*(l.Step/4) {
				t.Errorf("step %d searched the index of step %d", l.Step, *l.IndexStep)
			}
			steps++
		}
	}
	m, err := ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	if steps != 12 || m["replug/refreshes"] != 2 {
		t.Errorf("%d steps logged, %v refreshes; want 12 and 2", steps, m["replug/refreshes"])
	}
}
