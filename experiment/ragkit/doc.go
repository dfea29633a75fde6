// Package ragkit is the garden-world pipeline the reader kinds share (rag, selfrag, replug and
// realm): the world and its datastore (GardenRun, NewGardenRun, Data), the reader's sequence
// format and training tasks (ragreader.Format, rag_reader.go), the joint retriever-reader task and
// its index (ragjoint.NewTask, ragjoint.Index, rag_joint.go), the evaluation of readers and retrievers (Eval), the
// resume record of a rag or selfrag run (Progress) and the retriever study that replug and
// realm run (Study, RunStudy, LiveIndex). It registers no kind.
package ragkit
