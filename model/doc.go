// Package model holds the neural encoders of ragtrain as Gorgonia graphs:
// custom differentiable ops (embedding gather, LayerNorm, GELU, dropout,
// multi-head attention, masked pooling), the "bow" and "transformer"
// encoders, and the bi-encoder (query and passage towers) of dense retrieval.
//
// Parameters (Param) live outside graphs. A graph is built once per batch
// shape: NewBinder(g) binds each parameter used to one node of g, NewInputs
// adds the token inputs, Tower.Build adds the encoder and returns the pooled
// vectors [B,H]. The trainer adds a loss, calls gorgonia.Grad with
// Binder.Nodes(), and for every step copies a batch in with Inputs.Let, runs
// the machine, reads the gradient nodes and updates Param.Value in place.
// EncoderRunner encodes a corpus with the same parameters.
//
// Tensor layout: B sequences of L tokens are flattened to N = B*L rows,
// sequence b at rows b*L..b*L+L-1; H is the hidden size, V the vocabulary.
// Parameters are float32; every op also runs in float64 (used by the
// finite-difference tests).
//
// A node value produced by an op of this package is reused by the op at the
// next run: copy it out if it must outlive the run. Later Gorgonia ops of
// the same run may also overwrite it in place (gorgonia.Read keeps a copy).
// Graphs hold Param.Value itself: load or update weights by writing into
// its data, never by assigning a new tensor.
//
// Speed: float32 matrix products use an AVX2+FMA assembly kernel on amd64
// (sgemm.go, gonum's Sgemm elsewhere or with the build tag noasm), and the
// float32 GELU has an AVX2 kernel; element-wise ops split large tensors over
// GOMAXPROCS goroutines. float64 uses gonum and the math package.
//
// The LLaMA decoder (llama.go; Llama, LlamaConfig, read from GGUF by LoadLlamaGGUF) builds
// its training graph from the same kind of ops (RMSNorm, RoPE, SwiGLU, RepeatKV and the fused
// Attention); LlamaDecoder generates with a key/value cache in plain Go over the same
// parameters.
//
// Not here: losses (package losses), the optimiser and training loop
// (trainer), tokenization (tokenize), checkpoint files (checkpoints).
package model
