// Package ragkit is the garden-world run the reader kinds share (rag, selfrag, fusion, and
// through experiment/internal/study replug, realm and atlas): the world and its datastore
// (GardenRun, NewGardenRun, Data), the preparation phases (tokenizer, reader pretraining and
// fine-tuning, retriever warm-up, joint training) and the evaluation of readers and retrievers
// (Eval). It registers no kind.
//
// The libraries it runs live outside experiment/: the reader's sequence format, training task
// and scorer in package ragreader, the joint retriever-reader task and its index in package
// ragjoint. The retriever study of replug, realm and atlas is experiment/internal/study, and the
// resume record of a rag or selfrag run is experiment/internal/ragresume; both build on ragkit.
package ragkit
