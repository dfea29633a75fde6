package experiment

import "github.com/ragtrain/ragtrain/checkpoints"

// Selection is model selection on a dev metric during training: the best value so far and its
// step, and early stopping after Patience evaluations in a row without a gain (the patience
// rule of Keras' and Hugging Face's EarlyStopping callbacks). Higher values are better; a tie
// is no gain, so the earlier step is kept.
type Selection struct {
	Patience  int     // evaluations without a gain before stopping; 0: never stop
	Best      float64 // the best value so far
	BestStep  int     // the step it was evaluated at; 0: nothing evaluated yet
	NoGain    int     // evaluations since BestStep
	StoppedAt int     // the step of the evaluation that ran out of patience; 0: not stopped
}

// Observe records value v of the evaluation after step steps. better reports a new best (the
// first evaluation always is); stop reports that this is the Patience-th evaluation in a row
// without one, the step then recorded in StoppedAt.
func (s *Selection) Observe(step int, v float64) (better, stop bool) {
	if s.BestStep == 0 || v > s.Best {
		s.Best, s.BestStep, s.NoGain = v, step, 0
		return true, false
	}
	s.NoGain++
	if s.Patience > 0 && s.NoGain >= s.Patience {
		s.StoppedAt = step
		return false, true
	}
	return false, false
}

// The checkpoints.TrainerState counters a Selection is saved in.
const (
	CounterBestStep = "select_best_step"
	CounterNoGain   = "select_evals_without_gain"
	CounterStopped  = "select_stopped_at"
)

// Record writes the selection into a checkpoint's trainer state (nothing before the first
// evaluation): the best value as BestMetric under metric's name, the rest as counters.
func (s *Selection) Record(ts *checkpoints.TrainerState, metric string) {
	if s.BestStep == 0 {
		return
	}
	ts.BestMetric, ts.BestMetricName = s.Best, metric
	if ts.Counters == nil {
		ts.Counters = map[string]int{}
	}
	ts.Counters[CounterBestStep] = s.BestStep
	if s.NoGain > 0 {
		ts.Counters[CounterNoGain] = s.NoGain
	}
	if s.StoppedAt > 0 {
		ts.Counters[CounterStopped] = s.StoppedAt
	}
}

// RestoreSelection is the Selection a checkpoint's trainer state recorded for metric (an empty
// one when it recorded none, or another metric's), with patience.
func RestoreSelection(ts checkpoints.TrainerState, metric string, patience int) Selection {
	s := Selection{Patience: patience}
	if ts.BestMetricName == metric {
		s.Best, s.BestStep = ts.BestMetric, ts.Counters[CounterBestStep]
		s.NoGain, s.StoppedAt = ts.Counters[CounterNoGain], ts.Counters[CounterStopped]
	}
	return s
}
