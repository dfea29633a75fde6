package fusion

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/index/ann"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/knnlm"
)

// Kind is the recipe kind of this package.
const Kind = "fusion"

// kind = "fusion": where the garden reader meets the evidence, compared on the garden world
// (issue 41).
//
//  1. the world, tokenizer and GPT-2 reader of kind rag (ragkit.NewGardenRun): the reader is
//     pretrained on the pretraining corpus less its last knnlm.held_out_docs documents (the
//     held-out perplexity text) and fine-tuned to answer from "<ctx> passage </ctx> question"
//     as rag's; checkpoint start/;
//  2. the kNN-LM datastore over the same packed corpus rows the reader was pretrained on (one
//     pair per position: the key the input of the last layer's FFN, the value the next token),
//     and a second, small one over the encyclopedia's gardener entries;
//  3. held-out perplexity of the reader and of the kNN-LM per λ (λ chosen on the dev half,
//     reported on the test half), split by the target token's frequency in the datastore;
//  4. the test gardeners' questions: closed-book, rag@1 (BM25's top entry in context), knnlm
//     (the corpus datastore), knnlm_entries (corpus + entries) and rag@1+knnlm, λ chosen per
//     system on the dev questions (the training gardeners' questions the reader was not
//     fine-tuned on), exact match by popularity bucket, with searches and seconds per question;
//  5. the knowledge update without training: world.updated_fraction of the gardeners move
//     (garden.World.Updated); BM25 and the entries datastore are rebuilt from the updated world
//     (the corpus, hence the corpus datastore, is unchanged), no weight changes, and each system
//     is asked the moved test gardeners' town: <system>/moved_new_town, /moved_old_town;
//  6. fid (fid.go): Fusion-in-Decoder and in-context RAG, each trained from scratch, at k = each
//     of fid.ks (with fid.only, this stage alone);
//  7. retro (retro.go): a RETRO-style model and its closed-book twin, each trained from scratch
//     (with retro.only, this stage alone).
//
// Every stage's metrics go to progress.json as it ends; a resumed run (-resume) loads start/
// and skips the stages done. Everything goes to metrics.json and prints as a table.
func init() {
	experiment.Register(Kind, runFusion, configs.KindSpec{Sections: ragkit.Sections(), Losses: []string{"infonce"}, Own: []configs.Section{section, fidSection, retroSection}})
}

// progressFile holds the finished stages' metrics of a run.
const progressFile = "progress.json"

type progress struct {
	Done    []string           `json:"done"`
	Metrics map[string]float64 `json:"metrics"`
}

func readProgress(dir string) (*progress, error) {
	p := &progress{Metrics: map[string]float64{}}
	b, err := bounded.ReadFile(filepath.Join(dir, progressFile), bounded.RunState)
	if err != nil {
		return p, nil // none yet
	}
	if err := json.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, progressFile), err)
	}
	if p.Metrics == nil {
		p.Metrics = map[string]float64{}
	}
	return p, nil
}

func (p *progress) done(stage string) bool { return slices.Contains(p.Done, stage) }

// finish records stage and the run's metrics so far.
func (p *progress) finish(dir, stage string, m map[string]float64) error {
	p.Done = append(p.Done, stage)
	maps.Copy(p.Metrics, m)
	b, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, progressFile), b)
}

// study is what the stages share.
type study struct {
	*ragkit.GardenRun
	rec       *configs.Recipe
	o         experiment.Options
	start     time.Time
	dir       string
	fromStart bool // a resumed run whose reader is trained (ragkit.StudyStartDir)
	prog      *progress
	d         *ragkit.Data
	kc        *Config
	eng       *engine
	rows      [][]int // packed pretraining rows (the datastore's text)
	held      []string
	corpus    *knnlm.Store
	search    knnlm.Searcher // over corpus (exact or HNSW)
	entries   *knnlm.Store
	stops     []int
}

