package retriever

import (
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/sampler"
)

// Teacher is a cross-encoder teacher's scores of a run's training pairs (loss.teacher), cached
// in the run directory's TeacherScoresFile and in loss.teacher_cache: the retriever's
// distillation cache, shared with the other kinds that distil a teacher (colbert).
type Teacher struct{ t *teacherScores }

// PrepareTeacher scores (or reads back from the caches) every (query, passage) pair of the
// batches of steps 0..train.steps-1 of smp, as a retriever run does.
func PrepareTeacher(rec *configs.Recipe, smp *sampler.Sampler, ds *data.Dataset, passages []string, bm25 *index.BM25, dir string, o experiment.Options) (*Teacher, error) {
	t, err := prepareTeacher(rec, smp, ds, passages, bm25, dir, o)
	if err != nil {
		return nil, err
	}
	return &Teacher{t}, nil
}

// BatchScores returns the teacher's scores of b, B×(1+M): each query's positive, then its
// negatives.
func (t *Teacher) BatchScores(b sampler.Batch) ([]float32, error) { return t.t.batchScores(b) }
