// Package losses holds the training objectives of the toolkit as Gorgonia graphs: each loss
// takes *gorgonia.Node inputs (float32 or float64) and returns a scalar loss node, which the
// caller differentiates with gorgonia.Grad and runs on a TapeMachine (BindDualValues on the
// parameters).
//
// Retriever losses: InfoNCE and InfoNCEMasked (contrastive, in-batch plus hard negatives),
// MatryoshkaInfoNCE (InfoNCE on truncated prefixes of the embeddings, Kusupati et al. 2022),
// Pairwise (RankNet), Listwise (ListNet), Pointwise (binary cross-entropy). Distillation from a
// teacher ranker's scores: MarginMSE (Hofstätter et al. 2020) and KLDistill (listwise KL
// between tempered softmaxes); their registered specs set Spec.Teacher and read
// Inputs.Teacher. Retrieval-augmented
// generation: RAGSequence, RAGToken, RAGSequenceFull, RAGSequenceInBatch (in-batch negatives,
// with BatchRetrievalLogits) and the posterior RAGPosterior (Lewis et
// al. 2020), and RePlugKL, the LM-supervised retriever loss of RePlug (Shi et al. 2023);
// RetrievalLogits computes their retrieval logits s from query and candidate embeddings.
// Atlas' retriever objectives (Izacard et al. 2022), the reader as the teacher and no passage
// label: AttentionDistill (the reader's attention mass per passage, AttentionMass), EMDR2 (the
// marginal likelihood with the reader's likelihoods fixed, RAG-Sequence's retriever side),
// PerplexityDistill (RePlugKL by Atlas' name) and LeaveOneOutDistill (the reader's loss with each
// passage left out, LeaveOneOut, MixtureLoss); registered as "attention_distill", "emdr2",
// "perplexity_distill" and "loo_distill", Lists losses reading Inputs.Teacher.
// Late interaction (ColBERT, multi-vector): MaxSim and MaxSimLists score token embeddings
// (Khattab & Zaharia 2020, eq. 3) with token masks; ColBERTContrastive and ColBERTKLDistill,
// registered as "colbert_contrastive" and "colbert_kl_distill" (Batch LateInteraction), are
// PyLate's Contrastive and Distillation losses over them (testdata/colbert.json).
// Learned sparse retrieval (SPLADE, Formal et al. 2021): FLOPS (Paria et al. 2020) with its
// quadratic warm-up FlopsWarmup, SpladeLoss ("splade": InfoNCE on the sparse dot product plus
// FLOPS on queries and passages), and its distillation from a teacher's scores with the same
// FLOPS terms, SpladeMarginMSE ("splade_margin_mse", SPLADE++'s, Formal et al. 2022) and
// SpladeKLDistill ("splade_kl_distill"), Contrastive losses reading Inputs.Teacher
// (testdata/splade.json, testdata/splade_distill.json).
// Language modelling: TokenNLL, the token cross-entropy with a target mask (a reader's
// pretraining, and its fine-tuning with the loss on answer tokens only).
//
// Tensor shapes in the docs use B batch, K candidates per query, N passages in a batch,
// T target tokens, H hidden size.
//
// Softmax, log-softmax and log-sum-exp are computed by this package's own custom ops
// (max-subtracted, analytic gradients, float64 inside even for float32 graphs), not by
// Gorgonia's SoftMax. The custom ops support symbolic differentiation only (gorgonia.Grad);
// they do not implement ADOp, so a LispMachine cannot differentiate through them. Labels,
// masks and teacher distributions are validated when the graph runs: a bad value (a negative
// label, a mask that hides a positive, ...) makes the machine fail with an error naming the
// loss and the element.
//
// Reusing a graph across steps: a TapeMachine adds each run's gradients into the dual values
// bound with BindDualValues, so the caller zeroes them after reading (as Gorgonia's solvers do);
// TestGraphReuse shows the pattern.
//
// Not here: sampling negatives, mining, batching (package sampler), encoders and similarity
// heads with parameters (package model), optimisers (package trainer). Every loss is checked
// against testdata/losses.json, PyTorch autograd values in float64.
package losses
