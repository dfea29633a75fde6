package indexrefresh

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ragtrain/ragtrain/index/ann"
)

func TestParseMode(t *testing.T) {
	for _, s := range []string{"async", "sync", "off"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "Async", "on"} {
		if _, err := ParseMode(s); err == nil || !strings.Contains(err.Error(), `want "async", "sync" or "off"`) {
			t.Errorf("ParseMode(%q) error = %v", s, err)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	w := worker(nil)
	tests := []struct {
		name string
		opts Options
		want string // "" for valid
	}{
		{"async", Options{Mode: ModeAsync, Every: 1, Workers: 1, NewWorker: w}, ""},
		{"sync", Options{Mode: ModeSync, Every: 10, Workers: 4, ShardSize: 64, NewWorker: w}, ""},
		{"off needs nothing", Options{Mode: ModeOff}, ""},
		{"swap after", Options{Mode: ModeAsync, Every: 5, Workers: 1, SwapAfter: 2, NewWorker: w}, ""},
		{"no mode", Options{Every: 1, Workers: 1, NewWorker: w}, `mode ""`},
		{"every 0", Options{Mode: ModeAsync, Workers: 1, NewWorker: w}, "refresh every 0 steps"},
		{"workers 0", Options{Mode: ModeSync, Every: 1, NewWorker: w}, "workers 0"},
		{"negative shard", Options{Mode: ModeSync, Every: 1, Workers: 1, ShardSize: -1, NewWorker: w}, "shard size -1"},
		{"swap after in sync", Options{Mode: ModeSync, Every: 1, Workers: 1, SwapAfter: 1, NewWorker: w}, `needs mode "async"`},
		{"no factory", Options{Mode: ModeAsync, Every: 1, Workers: 1}, "needs Options.NewWorker"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(testIDs(3), testDim, versionVecs(0, 0, 3), Version{}, tc.opts)
			if tc.want == "" && err != nil {
				t.Fatalf("New: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("New error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// A bad starting index is reported with its version.
	_, err := New(testIDs(2), testDim, versionVecs(0, 0, 3), Version{Step: 3}, Options{Mode: ModeOff})
	if err == nil || !strings.Contains(err.Error(), "starting index step 3") {
		t.Errorf("New with 3 rows for 2 ids: error %v", err)
	}
}

func TestSyncModeBlocksAndSwaps(t *testing.T) {
	const n = 20
	var log eventLog
	r := newAt0(t, n, Options{Mode: ModeSync, Every: 5, Workers: 2, ShardSize: 3, NewWorker: worker(nil), OnEvent: log.add})
	defer r.Close()
	params := towerAt(0)
	ctx := context.Background()
	wantServing := []int{0, 0, 0, 0, 0, 5, 5, 5, 5, 5, 10, 10, 10}
	for step := 0; step <= 12; step++ {
		setStep(params, step)
		swapped, err := r.MaybeRefresh(ctx, step, params)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		// Step 0 is due but the serving index already is step 0's.
		if want := step > 0 && step%5 == 0; swapped != want {
			t.Errorf("step %d: MaybeRefresh = %v, want %v", step, swapped, want)
		}
		hits, v := r.Search(qUp, 3)
		if v.Step != wantServing[step] || v.ParamHash != hashAt(t, v.Step) {
			t.Errorf("step %d: serving %v, want step %d hash %s", step, v, wantServing[step], hashAt(t, wantServing[step]))
		}
		if err := checkHits(n, hits, v, +1); err != nil {
			t.Errorf("step %d: %v", step, err)
		}
		if got, want := r.Staleness(step), step-wantServing[step]; got != want {
			t.Errorf("step %d: Staleness = %d, want %d", step, got, want)
		}
	}
	st := r.Stats()
	if st.Refreshes != 2 || st.Failed != 0 || st.Skipped != 0 || st.InFlight || st.Serving.Step != 10 {
		t.Errorf("Stats = %+v, want 2 refreshes, none failed or skipped, serving step 10", st)
	}
	if st.Encoding <= 0 || st.Waited < st.Encoding {
		t.Errorf("Stats: encoding %v, waited %v; want 0 < encoding <= waited in sync mode", st.Encoding, st.Waited)
	}
	if got, want := log.summary(), []string{"started@5", "swapped@5", "started@10", "swapped@10"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

func TestOffModeNeverRefreshes(t *testing.T) {
	var calls atomic.Int64
	r := newAt0(t, 5, Options{Mode: ModeOff, Every: 1, Workers: 1, NewWorker: func(s Snapshot) (EncodeFunc, error) {
		calls.Add(1)
		return worker(nil)(s)
	}})
	defer r.Close()
	params := towerAt(0)
	for step := 1; step <= 30; step++ {
		setStep(params, step)
		if swapped, err := r.MaybeRefresh(context.Background(), step, params); swapped || err != nil {
			t.Fatalf("step %d: MaybeRefresh = %v, %v; want false, nil", step, swapped, err)
		}
	}
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	if v := r.Serving(); v.Step != 0 || r.Staleness(30) != 30 {
		t.Errorf("serving %v, staleness %d at step 30; want step 0, 30", v, r.Staleness(30))
	}
	if st := r.Stats(); st.Refreshes != 0 || st.Failed != 0 || st.Skipped != 0 || st.Encoding != 0 || calls.Load() != 0 {
		t.Errorf("Stats = %+v, %d encoders made; want nothing", st, calls.Load())
	}
}

func TestAsyncRefreshInBackground(t *testing.T) {
	const n = 12
	gate := make(chan struct{})
	var log eventLog
	r := newAt0(t, n, Options{Mode: ModeAsync, Every: 5, Workers: 2, NewWorker: worker(func(context.Context, int, int) error {
		<-gate
		return nil
	}), OnEvent: log.add})
	defer r.Close()
	params := towerAt(0)
	ctx := context.Background()
	for step := 1; step <= 12; step++ {
		setStep(params, step)
		started, err := r.MaybeRefresh(ctx, step, params)
		if err != nil {
			t.Fatal(err)
		}
		if want := step == 5; started != want {
			t.Errorf("step %d: MaybeRefresh = %v, want %v", step, started, want)
		}
		// The encoder is held at the gate: the step-0 index keeps serving.
		hits, v := r.Search(qDown, 2)
		if v.Step != 0 {
			t.Fatalf("step %d: serving %v before the refresh could finish", step, v)
		}
		if err := checkHits(n, hits, v, -1); err != nil {
			t.Error(err)
		}
	}
	if st := r.Stats(); !st.InFlight || st.Skipped != 1 || st.Refreshes != 0 {
		t.Errorf("Stats with the step-5 refresh held = %+v, want in flight, 1 skipped (step 10)", st)
	}
	close(gate)
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	if v := r.Serving(); v.Step != 5 || v.ParamHash != hashAt(t, 5) {
		t.Errorf("after Wait: serving %v, want step 5 hash %s", v, hashAt(t, 5))
	}
	if r.Staleness(12) != 7 {
		t.Errorf("Staleness(12) = %d, want 7", r.Staleness(12))
	}
	// Training moved on to step 12, but the index is step 5's: the snapshot, not the live weights.
	hits, v := r.SearchBatch(slices.Concat(qUp, qDown), 4)
	if err := checkHits(n, hits[0], v, +1); err != nil {
		t.Error(err)
	}
	if err := checkHits(n, hits[1], v, -1); err != nil {
		t.Error(err)
	}
	setStep(params, 15)
	if started, err := r.MaybeRefresh(ctx, 15, params); !started || err != nil {
		t.Fatalf("step 15: MaybeRefresh = %v, %v", started, err)
	}
	if err := r.Wait(); err != nil || r.Serving().Step != 15 {
		t.Fatalf("after step 15: Wait = %v, serving %v", err, r.Serving())
	}
	if got, want := log.summary(), []string{"started@5", "swapped@5", "started@15", "swapped@15"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

func TestFailedRefreshKeepsOldIndex(t *testing.T) {
	boom := errors.New("encoder exploded")
	for _, mode := range []Mode{ModeAsync, ModeSync} {
		t.Run(string(mode), func(t *testing.T) {
			const n = 16
			var broken atomic.Bool
			broken.Store(true)
			var log eventLog
			base := runtime.NumGoroutine()
			r := newAt0(t, n, Options{Mode: mode, Every: 4, Workers: 3, ShardSize: 2, OnEvent: log.add,
				NewWorker: worker(func(_ context.Context, lo, _ int) error {
					if broken.Load() && lo == 6 {
						return boom
					}
					return nil
				})})
			params := towerAt(4)
			_, err := r.MaybeRefresh(context.Background(), 4, params)
			if mode == ModeAsync {
				if err != nil {
					t.Fatalf("async MaybeRefresh: %v", err)
				}
				err = r.Wait()
			}
			if !errors.Is(err, boom) || !strings.Contains(err.Error(), "refresh started at step 4") ||
				!strings.Contains(err.Error(), "encode rows 6..7") {
				t.Fatalf("refresh error = %v, want boom naming step 4 and rows 6..7", err)
			}
			if !errors.Is(r.Err(), boom) {
				t.Errorf("Err() = %v, want boom", r.Err())
			}
			hits, v := r.Search(qUp, 5)
			if v.Step != 0 {
				t.Errorf("serving %v after a failed refresh, want step 0", v)
			}
			if err := checkHits(n, hits, v, +1); err != nil {
				t.Error(err)
			}
			if st := r.Stats(); st.Failed != 1 || st.Refreshes != 0 || st.InFlight {
				t.Errorf("Stats = %+v, want 1 failed, 0 refreshes, none in flight", st)
			}

			// The next due step retries, and a success clears Err.
			broken.Store(false)
			setStep(params, 8)
			if _, err := r.MaybeRefresh(context.Background(), 8, params); err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(); err != nil || r.Err() != nil || r.Serving().Step != 8 {
				t.Errorf("retry: Wait = %v, Err = %v, serving %v; want nil, nil, step 8", err, r.Err(), r.Serving())
			}
			if got, want := log.summary(), []string{"started@4", "failed@4", "started@8", "swapped@8"}; !slices.Equal(got, want) {
				t.Errorf("events %v, want %v", got, want)
			}
			r.Close()
			settle(t, base)
		})
	}
}

func TestInvalidVectorsFailTheRefresh(t *testing.T) {
	nan := func(Snapshot) (EncodeFunc, error) {
		return func(_ context.Context, lo, hi int) ([]float32, error) {
			v := versionVecs(1, lo, hi)
			if lo == 0 {
				v[1] = float32(math.NaN())
			}
			return v, nil
		}, nil
	}
	r := newAt0(t, 4, Options{Mode: ModeSync, Every: 1, Workers: 1, NewWorker: nan})
	defer r.Close()
	_, err := r.MaybeRefresh(context.Background(), 1, towerAt(1))
	if err == nil || !strings.Contains(err.Error(), `row 0 (id "d000") column 1 is NaN`) {
		t.Fatalf("error %v, want the NaN named", err)
	}
	if r.Serving().Step != 0 {
		t.Errorf("serving %v, want step 0", r.Serving())
	}
}

// blockingWorker signals entered once per refresh and then blocks until ctx is cancelled.
func blockingWorker(entered chan<- struct{}) WorkerFactory {
	var once sync.Once
	return worker(func(ctx context.Context, _, _ int) error {
		once.Do(func() { entered <- struct{}{} })
		<-ctx.Done()
		return ctx.Err()
	})
}

func TestCloseCancelsInFlightRefresh(t *testing.T) {
	for _, mode := range []Mode{ModeAsync, ModeSync} {
		t.Run(string(mode), func(t *testing.T) {
			const n = 8
			base := runtime.NumGoroutine()
			entered := make(chan struct{}, 1)
			var log eventLog
			r := newAt0(t, n, Options{Mode: mode, Every: 2, Workers: 4, ShardSize: 1, NewWorker: blockingWorker(entered), OnEvent: log.add})
			result := make(chan error, 1)
			go func() {
				_, err := r.MaybeRefresh(context.Background(), 2, towerAt(2))
				if mode == ModeAsync && err == nil {
					err = errors.New("still running")
				}
				result <- err
			}()
			<-entered
			r.Close()
			err := <-result
			if mode == ModeSync && !errors.Is(err, context.Canceled) {
				t.Errorf("sync MaybeRefresh cut by Close = %v, want context.Canceled", err)
			}
			if !errors.Is(r.Err(), context.Canceled) {
				t.Errorf("Err() = %v, want context.Canceled", r.Err())
			}
			hits, v := r.Search(qUp, 3)
			if v.Step != 0 {
				t.Errorf("serving %v after Close, want step 0", v)
			}
			if err := checkHits(n, hits, v, +1); err != nil {
				t.Error(err)
			}
			if st := r.Stats(); st.Failed != 1 || st.InFlight || st.Refreshes != 0 {
				t.Errorf("Stats = %+v, want 1 failed, none in flight", st)
			}
			if got, want := log.summary(), []string{"started@2", "failed@2"}; !slices.Equal(got, want) {
				t.Errorf("events %v, want %v", got, want)
			}
			if _, err := r.MaybeRefresh(context.Background(), 4, towerAt(4)); !errors.Is(err, ErrClosed) {
				t.Errorf("MaybeRefresh after Close = %v, want ErrClosed", err)
			}
			r.Close() // idempotent
			settle(t, base)
		})
	}
}

func TestContextCancelMidRefresh(t *testing.T) {
	const n = 8
	base := runtime.NumGoroutine()
	entered := make(chan struct{}, 1)
	var blocking atomic.Bool
	blocking.Store(true)
	block := blockingWorker(entered)
	r := newAt0(t, n, Options{Mode: ModeAsync, Every: 2, Workers: 2, NewWorker: func(s Snapshot) (EncodeFunc, error) {
		if blocking.Load() {
			return block(s)
		}
		return worker(nil)(s)
	}})
	ctx, cancel := context.WithCancel(context.Background())
	if started, err := r.MaybeRefresh(ctx, 2, towerAt(2)); !started || err != nil {
		t.Fatalf("MaybeRefresh = %v, %v", started, err)
	}
	<-entered
	cancel()
	if err := r.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if r.Serving().Step != 0 {
		t.Errorf("serving %v after cancellation, want step 0", r.Serving())
	}
	settle(t, base) // no goroutine left, even before Close

	// The refresher is still usable with a live context.
	blocking.Store(false)
	if _, err := r.MaybeRefresh(context.Background(), 4, towerAt(4)); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(); err != nil || r.Serving().Step != 4 {
		t.Fatalf("after retry: Wait = %v, serving %v", err, r.Serving())
	}
	if st := r.Stats(); st.Failed != 1 || st.Refreshes != 1 {
		t.Errorf("Stats = %+v, want 1 failed and 1 refresh", st)
	}
	r.Close()
	settle(t, base)
}

func TestSwapAfterIsDeterministic(t *testing.T) {
	// Every 4, SwapAfter 2: refreshes start at 4, 8, 12, 16 and serve from 6, 10, 14, however
	// long encoding takes; the one started at 16 is still pending at 17, when Close drops it.
	want := []int{0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12}
	for _, delay := range []time.Duration{0, 2 * time.Millisecond} {
		r := newAt0(t, 10, Options{Mode: ModeAsync, Every: 4, SwapAfter: 2, Workers: 2, ShardSize: 2,
			NewWorker: worker(func(context.Context, int, int) error { time.Sleep(delay); return nil })})
		params := towerAt(0)
		var got []int
		for step := range want {
			setStep(params, step)
			swapped, err := r.MaybeRefresh(context.Background(), step, params)
			if err != nil {
				t.Fatal(err)
			}
			// MaybeRefresh reports both the steps that start a refresh and those that swap one in.
			if want := step > 0 && step%4 == 0 || step >= 6 && step%4 == 2; swapped != want {
				t.Errorf("delay %v, step %d: MaybeRefresh = %v, want %v", delay, step, swapped, want)
			}
			got = append(got, r.Serving().Step)
		}
		if !slices.Equal(got, want) {
			t.Errorf("delay %v: serving steps %v, want %v", delay, got, want)
		}
		r.Close()
		if st := r.Stats(); st.Refreshes != 3 || st.Failed != 1 {
			t.Errorf("delay %v: Stats = %+v, want 3 refreshes and 1 dropped by Close", delay, st)
		}
	}
}

func TestSwapAfterWaitsForSlowEncoding(t *testing.T) {
	gate := make(chan struct{})
	r := newAt0(t, 4, Options{Mode: ModeAsync, Every: 2, SwapAfter: 1, Workers: 1,
		NewWorker: worker(func(context.Context, int, int) error { <-gate; return nil })})
	defer r.Close()
	if started, err := r.MaybeRefresh(context.Background(), 2, towerAt(2)); !started || err != nil {
		t.Fatalf("step 2: %v, %v", started, err)
	}
	// t0 is taken before the timer is armed, so the gate opens at least hold after t0. Waited
	// starts inside MaybeRefresh, a little after the timer; half of hold is the bound checked.
	const hold = 100 * time.Millisecond
	t0 := time.Now()
	time.AfterFunc(hold, func() { close(gate) })
	swapped, err := r.MaybeRefresh(context.Background(), 3, towerAt(3))
	if !swapped || err != nil || r.Serving().Step != 2 {
		t.Fatalf("step 3: MaybeRefresh = %v, %v, serving %v; want the step-2 index swapped in", swapped, err, r.Serving())
	}
	if blocked := time.Since(t0); blocked < hold {
		t.Errorf("step 3 returned after %v, before the encoder was released at %v", blocked, hold)
	}
	if st := r.Stats(); st.Waited < hold/2 {
		t.Errorf("Stats.Waited = %v, want >= %v", st.Waited, hold/2)
	}
}

func TestNewEncoded(t *testing.T) {
	const n = 9
	r, err := NewEncoded(context.Background(), testIDs(n), testDim, towerAt(3), 3,
		Options{Mode: ModeOff, Workers: 2, NewWorker: worker(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	hits, v := r.Search(qUp, n)
	if v != (Version{Step: 3, ParamHash: hashAt(t, 3)}) {
		t.Errorf("serving %v, want step 3 hash %s", v, hashAt(t, 3))
	}
	if err := checkHits(n, hits, v, +1); err != nil {
		t.Error(err)
	}
	if st := r.Stats(); st.Encoding <= 0 || st.Waited < st.Encoding {
		t.Errorf("Stats = %+v, want the starting encoding timed", st)
	}
	if _, err := NewEncoded(context.Background(), testIDs(n), testDim, towerAt(3), 3, Options{Mode: ModeOff}); err == nil {
		t.Error("NewEncoded without NewWorker succeeded")
	}
}

// TestConcurrentSearchesDuringRefreshes trains for 300 steps with an async refresh every 3
// steps while four goroutines search without pause. Every result must come from one version
// (every score is exactly that version's), each searcher must see versions in order, and
// every version's hash must be the hash of the weights at its step.
func TestConcurrentSearchesDuringRefreshes(t *testing.T) {
	const (
		n     = 64
		steps = 300
	)
	base := runtime.NumGoroutine()
	r := newAt0(t, n, Options{Mode: ModeAsync, Every: 3, Workers: 3, ShardSize: 5,
		NewWorker: worker(func(context.Context, int, int) error { runtime.Gosched(); return nil })})

	hashes := map[int]string{0: hashAt(t, 0)}
	for s := 3; s <= steps; s += 3 {
		hashes[s] = hashAt(t, s)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var searches atomic.Int64
	seen := make([]map[int]bool, 4)
	for g := range seen {
		seen[g] = map[int]bool{}
		wg.Go(func() {
			last := -1
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var vs []Version
				if i%2 == 0 {
					hits, v := r.Search(qUp, 5)
					if err := checkHits(n, hits, v, +1); err != nil {
						t.Error(err)
						return
					}
					vs = append(vs, v)
				} else {
					hits, v := r.SearchBatch(slices.Concat(qUp, qDown, qUp), 7)
					for b, sign := range []int{+1, -1, +1} {
						if err := checkHits(n, hits[b], v, sign); err != nil {
							t.Error(err)
							return
						}
					}
					vs = append(vs, v)
				}
				for _, v := range vs {
					if v.ParamHash != hashes[v.Step] {
						t.Errorf("version %v: hash of the weights at step %d is %s", v, v.Step, hashes[v.Step])
						return
					}
					if v.Step < last {
						t.Errorf("searcher %d saw step %d after step %d", g, v.Step, last)
						return
					}
					last = v.Step
					seen[g][v.Step] = true
				}
				searches.Add(1)
				runtime.Gosched()
			}
		})
	}

	params := towerAt(0)
	for step := 1; step <= steps; step++ {
		setStep(params, step) // the optimiser step, racing the background encoders
		if _, err := r.MaybeRefresh(context.Background(), step, params); err != nil {
			t.Fatal(err)
		}
		if s := r.Staleness(step); s < 0 || s > step {
			t.Fatalf("step %d: staleness %d", step, s)
		}
		time.Sleep(500 * time.Microsecond) // the rest of a training step
	}
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	r.Close()

	st := r.Stats()
	if st.Refreshes < 3 || st.Failed != 0 || st.Refreshes+st.Skipped != steps/3 {
		t.Errorf("Stats = %+v; want >= 3 refreshes, none failed, refreshes + skipped = %d due steps", st, steps/3)
	}
	distinct := map[int]bool{}
	for _, s := range seen {
		for step := range s {
			distinct[step] = true
		}
	}
	if len(distinct) < 3 {
		t.Errorf("searchers saw %d versions, want >= 3 (searches ran alongside too few refreshes)", len(distinct))
	}
	t.Logf("%d searches saw %d versions; %d refreshes, %d skipped, encoding %v, waited %v",
		searches.Load(), len(distinct), st.Refreshes, st.Skipped, st.Encoding, st.Waited)
	settle(t, base)
}

// TestReencodeReplacesWorkers: with Options.Reencode (and no NewWorker or Workers), each sync
// refresh serves the vectors Reencode returns for the snapshot, called once per refresh with
// the corpus size; a Reencode returning the wrong number of values fails the refresh and the
// old index keeps serving.
func TestReencodeReplacesWorkers(t *testing.T) {
	const n = 12
	var calls []int
	bad := false
	re := func(ctx context.Context, snap Snapshot, rows, dim int) ([]float32, error) {
		calls = append(calls, snap.Version().Step)
		if rows != n || dim != testDim {
			return nil, fmt.Errorf("asked for %d x %d", rows, dim)
		}
		v := versionVecs(snap.Param("doc.w").Value.Data().([]float32)[0], 0, rows)
		if bad {
			v = v[:len(v)-1]
		}
		return v, nil
	}
	r := newAt0(t, n, Options{Mode: ModeSync, Every: 5, Reencode: re})
	defer r.Close()
	params := towerAt(0)
	ctx := context.Background()
	for step := 0; step <= 10; step++ {
		bad = step == 10
		setStep(params, step)
		_, err := r.MaybeRefresh(ctx, step, params)
		if (err != nil) != bad {
			t.Fatalf("step %d: error %v", step, err)
		}
		if bad && !strings.Contains(err.Error(), fmt.Sprintf("returned %d values for %d rows of dim %d", n*testDim-1, n, testDim)) {
			t.Fatalf("step %d: error %v, want the value count", step, err)
		}
		hits, v := r.Search(qUp, 3)
		if want := min(step, 9) / 5 * 5; v.Step != want || v.ParamHash != hashAt(t, want) {
			t.Fatalf("step %d: serving %v, want step %d", step, v, want)
		}
		if err := checkHits(n, hits, v, +1); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if !slices.Equal(calls, []int{5, 10}) {
		t.Fatalf("Reencode called at steps %v, want [5 10]", calls)
	}
}

// With Options.ANNThreshold at or below the corpus size every version is an HNSW graph (the
// starting one and each refresh), and above it index.Flat; on 20 rows HNSW's efSearch of 64
// covers the whole graph, so its hits are the exact ones, version and scores included.
func TestANNThreshold(t *testing.T) {
	const n = 20
	for _, c := range []struct {
		threshold int
		hnsw      bool
	}{{0, false}, {n + 1, false}, {n, true}, {1, true}} {
		r := newAt0(t, n, Options{Mode: ModeSync, Every: 5, Workers: 1, NewWorker: worker(nil), ANNThreshold: c.threshold, ANN: ann.Params{Seed: 7}})
		params := towerAt(0)
		for _, step := range []int{0, 5} {
			setStep(params, step)
			if _, err := r.MaybeRefresh(context.Background(), step, params); err != nil {
				t.Fatal(err)
			}
			if _, ok := r.cur.Load().flat.(*ann.HNSW); ok != c.hnsw {
				t.Errorf("threshold %d, step %d: serving %T, want HNSW %v", c.threshold, step, r.cur.Load().flat, c.hnsw)
			}
			for _, sign := range []int{+1, -1} {
				q := qUp
				if sign < 0 {
					q = qDown
				}
				hits, v := r.Search(q, 5)
				if v.Step != step {
					t.Errorf("threshold %d, step %d: serving %v", c.threshold, step, v)
				}
				if err := checkHits(n, hits, v, sign); err != nil || len(hits) != 5 {
					t.Errorf("threshold %d, step %d: %d hits, %v", c.threshold, step, len(hits), err)
				}
			}
			if s, _, ok := r.Score(qUp, "d007"); !ok || s != float64(1000*step+7) {
				t.Errorf("threshold %d, step %d: Score(d007) = %v, %v", c.threshold, step, s, ok)
			}
		}
		r.Close()
	}
}
