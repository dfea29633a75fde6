package experiment

import (
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
)

// TestSelectionStopsAtTheExpectedStep: on a constructed dev curve (evaluations every 10 steps)
// the best is the first strict maximum, a tie is no gain, and patience p stops at the p-th
// evaluation in a row without a gain.
func TestSelectionStopsAtTheExpectedStep(t *testing.T) {
	curve := []float64{0.30, 0.35, 0.34, 0.35, 0.36, 0.33, 0.36, 0.30, 0.20, 0.40}
	for _, c := range []struct {
		patience           int
		stoppedAt, best    int // 0: runs to the end
		bestValue          float64
		noGainAtTheLastRun int
	}{
		{patience: 0, stoppedAt: 0, best: 100, bestValue: 0.40},
		{patience: 1, stoppedAt: 30, best: 20, bestValue: 0.35}, // 0.34 < 0.35
		{patience: 2, stoppedAt: 40, best: 20, bestValue: 0.35}, // 0.34, then the tie 0.35
		{patience: 3, stoppedAt: 80, best: 50, bestValue: 0.36}, // 0.33, the tie 0.36, 0.30
		{patience: 4, stoppedAt: 90, best: 50, bestValue: 0.36}, // ... 0.20
		{patience: 5, stoppedAt: 0, best: 100, bestValue: 0.40}, // 0.40 at 100 comes in time
		{patience: 9, stoppedAt: 0, best: 100, bestValue: 0.40},
	} {
		s := Selection{Patience: c.patience}
		stopped := 0
		for i, v := range curve {
			step := 10 * (i + 1)
			better, stop := s.Observe(step, v)
			if better != (step == s.BestStep) {
				t.Errorf("patience %d step %d: better = %v with BestStep %d", c.patience, step, better, s.BestStep)
			}
			if stop {
				stopped = step
				break
			}
		}
		if stopped != c.stoppedAt || s.StoppedAt != c.stoppedAt || s.BestStep != c.best || s.Best != c.bestValue {
			t.Errorf("patience %d: stopped at %d (StoppedAt %d), best %v at %d; want stop at %d, best %v at %d",
				c.patience, stopped, s.StoppedAt, s.Best, s.BestStep, c.stoppedAt, c.bestValue, c.best)
		}
	}
}

// TestSelectionRecordRestore: the state a checkpoint records continues the same run: a
// selection restored after any evaluation stops where the uninterrupted one does.
func TestSelectionRecordRestore(t *testing.T) {
	curve := []float64{0.30, 0.35, 0.34, 0.34, 0.33, 0.36}
	whole := Selection{Patience: 3}
	for i, v := range curve {
		if _, stop := whole.Observe(i+1, v); stop {
			break
		}
	}
	if whole.StoppedAt != 5 || whole.BestStep != 2 {
		t.Fatalf("uninterrupted: %+v, want a stop at 5 with the best at 2", whole)
	}
	for cut := 1; cut <= 5; cut++ {
		s := Selection{Patience: 3}
		for i := range cut {
			s.Observe(i+1, curve[i])
		}
		var ts checkpoints.TrainerState
		s.Record(&ts, "nDCG@10")
		r := RestoreSelection(ts, "nDCG@10", 3)
		if r != s {
			t.Fatalf("after %d evaluations: restored %+v, recorded %+v", cut, r, s)
		}
		for i := cut; i < len(curve) && r.StoppedAt == 0; i++ {
			r.Observe(i+1, curve[i])
		}
		if r != whole {
			t.Errorf("resumed after %d evaluations: %+v, uninterrupted %+v", cut, r, whole)
		}
	}
	// Another metric's state is not this one's.
	var ts checkpoints.TrainerState
	whole.Record(&ts, "MAP")
	if r := RestoreSelection(ts, "nDCG@10", 3); r != (Selection{Patience: 3}) {
		t.Errorf("restored from another metric: %+v", r)
	}
}
