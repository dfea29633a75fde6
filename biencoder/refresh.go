package biencoder

import (
	"context"

	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// PassageWorkers makes the workers that re-encode a corpus for a live passage index
// (index_refresh.Options.NewWorker): each worker copies the refresh's snapshot of the passage
// tower into a private bi-encoder, which training never touches, and encodes rows lo..hi-1 of
// Batch, B rows a graph run, into [hi-lo, H] float32 vectors, L2-normalised when Cosine.
type PassageWorkers struct {
	Cfg    model.EncoderConfig // the trained bi-encoder's tower configuration
	Shared bool                // whether its towers are shared (model.NewBiEncoder)
	Seed   uint64              // the seed the private copies are built with (their weights are replaced)
	// Batch is the corpus tokenized once to Batch.L tokens; read-only, shared by every worker.
	Batch  tokenize.Batch
	B      int  // rows a graph run
	Cosine bool // L2-normalise each vector (cosine similarity)
	// OnEncode, when set, is called before every shard is encoded (tests that interrupt a run
	// mid-refresh).
	OnEncode func()
}

// New is the index_refresh.WorkerFactory of w.
func (w PassageWorkers) New(snap indexrefresh.Snapshot) (indexrefresh.EncodeFunc, error) {
	m, err := model.NewBiEncoder(w.Cfg, w.Shared, w.Seed)
	if err != nil {
		return nil, err
	}
	if err := snap.CopyTo(m.Passage.Params()); err != nil {
		return nil, err
	}
	L := w.Batch.L
	runner, err := model.NewEncoderRunner(m.Passage, w.B, L)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, lo, hi int) ([]float32, error) {
		if w.OnEncode != nil {
			w.OnEncode()
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, err := runner.Encode(w.Batch.IDs[lo*L:hi*L], w.Batch.Mask[lo*L:hi*L], w.Batch.Types[lo*L:hi*L], hi-lo)
		if err == nil && w.Cosine {
			NormalizeRows(v, m.Passage.Dim())
		}
		return v, err
	}, nil
}
