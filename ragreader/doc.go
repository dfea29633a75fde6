// Package ragreader is the garden reader's side of retrieval-augmented generation: the
// sequence format "[CLS] <ctx> passage </ctx> question cloze answer [SEP]" (Format), the
// language-modelling rows and their training task (LMRow, QARow, TextRow, Task), the frozen
// reader's scorer of answers given passages (Scorer: log-likelihoods, and the attention mass of
// Atlas' attention distillation), the seeded batch cycle (Cycle) and the reader's
// initialisation from a checkpoint directory (InitReader). It depends on no recipe kind.
package ragreader
