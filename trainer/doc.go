// Package trainer is the one training loop every recipe kind shares (nanoGPT style: read it top
// to bottom): for each step it asks a Task for a forward/backward pass, clips the gradients by
// global norm, applies AdamW with a warm-up + decay learning-rate schedule, logs to log.jsonl,
// draws a progress bar and calls the checkpoint hook.
//
// It knows nothing of models, losses or data: a Task exposes its parameters and gradients as
// flat float32 slices. It is not the place for sampling (package sampler) or evaluation
// (package eval).
package trainer
