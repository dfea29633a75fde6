package indexrefresh

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// EncodeFunc returns the embeddings of corpus rows lo..hi-1, (hi-lo)×H float32 values
// row-major, computed with the weights of the Snapshot it was made for. It should return
// promptly with ctx.Err() once ctx is done. One EncodeFunc is called by one goroutine only.
type EncodeFunc func(ctx context.Context, lo, hi int) ([]float32, error)

// WorkerFactory makes the EncodeFunc of one worker for one refresh, typically by copying the
// snapshot into a private tower clone (Snapshot.CopyTo) and building a model.EncoderRunner
// over it. It is called once per worker per refresh, on that worker's goroutine, so the
// factories of one refresh run concurrently and must not share mutable state unguarded.
type WorkerFactory func(snap Snapshot) (EncodeFunc, error)

// Encode embeds corpus rows 0..n-1 with snap on min(opts.Workers, shards) goroutines and
// returns the n×dim vectors row-major. The rows are cut into shards of opts.ShardSize rows
// (default: n split into 4 shards per worker), which the workers take in turn; each worker
// gets its own EncodeFunc from opts.NewWorker. The first error (a factory or EncodeFunc error,
// or an EncodeFunc returning other than (hi-lo)·dim values) cancels the other workers and is
// returned, naming the rows; so is ctx's error when ctx ends before every shard is encoded.
// Encode returns only after every worker goroutine has ended.
func Encode(ctx context.Context, snap Snapshot, n, dim int, opts Options) ([]float32, error) {
	if n < 0 || dim < 1 {
		return nil, fmt.Errorf("index_refresh: Encode: %d rows of dim %d", n, dim)
	}
	if opts.Workers < 1 {
		return nil, fmt.Errorf("index_refresh: Encode: workers %d must be >= 1", opts.Workers)
	}
	if opts.ShardSize < 0 {
		return nil, fmt.Errorf("index_refresh: Encode: shard size %d must be >= 0", opts.ShardSize)
	}
	if opts.NewWorker == nil {
		return nil, fmt.Errorf("index_refresh: Encode: Options.NewWorker is nil")
	}
	shard := opts.ShardSize
	if shard == 0 {
		shard = max(1, (n+4*opts.Workers-1)/(4*opts.Workers))
	}
	nShards := (n + shard - 1) / shard
	out := make([]float32, n*dim)
	if nShards == 0 {
		return out, nil
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, done atomic.Int64
		once       sync.Once
		firstErr   error
		wg         sync.WaitGroup
	)
	fail := func(err error) {
		once.Do(func() { firstErr = err; cancel() })
	}
	for w := range min(opts.Workers, nShards) {
		wg.Go(func() {
			enc, err := opts.NewWorker(snap)
			if err != nil {
				fail(fmt.Errorf("index_refresh: worker %d for %s: %w", w, snap.Version(), err))
				return
			}
			if enc == nil {
				fail(fmt.Errorf("index_refresh: worker %d for %s: NewWorker returned a nil EncodeFunc", w, snap.Version()))
				return
			}
			for ctx.Err() == nil {
				s := int(next.Add(1)) - 1
				if s >= nShards {
					return
				}
				lo, hi := s*shard, min((s+1)*shard, n)
				v, err := enc(ctx, lo, hi)
				if err != nil {
					if ctx.Err() != nil { // stopped from outside: reported below with its cause
						return
					}
					fail(fmt.Errorf("index_refresh: encode rows %d..%d for %s: %w", lo, hi-1, snap.Version(), err))
					return
				}
				if len(v) != (hi-lo)*dim {
					fail(fmt.Errorf("index_refresh: encode rows %d..%d for %s: got %d values, want %d rows × dim %d",
						lo, hi-1, snap.Version(), len(v), hi-lo, dim))
					return
				}
				copy(out[lo*dim:hi*dim], v)
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if got := int(done.Load()); got != nShards {
		return nil, fmt.Errorf("index_refresh: encoding for %s stopped after %d of %d shards: %w",
			snap.Version(), got, nShards, context.Cause(ctx))
	}
	return out, nil
}
