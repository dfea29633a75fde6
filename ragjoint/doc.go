// Package ragjoint is the retriever side of joint retriever-reader training on the garden
// datastore: the index the joint tasks read (Index: passage vectors, an exact inner-product
// index and BM25), the batch of questions and their K candidates (JointBatch), the joint RAG
// task of Lewis et al. 2020 (Task, TaskOptions: RAG-sequence, RAG-token, full mass, in-batch
// negatives, both towers) and the retrieval logits and candidates of the reader-supervised
// objectives (ReaderRetrieval: Atlas' four, RePlug). It depends on no recipe kind.
package ragjoint
