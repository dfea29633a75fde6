package study

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/ragjoint"

	"github.com/ragtrain/ragtrain/biencoder"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/trainer"
)

// LiveIndex is the datastore index while the passage tower trains: an index_refresh.Refresher
// re-encodes the datastore every index_refresh.refresh_every steps with a snapshot of the
// passage tower and swaps the new index in (async, sync or never). Every search is answered by
// one index version, and every training step writes that version and its staleness to
// log.jsonl: {"phase", "step", "index_step", "index_hash", "staleness"}; refreshes that start,
// swap in or fail write {"phase", "step", "refresh", "version_step", "index_hash",
// "encoding_seconds"}.
type LiveIndex struct {
	Refresher *indexrefresh.Refresher
	x         *ragjoint.Index // texts and rows of the datastore
	params    []*model.Param
	phase     string
	lg        *trainer.Log
	ctx       context.Context

	base                         indexrefresh.Stats // the starting encoding, not counted
	staleSum, staleMax, searches int
	before                       indexrefresh.Stats // counts of earlier segments (resumed)

	// The passage tower's values behind the serving index and behind a refresh in flight,
	// kept so that a checkpoint can hold the index the next step searches (State, Tensors).
	mu               sync.Mutex
	serving, pending *towerCopy
	mode             indexrefresh.Mode
	swapAfter        int
}

// towerCopy is the passage tower's values at a step.
type towerCopy struct {
	step   int
	params []*model.Param
}

func copyTower(params []*model.Param, step int) *towerCopy {
	c := &towerCopy{step: step, params: make([]*model.Param, len(params))}
	for i, p := range params {
		c.params[i] = &model.Param{Name: p.Name, Value: p.Value.Clone().(*tensor.Dense)}
	}
	return c
}

// encodeBatch is the batch of a refresh worker's encoding graph.
const encodeBatch = 64

// NewLiveIndex encodes the datastore with the current passage tower of s.enc (at step) and
// returns the refresher serving it. The refresh is cancelled when ctx ends; Close ends every
// goroutine.
func (s *Study) NewLiveIndex(ctx context.Context, phase string, mode indexrefresh.Mode, step int) (*LiveIndex, error) {
	rec, x := s.Rec, s.Index
	L := rec.Tokenizer.MaxLength
	workers := biencoder.PassageWorkers{Cfg: s.RAGConfig.Encoder, Shared: rec.Model.SharedTowers, Seed: s.Seed,
		Batch: s.Tok.EncodeBatch(x.Texts, L), B: encodeBatch, Cosine: x.Cosine, OnEncode: s.Opts.OnEncode}
	li := &LiveIndex{x: x, params: s.Encoder.Passage.Params(), phase: phase, lg: s.Log, ctx: ctx, mode: mode, swapAfter: rec.IndexRefresh.SwapAfter}
	ir := rec.IndexRefresh
	opts := indexrefresh.Options{Mode: mode, Every: ir.RefreshEvery, Workers: ir.Workers, ShardSize: 8 * encodeBatch,
		NewWorker: workers.New, OnEvent: li.event}
	if mode == indexrefresh.ModeAsync {
		opts.SwapAfter = ir.SwapAfter
	}
	// A resumed phase serves the index its uninterrupted run searched at this step, encoded from
	// the passage tower the checkpoint kept for it.
	from, fromStep := li.params, step
	if ck := s.Resuming(phase); ck != nil {
		saved, vstep, err := li.restore(ck)
		if err != nil {
			return nil, err
		}
		if saved != nil {
			from, fromStep = saved, vstep
		}
	}
	var err error
	if li.Refresher, err = indexrefresh.NewEncoded(ctx, x.IDs, x.Dim, from, fromStep, opts); err != nil {
		return nil, err
	}
	li.serving = copyTower(from, fromStep)
	li.base = li.Refresher.Stats()
	return li, nil
}

// The live index's checkpoint counters and tensors.
const (
	liveVersionStep = "live_index.version_step"
	liveStaleSum    = "live_index.staleness_sum"
	liveStaleMax    = "live_index.staleness_max"
	liveSearches    = "live_index.searches"
	liveRefreshes   = "live_index.refreshes"
	liveSkipped     = "live_index.refresh_skipped"
	liveFailed      = "live_index.refresh_failed"
	livePrefix      = "live_index." // + a passage tower parameter's name
)

