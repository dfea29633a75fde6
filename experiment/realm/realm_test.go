package realm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
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
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/trainer"
)

// tinyRealmRecipe is a kind = "realm" recipe whose reader is too small to read well: the tests
// using it check the machinery (refresh, staleness, interruption, resume), not the accuracy.
func tinyRealmRecipe(t *testing.T, realm string) *configs.Recipe {
	t.Helper()
	return testkit.TinyStudyRecipe(t, "realm", realm)
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
	dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	hashes := map[string]map[int]string{} // phase -> version step -> hash
	seen := map[string]int{}
	for _, l := range testkit.ReadLog(t, dir) {
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
	m, err := experiment.ReadMetrics(dir)
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
	dir, err := experiment.Run(ctx, rec, experiment.Options{Out: &out, Progress: io.Discard, OnEncode: func() {
		if encodes.Add(1) == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, trainer.ErrInterrupted) {
		t.Fatalf("interrupted run: err = %v\n%s", err, out.String())
	}
	if experiment.Finished(dir) {
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
	for _, l := range testkit.ReadLog(t, dir) {
		if l.Phase == "realm_sync" && l.Step == 10 && l.IndexStep != nil && *l.IndexStep != 5 {
			t.Errorf("step 10 searched the index of step %d, want 5 (the cancelled refresh must not swap in)", *l.IndexStep)
		}
	}

	out.Reset()
	if _, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: dir}); err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	for _, want := range []string{"supervised: finished in an earlier segment", "at step 11"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("resumed output lacks %q:\n%s", want, out.String())
		}
	}
	m, err := experiment.ReadMetrics(dir)
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

// TestRealmInBatchNegativesAndCandidates runs both towers with in-batch negatives, a
// slower passage tower with a warm-up, and BM25 candidates rescored by the serving index: every
// step searches the index, the system is evaluated.
func TestRealmInBatchNegativesAndCandidates(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := tinyRealmRecipe(t, `[realm]
systems = ["async"]
steps = 8
batch_size = 4
top_k = 3
in_batch_negatives = true
passage_lr_scale = 0.1
passage_warmup_steps = 3
[index_refresh]
refresh_every = 2
swap_after = 1
`)
	rec.RAG.CandidateSource = "bm25+dense"
	var out strings.Builder
	dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	steps := 0
	for _, l := range testkit.ReadLog(t, dir) {
		if l.Phase == "realm_async" && l.IndexStep != nil {
			steps++
		}
	}
	m, err := experiment.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m["dense+realm_async/Recall@1"]; steps != 8 || !ok || m["realm_async/refreshes"] == 0 {
		t.Errorf("%d steps searched the index, metrics %v", steps, m)
	}
}

// TestRealmSeeds trains async and frozen at realm.seeds = [3, 11] (3 is the recipe's seed)
// and checks it against a run without realm.seeds: the first seed's metrics and TREC run are
// the single-seed run's exactly, the second seed trains on another question order, the mean
// and standard deviation keys are the arithmetic of the per-seed ones, the comparison line
// is printed, and a run interrupted in the middle of the second seed's async training and
// resumed ends as the uninterrupted one.
func TestRealmSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	const body = `[realm]
systems = ["async", "frozen"]
steps = 8
batch_size = 4
top_k = 3
checkpoint_every = 4
[index_refresh]
refresh_every = 2
swap_after = 1
`
	run := func(rec *configs.Recipe, o experiment.Options) (string, string) {
		t.Helper()
		var out strings.Builder
		o.Out, o.Progress = &out, io.Discard
		dir, err := experiment.Run(context.Background(), rec, o)
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		return dir, out.String()
	}
	single, _ := run(tinyRealmRecipe(t, body), experiment.Options{})
	seeded := tinyRealmRecipe(t, body)
	seeded.Realm.Seeds = []int64{3, 11}
	if seeded.Seed != 3 {
		t.Fatalf("the test recipe's seed is %d, want 3", seeded.Seed)
	}
	multi, out := run(seeded, experiment.Options{})

	one, err := experiment.ReadMetrics(single)
	if err != nil {
		t.Fatal(err)
	}
	m, err := experiment.ReadMetrics(multi)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, v := range testkit.Untimed(one) {
		for _, p := range []string{"realm_async", "realm_frozen"} {
			if !strings.Contains(k, p) {
				continue
			}
			n++
			if got := m[strings.Replace(k, p, p+"_seed3", 1)]; got != v {
				t.Errorf("%s at seed 3: %v, the single-seed run's %v", k, got, v)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d metrics of the single-seed run name a REALM system: %v", n, one)
	}
	for _, sys := range []string{"realm_async", "realm_frozen"} {
		testkit.SameFile(t, filepath.Join(single, "runs", "test.dense+"+sys+".trec"), filepath.Join(multi, "runs", "test.dense+"+sys+".trec"))
		for _, s := range []string{"3", "11"} {
			if _, err := os.Stat(filepath.Join(multi, "runs", "test.dense+"+sys+"_seed"+s+".trec")); err != nil {
				t.Error(err)
			}
		}
	}
	// Seed 11 draws another question order: the losses of its steps differ.
	losses := map[string][]float64{}
	for _, l := range readLosses(t, multi) {
		losses[l.Phase] = append(losses[l.Phase], l.Loss)
	}
	if a, b := losses["realm_async_seed3"], losses["realm_async_seed11"]; len(a) == 0 || len(a) != len(b) || slices.Equal(a, b) {
		t.Errorf("logged losses at seed 3 %v and at seed 11 %v: want as many, not all equal", a, b)
	}
	// The mean and sample standard deviation of two values.
	for _, c := range []struct{ key, phase string }{
		{"dense+%s/Recall@1", "realm_async"}, {"dense+%s/Recall@5", "realm_async"}, {"%s_top1/EM", "realm_async"},
		{"dev/dense+%s/Recall@1", "realm_frozen"}, {"%s/refreshes", "realm_async"}, {"%s_top1/EM", "realm_frozen"},
	} {
		k := fmt.Sprintf(c.key, c.phase)
		a, b := m[fmt.Sprintf(c.key, c.phase+"_seed3")], m[fmt.Sprintf(c.key, c.phase+"_seed11")]
		mean, ok1 := m[k]
		sd, ok2 := m[k+".sd"]
		if !ok1 || !ok2 || math.Abs(mean-(a+b)/2) > 1e-12 || math.Abs(sd-math.Abs(a-b)/math.Sqrt2) > 1e-12 {
			t.Errorf("%s: mean %v sd %v (written %t %t), per seed %v and %v", k, mean, sd, ok1, ok2, a, b)
		}
	}
	if d := m["realm/async_minus_frozen/Recall@1"]; math.Abs(d-(m["dense+realm_async/Recall@1"]-m["dense+realm_frozen/Recall@1"])) > 1e-12 {
		t.Errorf("realm/async_minus_frozen/Recall@1 = %v, means %v and %v", d, m["dense+realm_async/Recall@1"], m["dense+realm_frozen/Recall@1"])
	}
	for _, want := range []string{"REALM systems over 2 seeds (3, 11)", "  seed 11", "async both towers vs frozen passage tower, test Recall@1: mean difference", "above start"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Killed in the middle of the second seed's async training (in step 5, after the checkpoint
	// of step 4: the checkpoint of the interruption holds 6 steps), then resumed.
	cut := tinyRealmRecipe(t, body)
	cut.Realm.Seeds = []int64{3, 11}
	var buf strings.Builder
	dir, err := experiment.Run(context.Background(), cut, experiment.Options{Out: &buf, Progress: io.Discard, InterruptPhase: "realm_async_seed11", InterruptAt: 5})
	if !errors.Is(err, trainer.ErrInterrupted) {
		t.Fatalf("interrupted run: err = %v\n%s", err, buf.String())
	}
	ck, err := checkpoints.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Trainer.Phase != "realm_async_seed11" || ck.Trainer.Step != 6 || ck.Trainer.Seed != 11 {
		t.Fatalf("latest checkpoint: %+v, want realm_async_seed11 step 6 at seed 11", ck.Trainer)
	}
	_, out = run(cut, experiment.Options{ResumeDir: dir})
	for _, want := range []string{"async_seed3: finished in an earlier segment", "checkpoint-realm_async_seed11-6 at step 6"} {
		if !strings.Contains(out, want) {
			t.Errorf("resumed output lacks %q:\n%s", want, out)
		}
	}
	testkit.SameRunDir(t, "resumed: ", multi, dir)
}

// readLosses reads the phase and loss of every log.jsonl line with a loss.
func readLosses(t *testing.T, dir string) []struct {
	Phase string
	Loss  float64
} {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, experiment.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []struct {
		Phase string
		Loss  float64
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct {
			Phase string   `json:"phase"`
			Loss  *float64 `json:"loss"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		if l.Loss != nil {
			out = append(out, struct {
				Phase string
				Loss  float64
			}{l.Phase, *l.Loss})
		}
	}
	return out
}

// TestRealmResumeAtEveryStepOfARefresh interrupts async REALM (refresh_every 2, swap_after 1)
// at each step of two refresh cycles, so that the checkpoint falls before a refresh starts,
// while one is in flight and due to swap in, and after it swapped; each resumed run must end
// as the uninterrupted one, the refresh count included (a refresh in flight at the
// checkpoint serves the resumed run without swapping in there, so the checkpoint counts it).
func TestRealmResumeAtEveryStepOfARefresh(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	const body = `[realm]
systems = ["async"]
steps = 8
batch_size = 4
top_k = 3
checkpoint_every = 4
[index_refresh]
refresh_every = 2
swap_after = 1
`
	var out strings.Builder
	whole, err := experiment.Run(context.Background(), tinyRealmRecipe(t, body), experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for at := 3; at <= 6; at++ {
		rec := tinyRealmRecipe(t, body)
		out.Reset()
		dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, InterruptPhase: "realm_async", InterruptAt: at})
		if !errors.Is(err, trainer.ErrInterrupted) {
			t.Fatalf("interrupt at %d: err = %v\n%s", at, err, out.String())
		}
		out.Reset()
		if _, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: dir}); err != nil {
			t.Fatalf("resume after %d: %v\n%s", at, err, out.String())
		}
		testkit.SameRunDir(t, fmt.Sprintf("interrupted at %d, resumed: ", at), whole, dir)
	}
}
