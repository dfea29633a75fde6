package retriever

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/crossenc"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/internal/teachercache"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Distillation (loss.teacher): a cross-encoder scores every (query, passage) pair the training
// batches hold, once, before training; the scores are cached in the run directory by (query id,
// passage id, teacher hash), so that a resumed run, or a rerun naming the file in
// loss.teacher_cache, scores nothing again.

// TeacherScoresFile is the run directory's cache of the teacher's scores, in the format of
// internal/teachercache (a header with the teacher's sha256, the pairs count and the content's
// sha256, then one "query-id TAB passage-id TAB score" line per pair). A file of another
// teacher, cut short, edited, or holding a pair twice is refused.
const TeacherScoresFile = "teacher_scores.tsv"

// teacherScores are a teacher's scores of the training pairs.
type teacherScores struct {
	hash   string
	scores map[[2]string]float32 // (query id, passage id) -> the cross-encoder's score
	// bm25 holds beta * bm25(q, p) of every training pair when loss.teacher_bm25_weight = beta
	// > 0 (nil otherwise); score adds it to the cross-encoder's.
	bm25 map[[2]string]float32
	// Scored counts the pairs the teacher scored in this process, Cached those read from a
	// cache file.
	Scored, Cached int
}

// score returns the teacher's score of (qid, pid): the cross-encoder's, plus beta * bm25 with
// loss.teacher_bm25_weight.
func (t *teacherScores) score(qid, pid string) (float32, error) {
	k := [2]string{qid, pid}
	s, ok := t.scores[k]
	if !ok {
		return 0, fmt.Errorf("teacher: no score of query %q, passage %q (the pairs were collected from the batches of train.steps)", qid, pid)
	}
	if t.bm25 != nil {
		s += t.bm25[k]
	}
	return s, nil
}

// pairBM25 returns beta * bm25(q, p) of every pair: each query's BM25 scores over the whole
// corpus (0 for a passage that shares no term with it), as the run's BM25 system scores them.
func pairBM25(bm25 *index.BM25, ds *data.Dataset, pairs [][2]string, beta float64) (map[[2]string]float32, error) {
	byQuery := map[string]map[string]float64{}
	out := make(map[[2]string]float32, len(pairs))
	for _, p := range pairs {
		s, ok := byQuery[p[0]]
		if !ok {
			text, ok := ds.Queries.Text(p[0])
			if !ok {
				return nil, fmt.Errorf("teacher: query %q of a training batch is not in the queries", p[0])
			}
			s = map[string]float64{}
			for _, h := range bm25.Search(text, bm25.Len()) {
				s[h.DocID] = h.Score
			}
			byQuery[p[0]] = s
		}
		out[p] = float32(beta * s[p[1]])
	}
	return out, nil
}

// batchScores is the B x (1+N) PairBatch.Teacher of a sampler batch: row i the scores of query
// i's positive, then of its N hard negatives.
func (t *teacherScores) batchScores(b sampler.Batch) ([]float32, error) {
	k := 1 + b.N
	out := make([]float32, len(b.QueryIDs)*k)
	for i, q := range b.QueryIDs {
		ids := append([]string{b.PositiveIDs[i]}, b.NegativeIDs[i*b.N:(i+1)*b.N]...)
		for j, d := range ids {
			s, err := t.score(q, d)
			if err != nil {
				return nil, err
			}
			out[i*k+j] = s
		}
	}
	return out, nil
}

// trainingPairs lists the distinct (query id, passage id) pairs of the batches of steps
// 0..steps-1, in first-seen order: each query with its positive and its hard negatives
// (random fills included: batches are a function of the step).
func trainingPairs(smp *sampler.Sampler, steps int) ([][2]string, error) {
	seen := map[[2]string]bool{}
	var pairs [][2]string
	add := func(q, d string) {
		if k := [2]string{q, d}; !seen[k] {
			seen[k] = true
			pairs = append(pairs, k)
		}
	}
	for step := range steps {
		b, _, err := smp.Batch(step)
		if err != nil {
			return nil, err
		}
		for i, q := range b.QueryIDs {
			add(q, b.PositiveIDs[i])
			for _, d := range b.NegativeIDs[i*b.N : (i+1)*b.N] {
				add(q, d)
			}
		}
	}
	return pairs, nil
}

// loadTeacher opens loss.teacher as a cross-encoder (export.OpenCrossEncoder: a reranker run's
// model directory or checkpoint, an export, a BertForSequenceClassification directory) with its
// tokenizer, and returns the pair length it scores at: the directory's max_length, else
// tokenizer.max_length, at most its positions.
func loadTeacher(rec *configs.Recipe) (*model.CrossEncoder, *tokenize.Tokenizer, int, *export.CrossEncoderDir, error) {
	dir := rec.Loss.Teacher
	d, err := export.OpenCrossEncoder(dir)
	if err != nil {
		return nil, nil, 0, nil, rec.KeyError("loss.teacher", "%v", err)
	}
	if d.Body {
		return nil, nil, 0, nil, rec.KeyError("loss.teacher", "%s holds an encoder without a cross-encoder's head (%s layout); name a trained reranker (<run>/reranker-<loss>) or an exported cross-encoder", dir, d.Layout)
	}
	tok, _, err := d.LoadTokenizer()
	if err != nil {
		return nil, nil, 0, nil, rec.KeyError("loss.teacher", "%v", err)
	}
	m, err := model.NewCrossEncoder(d.Encoder, 0)
	if err != nil {
		return nil, nil, 0, nil, rec.KeyError("loss.teacher", "%s: %v", dir, err)
	}
	if err := d.Init(m); err != nil {
		return nil, nil, 0, nil, rec.KeyError("loss.teacher", "%v", err)
	}
	L := d.MaxLength
	if L == 0 {
		L = rec.Tokenizer.MaxLength
	}
	return m, tok, min(L, d.Encoder.MaxPosition), d, nil
}

