// Package study is the retriever study the kinds replug, realm and atlas run: the garden run's
// preparation up to a saved start (package ragkit), then several retrievers trained from that
// one start and compared (RunStudy, Study), the index refreshed while the passage tower trains
// (LiveIndex), and the harness of the reader-supervised objectives, RePlug and Atlas' four
// (TrainFromReader, ReaderTraining, TeacherTask).
package study