// runFusion runs a fusion recipe as named stages, methods of study: the garden world and the
// run directory, the reader (trained once, restored in a resumed run), the decoding engine, then
// the studies (perplexity, qa, swap), each resumable as a whole, and the report.
func runFusion(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	if o.ResumeDir != "" && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		return o.ResumeDir, nil
	}
	switch fid, retro := FiDOf(rec).Only, RetroOf(rec).Only; {
	case fid && retro:
		return "", fmt.Errorf("%s: fid.only and retro.only are both true: one stage alone at a time", rec.Path)
	case retro:
		return runOnly(ctx, rec, o, "retro", retroStage, func(m map[string]float64) { retroReport(o, m) })
	case fid:
		return runOnly(ctx, rec, o, "fid", fidStage, func(m map[string]float64) { fidReport(o, m, FiDOf(rec)) })
	}
	s := &study{rec: rec, o: o, start: time.Now(), kc: Of(rec)}
	defer s.close()
	for _, stage := range []func() error{
		s.open,                                 // the world, the reader and the retriever, the run directory, the stages done
		func() error { return s.reader(ctx) },  // pretrain and fine-tune the reader, or restore it
		s.engine,                               // the decoding engine and its stop tokens
		func() error { return s.studies(ctx) }, // perplexity, qa, swap: each once, resumable by stage
		s.finish,                               // costs, the report, metrics.json
	} {
		if err := stage(); err != nil {
			return s.dir, err
		}
	}
	return s.dir, nil
}

// open builds the garden run (world, tokenizer, reader, retriever, run directory), holds out
// knnlm.held_out_docs documents, packs the others into the pretraining rows and reads the
// stages an earlier segment finished.
func (s *study) open() error {
	rec, o, kc := s.rec, s.o, s.kc
	s.fromStart = o.ResumeDir != "" && experiment.HasCheckpoint(filepath.Join(o.ResumeDir, ragkit.StudyStartDir))
	run, d, dir, err := ragkit.NewGardenRun(rec, o, rec.RAG.Chunking, rec.RAG.HeldOutQuestions, s.fromStart, "")
	s.GardenRun, s.d, s.dir = run, d, dir
	if err != nil {
		return err
	}
	if kc.HeldOutDocs*2 > len(d.Docs) {
		return fmt.Errorf("knnlm.held_out_docs = %d: more than half of the %d pretraining documents", kc.HeldOutDocs, len(d.Docs))
	}
	s.held = d.Docs[len(d.Docs)-kc.HeldOutDocs:]
	var cut int
	s.rows, cut = run.Format.PackDocuments(d.Docs[:len(d.Docs)-kc.HeldOutDocs])
	if s.prog, err = readProgress(dir); err != nil {
		return err
	}
	maps.Copy(run.Metrics, s.prog.Metrics)
	if !s.fromStart {
		fmt.Fprintf(o.Out, "reader: %d parameters; corpus less %d held-out documents packed into %d rows of <= %d tokens (%d documents cut)\n",
			ragkit.CountParams(run.Reader.Params()), kc.HeldOutDocs, len(s.rows), run.Format.L, cut)
	}
	return nil
}

// reader pretrains the reader on the rows and fine-tunes it on the questions, saving both
// models in ragkit.StudyStartDir; a resumed run restores them from there.
func (s *study) reader(ctx context.Context) error {
	run := s.GardenRun
	all := append(run.Reader.Params(), run.Encoder.Params()...)
	startDir := filepath.Join(s.dir, ragkit.StudyStartDir)
	if s.fromStart {
		ck, err := checkpoints.Load(startDir)
		if err != nil {
			return err
		}
		if err := experiment.SetParams(all, ck.Params); err != nil {
			return fmt.Errorf("%s: %w", ck.Dir, err)
		}
		fmt.Fprintf(s.o.Out, "resume: the reader in %s; stages done: %s\n", ck.Dir, strings.Join(s.prog.Done, ", "))
		return nil
	}
	if err := run.PretrainReader(ctx, s.rows); err != nil {
		return err
	}
	if err := run.FinetuneReader(ctx, s.rows, s.d.FinetuneQ, s.d.Gold); err != nil {
		return err
	}
	if err := run.Save(startDir, all, run.RAGConfig, nil, checkpoints.TrainerState{Phase: "start", Seed: run.Seed, LogBytes: run.Log.Size()}); err != nil {
		return err
	}
	s.prog.Done = nil
	return s.prog.finish(s.dir, "reader", run.Metrics)
}

