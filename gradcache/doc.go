// Package gradcache runs gradient caching (GradCache; Gao et al. 2021, "Scaling Deep
// Contrastive Learning Batch Size under Memory Limited Setup", section 3.2) for the training
// tasks that encode the two sides of a batch (queries and passages) M rows at a time:
// biencoder.CachedBiTask (pooled vectors, [rows, H]) and colbert.CachedTask (token vectors,
// [rows, L, Dim]). It holds the three passes of a step, the chunk graphs they run and the summed
// gradients the optimizer reads; the tasks keep their batches, losses and length buckets. It is
// not a task itself and builds no model.
//
// A step (Cache.Step)
//
//  1. encodes each side's chunks with forward-only graphs, keeping only the side's vectors E
//     in the loss graph's input node (a chunk's vectors fill its rows; positions past the
//     chunk's length are set to 0);
//  2. runs the loss graph, which computes the loss over those inputs and G = dL/dE;
//  3. runs each chunk again through a training graph whose loss is sum(E_chunk ⊙ G_chunk), whose
//     parameter gradients are the chunk's share of dL/dθ by the chain rule, and sums them.
//
// Each chunk's dropout masks come from a PCG seeded with (Side.Seed, step<<24 | chunk), the same
// in passes 1 and 3, so the re-forward reproduces the cached vectors bit for bit (Step fails
// otherwise).
package gradcache
