package ragkit

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/ragreader"
)

// Eval evaluates readers and retrievers on the test gardeners' questions (trained
// phrasing), split by the popularity bucket of the asked fact.
type Eval struct {
	dir      string // the run directory
	Format   *ragreader.Format
	Qs       []*garden.Question // test questions
	Answers  [][]int            // the value's ids
	Gold     []string           // the first datastore chunk stating the fact; "" without an entry
	qrels    map[string]map[string]int
	maxNew   int
	progress io.Writer
	metrics  map[string]float64
	All      []bool            // every test question
	HasEntry []bool            // the test questions whose gardener has an entry
	Rows     []eval.Row        // reader table rows
	RetrRows []eval.Row        // retrieval table rows
	alsoTREC map[string]string // retrieval system -> a second name its TREC run is written under
}

// ReaderColumns are the reader table's columns: exact match per bucket, overall, confidence.
func ReaderColumns() []string {
	return append(append([]string(nil), garden.Buckets...), "all", "confidence")
}

// ReaderPrompts returns the reader prompt of every test question asked (nil where ask[i] is
// false) with context ctx[i] ("" for closed-book), and how many contexts were cut to fit.
func (e *Eval) ReaderPrompts(ctx []string, ask []bool) ([][]int, int, error) {
	prompts := make([][]int, len(e.Qs))
	cut := 0
	for i, q := range e.Qs {
		if !ask[i] {
			continue
		}
		p, c, err := e.Format.Prompt(ctx[i], ragreader.Question(q), e.maxNew+1)
		if err != nil {
			return nil, 0, err
		}
		if c {
			cut++
		}
		prompts[i] = p
	}
	return prompts, cut, nil
}

// Decode continues every non-nil prompt greedily and returns per question whether the output
// is the answer and the output's probability. A reader's answer must be exactly the value's
// tokens, then [SEP]; a cloze continuation (language model) must start with them.
func (e *Eval) Decode(r *model.Reader, name string, prompts [][]int, cloze bool) (correct []bool, conf []float64, err error) {
	const B = 64
	rr, err := model.NewReaderRunner(r, B, e.Format.L)
	if err != nil {
		return nil, nil, err
	}
	defer rr.Close()
	var batch [][]int
	var which []int
	for i, p := range prompts {
		if p != nil {
			batch = append(batch, p)
			which = append(which, i)
		}
	}
	bar := progressbar.NewOptions(len(batch), progressbar.OptionSetWriter(e.progress),
		progressbar.OptionSetDescription("eval "+name), progressbar.OptionShowCount(), progressbar.OptionSetWidth(24),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionOnCompletion(func() { fmt.Fprintln(e.progress) }))
	correct = make([]bool, len(prompts))
	conf = make([]float64, len(prompts))
	for start := 0; start < len(batch); start += B {
		end := min(start+B, len(batch))
		gens, err := rr.Greedy(batch[start:end], e.maxNew, e.Format.Sep)
		if err != nil {
			return nil, nil, err
		}
		for j, g := range gens {
			i := which[start+j]
			a := e.Answers[i]
			if cloze {
				correct[i] = len(g.Tokens) >= len(a) && slices.Equal(g.Tokens[:len(a)], a)
			} else {
				correct[i] = g.Stopped && slices.Equal(g.Tokens, a)
			}
			conf[i] = g.Confidence()
		}
		_ = bar.Add(end - start)
	}
	_ = bar.Finish()
	return correct, conf, nil
}

// addReader evaluates one reader system and records its row and metrics
// ("<name>/EM", "<name>/EM.<bucket>", "<name>/confidence").
func (e *Eval) addReader(r *model.Reader, name string, ctx []string, ask []bool) error {
	prompts, cut, err := e.ReaderPrompts(ctx, ask)
	if err != nil {
		return err
	}
	if cut > 0 {
		e.metrics[name+"/contexts_cut"] = float64(cut)
	}
	correct, conf, err := e.Decode(r, name, prompts, false)
	if err != nil {
		return err
	}
	e.AddRow(name, correct, conf, ask)
	return nil
}

// AddCloze evaluates the language model on the cloze prompts ("Ines Ronus lives in") of the
// test questions: the greedy continuation must start with the answer. Its confidence is not
// reported (the continuation runs past the answer).
func (e *Eval) AddCloze(r *model.Reader, name string) error {
	prompts := make([][]int, len(e.Qs))
	ask := make([]bool, len(e.Qs))
	for i, q := range e.Qs {
		prompts[i] = append([]int{e.Format.Cls}, e.Format.Tok.Encode(q.Cloze)...)
		ask[i] = true
	}
	correct, _, err := e.Decode(r, name, prompts, true)
	if err != nil {
		return err
	}
	e.AddRow(name, correct, nil, ask)
	return nil
}