// State adds to a checkpoint after done steps the live index's counters and the step of the
// index that step done searches (phase State).
//
// A refresh still in flight that is due to swap in by step done is saved as swapped (its tower
// serves the resumed run, which never swaps it in), so it is counted among the refreshes here,
// as the uninterrupted run counts it when it swaps.
func (li *LiveIndex) State(done int, ts *checkpoints.TrainerState) {
	c := li.next(done)
	st := li.Refresher.Stats()
	li.mu.Lock()
	swapping := c == li.pending
	li.mu.Unlock()
	refreshes := li.before.Refreshes + st.Refreshes
	if swapping {
		refreshes++
	}
	if ts.Counters == nil {
		ts.Counters = map[string]int{}
	}
	for k, v := range map[string]int{liveVersionStep: c.step, liveStaleSum: li.staleSum, liveStaleMax: li.staleMax, liveSearches: li.searches,
		liveRefreshes: refreshes, liveSkipped: li.before.Skipped + st.Skipped, liveFailed: li.before.Failed + st.Failed} {
		ts.Counters[k] = v
	}
}

// Tensors are the passage tower's values behind the index that step done searches (phase
// Tensors).
func (li *LiveIndex) Tensors(done int) []checkpoints.RawTensor {
	c := li.next(done)
	out := make([]checkpoints.RawTensor, len(c.params))
	for i, p := range c.params {
		out[i] = checkpoints.F32Raw(checkpoints.Tensor{Name: livePrefix + p.Name, Shape: p.Value.Shape().Clone(), Data: p.Value.Data().([]float32)})
	}
	return out
}

// next is the tower behind the index step done will search: a refresh in flight swaps in
// there when it is due by then (sync refreshes swap within their step; async ones at
// swap_after steps after they start). Only with index_refresh.swap_after >= 1 (or sync) is
// that known in advance, so only then does a resumed run search exactly the same indexes.
func (li *LiveIndex) next(done int) *towerCopy {
	li.mu.Lock()
	defer li.mu.Unlock()
	if p := li.pending; p != nil && (li.mode == indexrefresh.ModeSync || (li.swapAfter > 0 && done >= p.step+li.swapAfter)) {
		return p
	}
	return li.serving
}

// restore reads a checkpoint's live index state: the counters, and the passage tower and step
// of the index to serve (nil when the checkpoint has none, from before this state existed).
func (li *LiveIndex) restore(ck *checkpoints.Checkpoint) ([]*model.Param, int, error) {
	c := ck.Trainer.Counters
	vstep, ok := c[liveVersionStep]
	if !ok {
		return nil, 0, nil
	}
	li.staleSum, li.staleMax, li.searches = c[liveStaleSum], c[liveStaleMax], c[liveSearches]
	li.before = indexrefresh.Stats{Refreshes: c[liveRefreshes], Skipped: c[liveSkipped], Failed: c[liveFailed]}
	byName := map[string]checkpoints.RawTensor{}
	for _, t := range ck.State {
		if strings.HasPrefix(t.Name, livePrefix) {
			byName[strings.TrimPrefix(t.Name, livePrefix)] = t
		}
	}
	out := make([]*model.Param, len(li.params))
	for i, p := range li.params {
		t, ok := byName[p.Name]
		if !ok {
			return nil, 0, fmt.Errorf("%s: the live index state lacks %s%s", ck.Dir, livePrefix, p.Name)
		}
		v, err := t.Float32()
		if err != nil || len(v) != p.Value.Shape().TotalSize() {
			return nil, 0, fmt.Errorf("%s: tensor %s%s: %d values (%v), want %v", ck.Dir, livePrefix, p.Name, len(v), err, p.Value.Shape())
		}
		out[i] = &model.Param{Name: p.Name, Value: tensor.New(tensor.WithShape(p.Value.Shape().Clone()...), tensor.WithBacking(v))}
	}
	return out, vstep, nil
}

// event logs a refresh's start, swap or failure, and keeps the passage tower behind it (a
// refresh starts inside MaybeRefresh, before the step trains, so li.params are its snapshot's).
func (li *LiveIndex) event(e indexrefresh.Event) {
	li.mu.Lock()
	switch e.Kind {
	case indexrefresh.Started:
		li.pending = copyTower(li.params, e.Step)
	case indexrefresh.Swapped:
		if li.pending != nil {
			li.serving, li.pending = li.pending, nil
		}
	case indexrefresh.Failed:
		li.pending = nil
	}
	li.mu.Unlock()
	line := map[string]any{"phase": li.phase, "step": e.Step, "refresh": e.Kind.String(),
		"version_step": e.Version.Step, "index_hash": e.Version.ParamHash}
	if e.Kind != indexrefresh.Started {
		line["encoding_seconds"] = e.Encoding.Seconds()
	}
	if e.Err != nil {
		line["error"] = e.Err.Error()
	}
	_ = li.lg.Write(line)
}