// teacherHash is the SHA-256 (hex) of what decides a teacher's scores: its parameters (names,
// shapes, float32 values in model order), its tokenizer (as tokenizer.json) and the pair length.
func teacherHash(m *model.CrossEncoder, tok *tokenize.Tokenizer, L int) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "ragtrain teacher v1\nmax_length %d\n", L)
	tmp, err := os.MkdirTemp("", "teacher-tok-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := tok.Save(filepath.Join(tmp, "tokenizer.json")); err != nil {
		return "", err
	}
	b, err := bounded.ReadFile(filepath.Join(tmp, "tokenizer.json"), bounded.Tokenizer)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "tokenizer %d\n", len(b))
	h.Write(b)
	model.WriteParams(h, m.Params())
	return hex.EncodeToString(h.Sum(nil)), nil
}

// prepareTeacher returns the teacher's scores of every training pair of the run's batches:
// those in the run directory's TeacherScoresFile (a resumed run) or in loss.teacher_cache are
// read, the others scored in one batched pass, and the union written back to both files. It
// prints the counts (pairs, scored, cached).
func prepareTeacher(rec *configs.Recipe, smp *sampler.Sampler, ds *data.Dataset, passages []string, bm25 *index.BM25, dir string, o experiment.Options) (*teacherScores, error) {
	pairs, err := trainingPairs(smp, rec.Train.Steps)
	if err != nil {
		return nil, err
	}
	m, tok, L, d, err := loadTeacher(rec)
	if err != nil {
		return nil, err
	}
	hash, err := teacherHash(m, tok, L)
	if err != nil {
		return nil, err
	}
	t := &teacherScores{hash: hash, scores: map[[2]string]float32{}}
	files := []string{filepath.Join(dir, TeacherScoresFile)}
	if c := rec.Loss.TeacherCache; c != "" {
		files = append(files, c)
	}
	for _, f := range files {
		if _, err := teachercache.Read(f, hash, t.scores); err != nil {
			return nil, err
		}
	}
	var missing [][2]string
	for _, p := range pairs {
		if _, ok := t.scores[p]; ok {
			t.Cached++
		} else {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		qs, ps := make([]string, len(missing)), make([]string, len(missing))
		for i, p := range missing {
			qs[i], _ = ds.Queries.Text(p[0])
			j, ok := ds.Corpus.Index(p[1])
			if !ok {
				return nil, fmt.Errorf("teacher: passage %q of a training batch is not in the corpus", p[1])
			}
			ps[i] = passages[j]
		}
		start := time.Now()
		scores, cut, err := crossenc.Pairs(m, tok, qs, ps, L, o.Progress, "teacher: score pairs")
		if err != nil {
			return nil, fmt.Errorf("teacher: %w", err)
		}
		tokenize.ReportTruncation(o.Out, "teacher pairs", L, tokenize.TruncPart{Name: "pairs", Count: &cut})
		for i, p := range missing {
			if s := scores[i]; math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
				return nil, fmt.Errorf("teacher: score %v of query %q, passage %q", s, p[0], p[1])
			}
			t.scores[p] = scores[i]
		}
		t.Scored = len(missing)
		fmt.Fprintf(o.Out, "teacher: scored %d pairs in %.1fs\n", len(missing), time.Since(start).Seconds())
	}
	if t.Scored > 0 || t.Cached > 0 {
		for _, f := range files {
			if err := teachercache.Write(f, teachercache.Header{TeacherSHA256: hash, MaxLength: L, Teacher: d.Dir}, t.scores); err != nil {
				return nil, err
			}
		}
	}
	fmt.Fprintf(o.Out, "teacher: %s (%s layout, sha256 %s, pairs of %d tokens): %d training pairs, %d scored, %d cached (%s)\n",
		d.Dir, d.Layout, hash[:12], L, len(pairs), t.Scored, t.Cached, TeacherScoresFile)
	if beta := rec.Loss.TeacherBM25Weight; beta > 0 {
		if t.bm25, err = pairBM25(bm25, ds, pairs, beta); err != nil {
			return nil, err
		}
		zero := 0
		for _, v := range t.bm25 {
			if v == 0 {
				zero++
			}
		}
		fmt.Fprintf(o.Out, "teacher: score = cross-encoder + %g x BM25 (loss.teacher_bm25_weight); %d of %d pairs share no term (BM25 0)\n", beta, zero, len(pairs))
	}
	return t, nil
}
