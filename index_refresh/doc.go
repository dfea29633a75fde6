// Package indexrefresh keeps a dense index fresh while the document tower that encoded it is
// being trained: REALM-style asynchronous index refresh (Guu et al., 2020, "REALM:
// Retrieval-Augmented Language Model Pre-Training", section 3.4 and appendix A).
//
// When both towers of a retriever are trained, the passage embeddings in the index go stale:
// they were computed with an older document tower. Every Options.Every training steps a
// Refresher copies the document tower's parameters (TakeSnapshot; training goes on mutating
// the originals), re-encodes the whole corpus with that copy on Options.Workers goroutines, and
// swaps the finished index in atomically. Searches are always answered by exactly one index
// version, never by a mix of embeddings from two versions; a refresh that fails or is
// cancelled leaves the old index serving.
//
// The folder is index_refresh (the name the design uses); the Go package is indexrefresh,
// because Go package names carry no underscores.
//
// # Use in a training loop
//
//	r, err := indexrefresh.NewEncoded(ctx, ids, H, docTower.Params(), step, indexrefresh.Options{
//		Mode: indexrefresh.ModeAsync, Every: 100, Workers: 4, NewWorker: newWorker,
//	})
//	defer r.Close()
//	for step := start; step < steps; step++ {
//		if _, err := r.MaybeRefresh(ctx, step, docTower.Params()); err != nil { ... }
//		hits, v := r.SearchBatch(queryVecs, K) // B×H queries -> B lists of K hits, one version v
//		log(step, v, r.Staleness(step))
//		... train on hits ...
//	}
//	st := r.Stats() // st.Encoding, st.Waited: the run's "time spent encoding" and "time training waited"
//
// newWorker receives the Snapshot and returns an EncodeFunc for corpus rows [lo, hi), typically
// a model.EncoderRunner over a private clone of the document tower into which the snapshot's
// values were copied with Snapshot.CopyTo. Each worker gets its own EncodeFunc, so workers never
// share a graph.
//
// # Versions
//
// Every index carries a Version: the training step whose parameters encoded it and a hash of
// those parameters (HashParams: SHA-256 over names, dtypes, shapes and values, first 16 hex
// digits). Staleness(step) = step - Serving().Step is the number of training steps the serving
// embeddings lag behind the document tower.
//
// # Modes
//
//   - ModeAsync: the refresh runs in the background; training continues on the old index and
//     the new one is swapped in when ready. A due step that finds a refresh still in flight is
//     skipped (Stats.Skipped).
//   - ModeSync: MaybeRefresh blocks until the new index serves: the baseline that async refresh
//     is compared against (same staleness pattern as REALM with zero encoding lag).
//   - ModeOff: the index built at the start is never refreshed (a frozen document index).
//
// # Determinism
//
// In ModeAsync with Options.SwapAfter = 0 the swap happens at whichever training step the
// re-encoding finishes, which depends on machine load: two runs with one seed can train on
// different index versions at the same step and are not bit-identical. Set SwapAfter = S > 0
// to make the swap step deterministic: a refresh started at step s is installed exactly at step
// s+S (MaybeRefresh at that step waits for it if it is not done yet, and that wait counts in
// Stats.Waited). ModeSync and ModeOff are deterministic.
//
// # Not for
//
// Building or searching an index from a checkpoint (package index), evaluation (package eval)
// or the training loop itself (package trainer, experiment). The refresher does not normalise
// vectors: an EncodeFunc for a cosine model returns unit vectors.
package indexrefresh