// engine builds the decoding engine and the stop tokens ([SEP] and ".").
func (s *study) engine() error {
	var err error
	if s.eng, err = newEngine(s.Reader, s.Format.L, s.o.Progress); err != nil {
		return err
	}
	dot, ok := s.Tok.ID(".")
	if !ok {
		return fmt.Errorf("the tokenizer has no token %q", ".")
	}
	s.stops = []int{s.Format.Sep, dot}
	return nil
}

// studies runs the perplexity, qa and swap studies an earlier segment did not finish, each
// after the datastores are built, recording each as done when it ends.
func (s *study) studies(ctx context.Context) error {
	stages := []struct {
		name string
		f    func() error
	}{{"perplexity", s.perplexity}, {"qa", s.qa}, {"swap", s.swap}, {"fid", func() error { return fidStage(ctx, s.GardenRun, s.d) }},
		{"retro", func() error { return retroStage(ctx, s.GardenRun, s.d) }}}
	for _, st := range stages {
		if s.prog.done(st.name) {
			fmt.Fprintf(s.o.Out, "%s: done in an earlier segment\n", st.name)
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.datastores(); err != nil {
			return err
		}
		t0 := time.Now()
		if err := st.f(); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
		s.Metrics["time/"+st.name+"_seconds"] = time.Since(t0).Seconds()
		if err := s.prog.finish(s.dir, st.name, s.Metrics); err != nil {
			return err
		}
	}
	return nil
}

// finish adds the costs, prints the report and writes metrics.json.
func (s *study) finish() error {
	s.costs()
	s.Metrics["run/seconds"] = time.Since(s.start).Seconds()
	s.report()
	fmt.Fprintf(s.o.Out, "run: %.0fs\n", time.Since(s.start).Seconds())
	return experiment.WriteMetrics(s.dir, s.Metrics)
}

// close releases the engine and closes the log.
func (s *study) close() {
	if s.eng != nil {
		s.eng.Close()
	}
	if s.GardenRun != nil && s.Log != nil {
		s.Log.Close()
	}
}

// entryRows are the gardener entries of w, each "[CLS] entry [SEP]" cut to L tokens.
func (s *study) entryRows(w *garden.World) [][]int {
	var rows [][]int
	for i := range w.Entries {
		if e := &w.Entries[i]; e.Gardener >= 0 {
			rows = append(rows, s.docRow(e.Text()))
		}
	}
	return rows
}

// docRow is "[CLS] text [SEP]" cut to L tokens.
func (s *study) docRow(text string) []int {
	ids := append(append([]int{s.Format.Cls}, s.Tok.Encode(text)...), s.Format.Sep)
	return ids[:min(len(ids), s.Format.L)]
}

// datastores builds the corpus and entries datastores once.
func (s *study) datastores() error {
	if s.corpus != nil {
		return nil
	}
	t0 := time.Now()
	var err error
	if s.corpus, err = s.eng.buildStore(s.rows, s.kc.Precision, "datastore corpus"); err != nil {
		return err
	}
	s.Metrics["cost/datastore_build_seconds"] = time.Since(t0).Seconds()
	s.search = s.corpus
	if s.kc.Search == "hnsw" {
		t0 = time.Now()
		h, err := knnlm.NewHNSW(s.corpus, ann.Params{M: s.kc.HNSWM, EfConstruction: s.kc.HNSWEfConstruction, EfSearch: s.kc.HNSWEfSearch, Seed: s.Seed})
		if err != nil {
			return err
		}
		s.search = h
		s.Metrics["cost/hnsw_build_seconds"] = time.Since(t0).Seconds()
	}
	if s.entries, err = s.eng.buildStore(s.entryRows(s.World), s.kc.Precision, "datastore entries"); err != nil {
		return err
	}
	fmt.Fprintf(s.Opts.Out, "datastore: %d pairs over the corpus (%s keys, %.1f MiB, %s search), %d over the gardener entries, in %.0fs\n",
		s.corpus.Len(), s.kc.Precision, float64(s.search.Bytes())/(1<<20), s.kc.Search, s.entries.Len(), time.Since(t0).Seconds())
	return nil
}

// lambdaKey names a λ in metric keys.
func lambdaKey(l float64) string { return fmt.Sprintf("lambda=%g", l) }

// freqBins split the held-out target tokens by their count among the datastore's values.
var freqBins = []struct {
	name   string
	lo, hi int
}{{"<100", 0, 100}, {"100-999", 100, 1000}, {"1000-9999", 1000, 10000}, {">=10000", 10000, 1 << 62}}

// perplexity scores the held-out documents (dev half, test half) under the reader and the
// kNN-LM for every λ, chooses λ on dev, and splits the test perplexity by token frequency.
func (s *study) perplexity() error {
	half := len(s.held) / 2
	seqs := make([][]int, len(s.held))
	for i, t := range s.held {
		seqs[i] = s.docRow(t)
	}
	dev, err := s.eng.score("perplexity dev", seqs[:half], s.search, s.kc.K)
	if err != nil {
		return err
	}
	test, err := s.eng.score("perplexity test", seqs[half:], s.search, s.kc.K)
	if err != nil {
		return err
	}
	T, m := s.kc.Temperature, s.Metrics
	best := s.kc.Lambda
	for _, l := range s.kc.Lambdas {
		pd, pt := perplexity(dev, T, l, nil), perplexity(test, T, l, nil)
		m["knnlm/ppl_dev."+lambdaKey(l)], m["knnlm/ppl_test."+lambdaKey(l)] = pd, pt
		if s.kc.Lambda == -1 && (best == -1 || pd < m["knnlm/ppl_dev."+lambdaKey(best)]) {
			best = l
		}
	}
	m["knnlm/ppl_lambda"] = best
	m["closedbook/ppl_test"] = perplexity(test, T, 0, nil)
	m["knnlm/ppl_test"] = perplexity(test, T, best, nil)
	m["perplexity/dev_tokens"], m["perplexity/test_tokens"] = float64(len(dev)), float64(len(test))
	count := map[int]int{}
	for _, v := range s.corpus.Values {
		count[int(v)]++
	}
	for _, b := range freqBins {
		keep := func(t int) bool { return count[t] >= b.lo && count[t] < b.hi }
		n := 0
		for _, t := range test {
			if keep(t.Target) {
				n++
			}
		}
		m["perplexity/test_tokens.freq"+b.name] = float64(n)
		if n > 0 {
			m["closedbook/ppl_test.freq"+b.name] = perplexity(test, T, 0, keep)
			m["knnlm/ppl_test.freq"+b.name] = perplexity(test, T, best, keep)
		}
	}
	fmt.Fprintf(s.Opts.Out, "perplexity on %d held-out test tokens: reader %.3f, kNN-LM %.3f at λ = %g (chosen on %d dev tokens)\n",
		len(test), m["closedbook/ppl_test"], m["knnlm/ppl_test"], best, len(dev))
	return nil
}

// system is one way of answering: a context per question (nil: closed-book) and a datastore
// (nil: the reader alone).
type system struct {
	name  string
	rag   bool
	store knnlm.Searcher
}

func (s *study) systems() []system {
	return []system{
		{name: "closedbook"}, {name: "rag@1", rag: true}, {name: "knnlm", store: s.search},
		{name: "knnlm_entries", store: knnlm.Concat{s.search, s.entries}}, {name: "rag@1+knnlm", rag: true, store: s.search},
	}
}

// top1 is BM25's top chunk of each question (its trained phrasing) among the chunks.
func top1(ev *ragkit.Eval, chunks []garden.Chunk, p index.BM25Params) []string {
	ids, texts := make([]string, len(chunks)), make([]string, len(chunks))
	row := map[string]int{}
	for i, c := range chunks {
		ids[i], texts[i], row[c.ID] = c.ID, c.Text, i
	}
	bm := index.NewBM25(ids, texts, p)
	out := make([]string, len(ev.Qs))
	for i, q := range ev.Qs {
		if h := bm.Search(q.Trained, 1); len(h) > 0 {
			out[i] = texts[row[h[0].DocID]]
		}
	}
	return out
}

// answer decodes the questions of ev with the system at λ; correct[i] is exact match against
// ev.Answers (the value's tokens, then a stop token).
func (s *study) answer(ev *ragkit.Eval, sys system, ctx []string, lambda float64, cache *cachedSearch, m memo, what string) ([]decoded, []bool, int, error) {
	if !sys.rag {
		ctx = make([]string, len(ev.Qs))
	}
	prompts, err := s.prompts(ev, ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	res, steps, err := s.eng.decode(what, prompts, cache, m, s.kc.Temperature, lambda, s.Rec.Reader.MaxAnswerTokens, s.stops)
	if err != nil {
		return nil, nil, 0, err
	}
	correct := make([]bool, len(res))
	for i, r := range res {
		correct[i] = r.Stopped && slices.Equal(r.Tokens, ev.Answers[i])
	}
	return res, correct, steps, nil
}

// prompts are the questions of ev asked with the contexts ctx ("" for none) in the format of
// knnlm.prompts; a "cloze" context is cut from its start to leave room for the cloze and the
// answer.
func (s *study) prompts(ev *ragkit.Eval, ctx []string) ([][]int, error) {
	if s.kc.Prompts == "reader" {
		p, _, err := ev.ReaderPrompts(ctx, ev.All)
		return p, err
	}
	out := make([][]int, len(ev.Qs))
	for i, q := range ev.Qs {
		cl := s.Tok.Encode(q.Cloze)
		room := s.Format.L - 1 - len(cl) - s.Rec.Reader.MaxAnswerTokens - 1
		if room < 0 {
			return nil, fmt.Errorf("cloze %q is %d tokens, too long for reader.max_length = %d", q.Cloze, len(cl), s.Format.L)
		}
		var c []int
		if ctx[i] != "" {
			c = s.Tok.Encode(ctx[i])
		}
		c = c[max(0, len(c)-room):]
		out[i] = append(append([]int{s.Format.Cls}, c...), cl...)
	}
	return out, nil
}

func mean(b []bool) float64 {
	return float64(ragkit.CountTrue(b)) / float64(max(len(b), 1))
}

// qa evaluates every system on the test questions, λ chosen on the dev questions.
func (s *study) qa() error {
	ev := s.NewEval(s.d)
	dd := *s.d
	dd.TestQ = s.d.JointQ
	devEv := s.NewEval(&dd)
	chunks, err := s.World.Chunks(s.Rec.RAG.Chunking)
	if err != nil {
		return err
	}
	bm := index.BM25Params{K1: s.Rec.Index.K1, B: s.Rec.Index.B}
	devCtx := top1(devEv, chunks, bm)
	for _, sys := range s.systems() {
		lambda := 0.0
		if sys.store != nil {
			lambda = s.kc.Lambda
			cache, m := newCachedSearch(sys.store, s.kc.K), memo{}
			bestEM := -1.0
			for _, l := range s.kc.Lambdas {
				_, c, _, err := s.answer(devEv, sys, devCtx, l, cache, m, fmt.Sprintf("dev %s λ=%g", sys.name, l))
				if err != nil {
					return err
				}
				em := mean(c)
				s.Metrics[sys.name+"/dev_EM."+lambdaKey(l)] = em
				if s.kc.Lambda == -1 && em > bestEM {
					lambda, bestEM = l, em
				}
			}
			s.Metrics[sys.name+"/lambda"] = lambda
		}
		t0 := time.Now()
		var ctx []string
		if sys.rag {
			ctx = top1(ev, chunks, bm)
		}
		var cache *cachedSearch
		if sys.store != nil {
			cache = newCachedSearch(sys.store, s.kc.K)
		}
		res, correct, steps, err := s.answer(ev, sys, ctx, lambda, cache, nil, "test "+sys.name)
		if err != nil {
			return err
		}
		sec := time.Since(t0).Seconds()
		ev.AddRow(sys.name, correct, nil, ev.All)
		n := float64(len(res))
		m := s.Metrics
		m["cost/"+sys.name+"/seconds_per_question"] = sec / n
		m["cost/"+sys.name+"/tokens_per_question"] = float64(steps) / n
		searches := 0.0
		if sys.rag {
			searches++ // one BM25 search
		}
		if cache != nil && lambda > 0 {
			searches += float64(cache.Searches) / n
		}
		m["cost/"+sys.name+"/searches_per_question"] = searches
		fmt.Fprintf(s.Opts.Out, "%s: EM %.3f at λ = %g (%.1f tokens, %.2f searches, %.3fs per question)\n", sys.name, m[sys.name+"/EM"], lambda, float64(steps)/n, searches, sec/n)
	}
	return nil
}

// swap moves world.updated_fraction of the gardeners, rebuilds BM25 and the entries datastore
// from the updated world, and asks every system the moved test gardeners' towns.
func (s *study) swap() error {
	upd, err := s.World.Updated(s.Rec.World.UpdatedFraction, uint64(s.Rec.Seed))
	if err != nil {
		return err
	}
	if len(upd.Questions) != len(s.World.Questions) {
		return fmt.Errorf("updated world: %d questions, want %d", len(upd.Questions), len(s.World.Questions))
	}
	dd := *s.d
	dd.TestQ = nil
	for _, i := range s.d.TestQ {
		if q := &upd.Questions[i]; q.ID != s.World.Questions[i].ID {
			return fmt.Errorf("updated world: question %d is %s, was %s", i, q.ID, s.World.Questions[i].ID)
		} else if q.Previous != "" {
			dd.TestQ = append(dd.TestQ, i)
		}
	}
	if len(dd.TestQ) == 0 {
		return fmt.Errorf("no test gardener moved (world.updated_fraction = %g)", s.Rec.World.UpdatedFraction)
	}
	old := s.World
	s.World = upd
	ev := s.NewEval(&dd)
	s.World = old
	t0 := time.Now()
	chunks, err := upd.Chunks(s.Rec.RAG.Chunking)
	if err != nil {
		return err
	}
	ctx := top1(ev, chunks, index.BM25Params{K1: s.Rec.Index.K1, B: s.Rec.Index.B})
	s.Metrics["swap/bm25_rebuild_seconds"] = time.Since(t0).Seconds()
	t0 = time.Now()
	entries, err := s.eng.buildStore(s.entryRows(upd), s.kc.Precision, "datastore entries (updated)")
	if err != nil {
		return err
	}
	s.Metrics["swap/entries_rebuild_seconds"] = time.Since(t0).Seconds()
	withEntry := 0
	for _, q := range ev.Qs {
		if q.HasEntry {
			withEntry++
		}
	}
	s.Metrics["swap/moved_questions"], s.Metrics["swap/moved_with_entry"] = float64(len(ev.Qs)), float64(withEntry)
	fmt.Fprintf(s.Opts.Out, "swap: %d moved test gardeners (%d with an entry); BM25 and the entries datastore rebuilt from the updated world, weights untouched\n", len(ev.Qs), withEntry)
	for _, sys := range s.systems() {
		if sys.name == "knnlm_entries" {
			sys.store = knnlm.Concat{s.search, entries}
		}
		var cache *cachedSearch
		if sys.store != nil {
			cache = newCachedSearch(sys.store, s.kc.K)
		}
		res, correct, _, err := s.answer(ev, sys, ctx, s.Metrics[sys.name+"/lambda"], cache, nil, "swap "+sys.name)
		if err != nil {
			return err
		}
		hits, oldHits, n := map[string]int{}, 0, map[string]int{}
		for i, q := range ev.Qs {
			n[q.Bucket]++
			if correct[i] {
				hits[q.Bucket]++
			}
			if res[i].Stopped && slices.Equal(res[i].Tokens, s.Tok.Encode(q.Previous)) {
				oldHits++
			}
		}
		for _, b := range garden.Buckets {
			if n[b] > 0 {
				s.Metrics[sys.name+"/moved_new_town."+b] = float64(hits[b]) / float64(n[b])
			}
		}
		s.Metrics[sys.name+"/moved_new_town"] = mean(correct)
		s.Metrics[sys.name+"/moved_old_town"] = float64(oldHits) / float64(len(ev.Qs))
	}
	return nil
}

// costs records the model's and the datastores' bytes.
func (s *study) costs() {
	m := s.Metrics
	m["cost/reader_bytes"] = float64(4 * ragkit.CountParams(s.Reader.Params()))
	if s.corpus == nil { // every stage was done in an earlier segment
		return
	}
	m["cost/datastore_pairs"] = float64(s.corpus.Len())
	m["cost/datastore_bytes"] = float64(s.search.Bytes())
	m["cost/datastore_float16_bytes"] = float64(int64(s.corpus.Len()) * int64(2*s.corpus.Dim+8))
	m["cost/datastore_over_model"] = m["cost/datastore_bytes"] / m["cost/reader_bytes"]
	m["cost/entries_bytes"] = float64(s.entries.Bytes())
	m["cost/knnlm/searches_per_token"] = 1
}

// report prints the table of the systems.
func (s *study) report() {
	m := s.Metrics
	cols := append(slices.Clone(garden.Buckets), "all", "λ", "moved→new", "moved→old", "s/question", "searches/q")
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s", "system")
	for _, c := range cols {
		fmt.Fprintf(&b, " %10s", c)
	}
	b.WriteString("\n")
	for _, sys := range s.systems() {
		fmt.Fprintf(&b, "%-14s", sys.name)
		for _, k := range []string{"/EM.0", "/EM.1-2", "/EM.3-9", "/EM.10-29", "/EM.>=30", "/EM", "/lambda", "/moved_new_town", "/moved_old_town"} {
			fmt.Fprintf(&b, " %10.3f", m[sys.name+k])
		}
		fmt.Fprintf(&b, " %10.4f %10.2f\n", m["cost/"+sys.name+"/seconds_per_question"], m["cost/"+sys.name+"/searches_per_question"])
	}
	fmt.Fprintf(s.Opts.Out, "\nexact match on the test questions by pretraining mentions of the fact; moved: the %g moved test gardeners' towns after the swap:\n%s",
		m["swap/moved_questions"], b.String())
	fmt.Fprintf(s.Opts.Out, "held-out perplexity: reader %.3f, kNN-LM %.3f (λ = %g); reader %.0f bytes, datastore %.0f bytes (%.1f×)\n",
		m["closedbook/ppl_test"], m["knnlm/ppl_test"], m["knnlm/ppl_lambda"], m["cost/reader_bytes"], m["cost/datastore_bytes"], m["cost/datastore_over_model"])
}
