package indexrefresh

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestEncodeShardsCoverEveryRowOnce(t *testing.T) {
	snap, err := TakeSnapshot(towerAt(9), 9)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		n, workers, shard int
		wantShards        [][2]int
		wantWorkers       int64
	}{
		{n: 10, workers: 3, shard: 3, wantShards: [][2]int{{0, 3}, {3, 6}, {6, 9}, {9, 10}}, wantWorkers: 3},
		// Default shard size: ceil(10 / (4·2)) = 2 rows.
		{n: 10, workers: 2, shard: 0, wantShards: [][2]int{{0, 2}, {2, 4}, {4, 6}, {6, 8}, {8, 10}}, wantWorkers: 2},
		// More workers than shards: only as many workers as shards start.
		{n: 3, workers: 8, shard: 2, wantShards: [][2]int{{0, 2}, {2, 3}}, wantWorkers: 2},
		{n: 0, workers: 2, shard: 0, wantShards: nil, wantWorkers: 0},
	}
	for _, tc := range tests {
		var mu sync.Mutex
		var shards [][2]int
		var factories atomic.Int64
		inner := worker(func(_ context.Context, lo, hi int) error {
			mu.Lock()
			shards = append(shards, [2]int{lo, hi})
			mu.Unlock()
			return nil
		})
		opts := Options{Workers: tc.workers, ShardSize: tc.shard, NewWorker: func(s Snapshot) (EncodeFunc, error) {
			factories.Add(1)
			return inner(s)
		}}
		got, err := Encode(context.Background(), snap, tc.n, testDim, opts)
		if err != nil {
			t.Fatalf("n=%d: %v", tc.n, err)
		}
		if want := versionVecs(9, 0, tc.n); !slices.Equal(got, want) {
			t.Errorf("n=%d: vectors %v, want %v", tc.n, got, want)
		}
		slices.SortFunc(shards, func(a, b [2]int) int { return a[0] - b[0] })
		if !slices.Equal(shards, tc.wantShards) {
			t.Errorf("n=%d workers=%d shard=%d: shards %v, want %v", tc.n, tc.workers, tc.shard, shards, tc.wantShards)
		}
		if factories.Load() != tc.wantWorkers {
			t.Errorf("n=%d: NewWorker called %d times, want %d", tc.n, factories.Load(), tc.wantWorkers)
		}
	}
}

func TestEncodeBoundsWorkers(t *testing.T) {
	snap, _ := TakeSnapshot(towerAt(1), 1)
	var active, peak atomic.Int64
	f := worker(func(context.Context, int, int) error {
		a := active.Add(1)
		for p := peak.Load(); a > p && !peak.CompareAndSwap(p, a); p = peak.Load() {
		}
		time.Sleep(200 * time.Microsecond)
		active.Add(-1)
		return nil
	})
	if _, err := Encode(context.Background(), snap, 60, testDim, Options{Workers: 3, ShardSize: 1, NewWorker: f}); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p < 1 || p > 3 {
		t.Errorf("peak concurrent EncodeFunc calls = %d, want 1..3", p)
	}
}

func TestEncodeErrors(t *testing.T) {
	snap, _ := TakeSnapshot(towerAt(4), 4)
	boom := errors.New("boom")
	short := func(Snapshot) (EncodeFunc, error) {
		return func(_ context.Context, lo, hi int) ([]float32, error) { return make([]float32, (hi-lo)*testDim-1), nil }, nil
	}
	tests := []struct {
		name string
		opts Options
		is   error
		want string
	}{
		{"encoder fails", Options{Workers: 2, ShardSize: 4, NewWorker: worker(func(_ context.Context, lo, _ int) error {
			if lo == 8 {
				return boom
			}
			return nil
		})}, boom, "encode rows 8..11 for step 4"},
		{"factory fails", Options{Workers: 2, NewWorker: func(Snapshot) (EncodeFunc, error) { return nil, boom }}, boom, "worker"},
		{"nil encoder", Options{Workers: 1, NewWorker: func(Snapshot) (EncodeFunc, error) { return nil, nil }}, nil, "nil EncodeFunc"},
		{"short output", Options{Workers: 1, ShardSize: 5, NewWorker: short}, nil, "rows 0..4 for step 4"},
		{"no factory", Options{Workers: 1}, nil, "NewWorker is nil"},
		{"no workers", Options{Workers: 0, NewWorker: worker(nil)}, nil, "workers 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			got, err := Encode(context.Background(), snap, 20, testDim, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("Encode = %d values, error %v; want an error containing %q (is %v)", len(got), err, tc.want, tc.is)
			}
			settle(t, base)
		})
	}
}

func TestEncodeShortOutputNamesCounts(t *testing.T) {
	snap, _ := TakeSnapshot(towerAt(4), 4)
	short := func(Snapshot) (EncodeFunc, error) {
		return func(_ context.Context, lo, hi int) ([]float32, error) { return make([]float32, 3), nil }, nil
	}
	_, err := Encode(context.Background(), snap, 2, testDim, Options{Workers: 1, NewWorker: short})
	if err == nil || !strings.Contains(err.Error(), "got 3 values, want 1 rows × dim 4") {
		t.Fatalf("error %v, want it to name 3 values for 1 row × dim 4", err)
	}
}

func TestEncodeCancelled(t *testing.T) {
	snap, _ := TakeSnapshot(towerAt(4), 4)
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	f := worker(func(ctx context.Context, lo, _ int) error {
		if calls.Add(1) == 3 {
			cancel()
		}
		return nil
	})
	_, err := Encode(ctx, snap, 100, testDim, Options{Workers: 1, ShardSize: 1, NewWorker: f})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped after 3 of 100 shards") {
		t.Fatalf("error %v, want context.Canceled after 3 of 100 shards", err)
	}
	settle(t, base)
}