// Retrieve is ragjoint.TaskOptions.Retrieve: at step, refresh the index if due, then return each
// question's top K rows from one index version and log that version and its staleness. A
// refresh cut short because the run is being interrupted leaves the old index serving and the
// step goes on (the loop then checkpoints and stops).
func (li *LiveIndex) Retrieve(k int) func(step int, qv []float32, texts []string) ([][]int, error) {
	return func(step int, qv []float32, _ []string) ([][]int, error) {
		if _, err := li.Refresher.MaybeRefresh(li.ctx, step, li.params); err != nil && li.ctx.Err() == nil {
			return nil, err
		}
		hits, v := li.Refresher.SearchBatch(qv, k)
		if err := li.served(step, v); err != nil {
			return nil, err
		}
		out := make([][]int, len(hits))
		for i, hs := range hits {
			if len(hs) < k {
				return nil, fmt.Errorf("index %s: %d hits for a question, want K = %d", v, len(hs), k)
			}
			for _, h := range hs {
				out[i] = append(out[i], li.x.Row[h.DocID])
			}
		}
		return out, nil
	}
}

// RetrieveBM25 is Retrieve with BM25's top depth of each question rescored by the serving
// index's vectors (the label-free candidates of RePlug and Atlas, kept fresh as the passage
// tower trains): the top k by that score, ties by datastore row. Under async refresh with
// index_refresh.swap_after > 0 the index swaps only inside MaybeRefresh, so one version scores
// a whole step.
func (li *LiveIndex) RetrieveBM25(k, depth int) func(step int, qv []float32, texts []string) ([][]int, error) {
	return func(step int, qv []float32, texts []string) ([][]int, error) {
		if _, err := li.Refresher.MaybeRefresh(li.ctx, step, li.params); err != nil && li.ctx.Err() == nil {
			return nil, err
		}
		v := li.Refresher.Serving()
		out := make([][]int, len(texts))
		dim := li.x.Dim
		for i, text := range texts {
			hits := li.x.BM25.Search(text, depth)
			if len(hits) < k {
				return nil, fmt.Errorf("question %q: BM25 finds %d passages, want K = %d", text, len(hits), k)
			}
			type scored struct {
				row   int
				score float64
			}
			c := make([]scored, len(hits))
			for j, h := range hits {
				sc, _, ok := li.Refresher.Score(qv[i*dim:(i+1)*dim], h.DocID)
				if !ok {
					return nil, fmt.Errorf("index %s: passage %q not indexed", v, h.DocID)
				}
				c[j] = scored{li.x.Row[h.DocID], sc}
			}
			slices.SortStableFunc(c, func(a, b scored) int {
				switch {
				case a.score > b.score:
					return -1
				case a.score < b.score:
					return 1
				}
				return a.row - b.row
			})
			for _, e := range c[:k] {
				out[i] = append(out[i], e.row)
			}
		}
		if err := li.served(step, v); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// served counts a search at step answered by index version v and logs the version and its
// staleness (step - v.Step, in steps).
func (li *LiveIndex) served(step int, v indexrefresh.Version) error {
	stale := step - v.Step
	li.staleSum += stale
	li.staleMax = max(li.staleMax, stale)
	li.searches++
	return li.lg.Write(map[string]any{"phase": li.phase, "step": step, "index_step": v.Step, "index_hash": v.ParamHash, "staleness": stale})
}

// Close ends the refresher (cancelling a refresh in flight and waiting for its goroutines) and
// returns its counters as metrics.
func (li *LiveIndex) Close() map[string]float64 {
	li.Refresher.Close()
	st := li.Refresher.Stats()
	m := map[string]float64{
		"encoding_seconds": (st.Encoding - li.base.Encoding).Seconds(), "waited_seconds": (st.Waited - li.base.Waited).Seconds(),
		"refreshes":       float64(li.before.Refreshes + st.Refreshes),
		"refresh_skipped": float64(li.before.Skipped + st.Skipped), "refresh_failed": float64(li.before.Failed + st.Failed),
		"max_staleness": float64(li.staleMax),
	}
	if li.searches > 0 {
		m["mean_staleness"] = float64(li.staleSum) / float64(li.searches)
	}
	return m
}

// RefreshMode maps a realm system to its refresh mode.
func RefreshMode(system string) indexrefresh.Mode {
	switch system {
	case "sync":
		return indexrefresh.ModeSync
	case "off", "frozen":
		return indexrefresh.ModeOff
	}
	return indexrefresh.ModeAsync
}
