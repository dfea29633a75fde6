package ragkit

import (
	"context"
	"fmt"

	"github.com/ragtrain/ragtrain/experiment/dense"
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
	x         *Index // texts and rows of the datastore
	params    []*model.Param
	phase     string
	lg        *trainer.Log
	ctx       context.Context

	base                         indexrefresh.Stats // the starting encoding, not counted
	staleSum, staleMax, searches int
}

// encodeBatch is the batch of a refresh worker's encoding graph.
const encodeBatch = 64

// NewLiveIndex encodes the datastore with the current passage tower of s.enc (at step) and
// returns the refresher serving it. The refresh is cancelled when ctx ends; Close ends every
// goroutine.
func (s *Study) NewLiveIndex(ctx context.Context, phase string, mode indexrefresh.Mode, step int) (*LiveIndex, error) {
	rec, x := s.Rec, s.Index
	L := rec.Tokenizer.MaxLength
	batch := s.Tok.EncodeBatch(x.Texts, L) // read-only, shared by every worker
	cfg, shared, seed := s.RAGConfig.Encoder, rec.Model.SharedTowers, s.Seed
	onEncode := s.Opts.OnEncode
	newWorker := func(snap indexrefresh.Snapshot) (indexrefresh.EncodeFunc, error) {
		// A private tower into which the snapshot is copied: training never touches it.
		m, err := model.NewBiEncoder(cfg, shared, seed)
		if err != nil {
			return nil, err
		}
		if err := snap.CopyTo(m.Passage.Params()); err != nil {
			return nil, err
		}
		runner, err := model.NewEncoderRunner(m.Passage, encodeBatch, L)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, lo, hi int) ([]float32, error) {
			if onEncode != nil {
				onEncode()
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			v, err := runner.Encode(batch.IDs[lo*L:hi*L], batch.Mask[lo*L:hi*L], batch.Types[lo*L:hi*L], hi-lo)
			if err == nil && x.cosine {
				dense.NormalizeRows(v, x.Dim)
			}
			return v, err
		}, nil
	}
	li := &LiveIndex{x: x, params: s.Encoder.Passage.Params(), phase: phase, lg: s.Log, ctx: ctx}
	ir := rec.IndexRefresh
	opts := indexrefresh.Options{Mode: mode, Every: ir.RefreshEvery, Workers: ir.Workers, ShardSize: 8 * encodeBatch,
		NewWorker: newWorker, OnEvent: li.event}
	if mode == indexrefresh.ModeAsync {
		opts.SwapAfter = ir.SwapAfter
	}
	var err error
	if li.Refresher, err = indexrefresh.NewEncoded(ctx, x.ids, x.Dim, li.params, step, opts); err != nil {
		return nil, err
	}
	li.base = li.Refresher.Stats()
	return li, nil
}

// event logs a refresh's start, swap or failure.
func (li *LiveIndex) event(e indexrefresh.Event) {
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

// Retrieve is TaskOptions.Retrieve: at step, refresh the index if due, then return each
// question's top K rows from one index version and log that version and its staleness. A
// refresh cut short because the run is being interrupted leaves the old index serving and the
// step goes on (the loop then checkpoints and stops).
func (li *LiveIndex) Retrieve(k int) func(step int, qv []float32, texts []string) ([][]int, error) {
	return func(step int, qv []float32, _ []string) ([][]int, error) {
		if _, err := li.Refresher.MaybeRefresh(li.ctx, step, li.params); err != nil && li.ctx.Err() == nil {
			return nil, err
		}
		hits, v := li.Refresher.SearchBatch(qv, k)
		stale := step - v.Step
		li.staleSum += stale
		li.staleMax = max(li.staleMax, stale)
		li.searches++
		if err := li.lg.Write(map[string]any{"phase": li.phase, "step": step, "index_step": v.Step, "index_hash": v.ParamHash, "staleness": stale}); err != nil {
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

// Close ends the refresher (cancelling a refresh in flight and waiting for its goroutines) and
// returns its counters as metrics.
func (li *LiveIndex) Close() map[string]float64 {
	li.Refresher.Close()
	st := li.Refresher.Stats()
	m := map[string]float64{
		"encoding_seconds": (st.Encoding - li.base.Encoding).Seconds(), "waited_seconds": (st.Waited - li.base.Waited).Seconds(),
		"refreshes": float64(st.Refreshes), "refresh_skipped": float64(st.Skipped), "refresh_failed": float64(st.Failed),
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
