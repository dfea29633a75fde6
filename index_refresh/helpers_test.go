package indexrefresh

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
)

// The test "document tower" has one weight that training sets to the step number, so every
// index version carries its step in its vectors: row i of the version encoded at step w is
// [w, i, 1, 0]. The query [1000, 1, 0, 0] scores row i at 1000·w + i and [1000, -1, 0, 0] at
// 1000·w - i, both exact in float32 for w < 16000, so a hit's score tells which version and
// row produced it, and a list mixing two versions is caught.
const testDim = 4

var (
	qUp   = []float32{1000, 1, 0, 0}
	qDown = []float32{1000, -1, 0, 0}
)

func testIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("d%03d", i)
	}
	return ids
}

// towerAt returns the test tower with its weight set to step.
func towerAt(step int) []*model.Param {
	return []*model.Param{
		f32Param("doc.w", []int{1}, float32(step)),
		f32Param("doc.b", []int{2, 3}, 0.5, -1, 2, 0, 0.125, 3),
	}
}

func setStep(params []*model.Param, step int) { params[0].Value.Data().([]float32)[0] = float32(step) }

func hashAt(t testing.TB, step int) string {
	t.Helper()
	h, err := HashParams(towerAt(step))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func versionVecs(w float32, lo, hi int) []float32 {
	v := make([]float32, 0, (hi-lo)*testDim)
	for i := lo; i < hi; i++ {
		v = append(v, w, float32(i), 1, 0)
	}
	return v
}

// worker returns a factory whose encoders read doc.w from the snapshot on every call (so a
// snapshot that shared the training weights would produce a mixed index) after calling hook,
// which may block, sleep or fail.
func worker(hook func(ctx context.Context, lo, hi int) error) WorkerFactory {
	return func(snap Snapshot) (EncodeFunc, error) {
		p := snap.Param("doc.w")
		if p == nil {
			return nil, fmt.Errorf("no doc.w in snapshot")
		}
		return func(ctx context.Context, lo, hi int) ([]float32, error) {
			if hook != nil {
				if err := hook(ctx, lo, hi); err != nil {
					return nil, err
				}
			}
			return versionVecs(p.Value.Data().([]float32)[0], lo, hi), nil
		}, nil
	}
}

// newAt0 returns a Refresher over n rows serving the version of step 0.
func newAt0(t *testing.T, n int, opts Options) *Refresher {
	t.Helper()
	r, err := New(testIDs(n), testDim, versionVecs(0, 0, n), Version{Step: 0, ParamHash: hashAt(t, 0)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkHits fails unless hits are the top len(hits) rows of version v for the query with
// sign +1 (qUp) or -1 (qDown), in order, with exact scores.
func checkHits(n int, hits []index.Hit, v Version, sign int) error {
	for rank, h := range hits {
		row := n - 1 - rank
		if sign < 0 {
			row = rank
		}
		want := index.Hit{DocID: fmt.Sprintf("d%03d", row), Score: float64(1000*v.Step + sign*row)}
		if h != want {
			return fmt.Errorf("version %v: hit %d = %+v, want %+v", v, rank, h, want)
		}
	}
	return nil
}

// settle waits up to 5 s for the goroutine count to fall back to base.
func settle(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines left running, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// eventLog records OnEvent calls.
type eventLog struct {
	mu sync.Mutex
	ev []Event
}

func (l *eventLog) add(e Event) { l.mu.Lock(); l.ev = append(l.ev, e); l.mu.Unlock() }

// summary lists the events as "kind@version-step".
func (l *eventLog) summary() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s []string
	for _, e := range l.ev {
		s = append(s, fmt.Sprintf("%v@%d", e.Kind, e.Version.Step))
	}
	return s
}
