// Package sampler turns judged queries into training batches for a bi-encoder.
//
//   - Mine builds one Example per (training query, relevant document) and picks its hard
//     negatives from a first-stage ranking (e.g. BM25): ranks [lo, hi] of the query's list,
//     minus every document judged relevant to the query, "top" or "random" (the recipe's
//     [sampler] hard_negatives, negative_window, negative_strategy). A short window is counted
//     in MineStats, never hidden.
//   - Sampler deals batches of B examples with N hard negatives each, deterministically from
//     (seed, step): epoch e is a permutation from PCG(seed, e) packed into floor(E/B) batches,
//     step s is batch s mod K of epoch s / K. No query appears twice in a batch, and no document
//     of the batch is judged relevant to a query it would be a negative for (in-batch false
//     negatives): an example that would break this goes to a later batch of the epoch, or is
//     left over, and Stats counts it. Where judgements overlap too much for that (CISI: no
//     batch of 16 packs), Options.MaskFalseNegatives lets false negatives in and zeroes them in
//     Batch.Mask (B × (B + B·N)) for the loss to ignore. ValidateBatch checks these invariants.
//   - CropPairs makes unsupervised (query, positive) pairs by independent cropping of corpus
//     documents (Contriever; Izacard et al. 2022), deterministically from (seed, step).
//
// Shapes: a Batch holds B query ids, B positive ids and B·N negative ids (row-major by
// example) with their texts, and a B × (B + B·N) candidate mask; with in-batch negatives each
// query scores B + B·N candidates (all positives, then all negatives).
//
// The package does not tokenize, rank or load files: it takes query texts, corpus ids and texts,
// qrels (query id -> doc id -> score, score > 0 relevant) and rankings as ranked doc ids (callers
// pass index.Hit lists' DocIDs), so it depends on no other package of the module.
package sampler