// BucketCounts names how many test questions fall in each bucket of pretraining mentions, in
// garden.Buckets' order: "never: 3, rare: 5, ...", the count a report's table heading gives.
func (e *Eval) BucketCounts() string {
	n := map[string]int{}
	for _, q := range e.Qs {
		n[q.Bucket]++
	}
	counts := make([]string, len(garden.Buckets))
	for i, b := range garden.Buckets {
		counts[i] = fmt.Sprintf("%s: %d", b, n[b])
	}
	return strings.Join(counts, ", ")
}

// AddRow records exact match per bucket, overall and the mean confidence (conf nil: none).
func (e *Eval) AddRow(name string, correct []bool, conf []float64, ask []bool) {
	scores := map[string]float64{}
	hits, n := map[string]int{}, map[string]int{}
	var total, right int
	var confSum float64
	for i, q := range e.Qs {
		if !ask[i] {
			continue
		}
		n[q.Bucket]++
		total++
		if conf != nil {
			confSum += conf[i]
		}
		if correct[i] {
			hits[q.Bucket]++
			right++
		}
	}
	for _, b := range garden.Buckets {
		if n[b] > 0 {
			scores[b] = float64(hits[b]) / float64(n[b])
			e.metrics[name+"/EM."+b] = scores[b]
		}
	}
	if total > 0 {
		scores["all"] = float64(right) / float64(total)
		e.metrics[name+"/EM"] = scores["all"]
		if conf != nil {
			scores["confidence"] = confSum / float64(total)
			e.metrics[name+"/confidence"] = scores["confidence"]
		}
	}
	e.Rows = append(e.Rows, eval.Row{System: name, Scores: scores})
}

// AddRetrieval scores a ranking of the test questions (ids: question ids) with Recall@1 and
// Recall@5 of the passages stating the fact (questions without an entry are not judged) and
// writes it to runs/test.<name>.trec in the run directory.
func (e *Eval) AddRetrieval(name string, run eval.Run) error {
	if err := eval.WriteTREC(filepath.Join(e.dir, experiment.RunsDir, "test."+name+".trec"), run, name); err != nil {
		return err
	}
	if alias, ok := e.alsoTREC[name]; ok {
		if err := eval.WriteTREC(filepath.Join(e.dir, experiment.RunsDir, "test."+alias+".trec"), run, alias); err != nil {
			return err
		}
	}
	scores, err := eval.Evaluate(run, e.qrels, []string{"Recall@1", "Recall@5"})
	if err != nil {
		return err
	}
	for m, v := range scores {
		e.metrics[name+"/"+m] = v
	}
	e.RetrRows = append(e.RetrRows, eval.Row{System: name, Scores: scores})
	return nil
}

// denseRun ranks the test questions with the current query tower against the frozen index
// and returns the run (depth 5) and each question's top-1 passage text.
func (e *Eval) denseRun(x *ragjoint.Index, enc func([]string) ([]float32, error)) (eval.Run, []string, error) {
	texts := make([]string, len(e.Qs))
	for i, q := range e.Qs {
		texts[i] = q.Trained
	}
	qv, err := enc(texts)
	if err != nil {
		return nil, nil, err
	}
	run := eval.Run{}
	top := make([]string, len(e.Qs))
	for i, hits := range x.Flat.SearchBatch(qv, 5) {
		run[e.Qs[i].ID] = hits
		if len(hits) > 0 {
			top[i] = x.Texts[x.Row[hits[0].DocID]]
		}
	}
	return run, top, nil
}

// BM25Run ranks the test questions with BM25 (depth 5) and returns each one's top-1 text.
func (e *Eval) BM25Run(x *ragjoint.Index) (eval.Run, []string) {
	run := eval.Run{}
	top := make([]string, len(e.Qs))
	for i, q := range e.Qs {
		hits := x.BM25.Search(q.Trained, 5)
		if hits == nil {
			hits = []index.Hit{}
		}
		run[q.ID] = hits
		if len(hits) > 0 {
			top[i] = x.Texts[x.Row[hits[0].DocID]]
		}
	}
	return run, top
}

// AlsoTREC makes the test ranking of retrieval system name be written a second time, to
// runs/test.<alias>.trec under the run tag alias, when it is evaluated.
func (e *Eval) AlsoTREC(name, alias string) {
	if e.alsoTREC == nil {
		e.alsoTREC = map[string]string{}
	}
	e.alsoTREC[name] = alias
}
