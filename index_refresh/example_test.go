package indexrefresh_test

import (
	"context"
	"fmt"

	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/model"
	"gorgonia.org/tensor"
)

// A toy document tower with one weight w encodes passage i as [w·i, 1]. Training doubles w
// every step; the index is refreshed every 2 steps, blocking (ModeSync).
func Example() {
	w := &model.Param{Name: "doc.w", Value: tensor.New(tensor.WithShape(1), tensor.WithBacking([]float32{1}))}
	tower := []*model.Param{w}
	ids := []string{"p0", "p1", "p2"}

	// Each worker encodes with its own copy of the snapshot's weights.
	newWorker := func(snap indexrefresh.Snapshot) (indexrefresh.EncodeFunc, error) {
		mine := []*model.Param{{Name: "doc.w", Value: tensor.New(tensor.WithShape(1), tensor.Of(tensor.Float32))}}
		if err := snap.CopyTo(mine); err != nil {
			return nil, err
		}
		return func(_ context.Context, lo, hi int) ([]float32, error) {
			wv := mine[0].Value.Data().([]float32)[0]
			var out []float32
			for i := lo; i < hi; i++ {
				out = append(out, wv*float32(i), 1)
			}
			return out, nil
		}, nil
	}

	ctx := context.Background()
	r, err := indexrefresh.NewEncoded(ctx, ids, 2, tower, 0, indexrefresh.Options{
		Mode: indexrefresh.ModeSync, Every: 2, Workers: 2, NewWorker: newWorker,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()

	for step := 1; step <= 4; step++ {
		w.Value.Data().([]float32)[0] *= 2 // the optimiser step
		if _, err := r.MaybeRefresh(ctx, step, tower); err != nil {
			fmt.Println(err)
			return
		}
		hits, v := r.Search([]float32{1, 0}, 1)
		fmt.Printf("step %d: serving step %d, staleness %d, top %s %.0f\n",
			step, v.Step, r.Staleness(step), hits[0].DocID, hits[0].Score)
	}
	fmt.Println("refreshes:", r.Stats().Refreshes)
	// Output:
	// step 1: serving step 0, staleness 1, top p2 2
	// step 2: serving step 2, staleness 0, top p2 8
	// step 3: serving step 2, staleness 1, top p2 8
	// step 4: serving step 4, staleness 0, top p2 32
	// refreshes: 2
}
