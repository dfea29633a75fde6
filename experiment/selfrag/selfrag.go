package selfrag

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/ragresume"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/tokenize"
)

// kind = "selfrag": a reader fine-tuned with Self-RAG reflection tokens (Asai et al. 2024) on the
// garden world, and decoding driven by them.
//
//  1. generate the world of [world] (and its updated/poisoned variants) and train the
//     tokenizer, as kind = "rag" does; the datastore is chunked by entry;
//  2. pretrain the reader as a language model on the corpus (rows of reader.max_length tokens)
//     and read the Retrieve labels of the training questions off its cloze completions;
//  3. fine-tune it as a plain reader (kind "rag"'s fine-tuning, rows of selfrag.row_length):
//     the plain reader, evaluated closed-book, over BM25's top passage and over the top K
//     concatenated, and saved with its tokenizer in plain/;
//  4. add the seven reflection tokens to the tokenizer (tokenizer.json of the run is rewritten),
//     grow a copy of the reader's vocabulary (model.GrowVocab) and fine-tune it on reflective
//     targets (selfrag_data.go), replaying pretraining rows: the reflective reader;
//  5. evaluate the reflective reader with reflective decoding (selfrag_decode.go) over BM25
//     top-1 and top K, always retrieving, closed-book and over the concatenation; its IsRel
//     decisions on entries and other passages; its retrieval rate and what retrieval buys; and
//     over the poisoned datastore.
//
// Two tables print (exact match; rates) and everything goes to metrics.json.

const streamSelfRAG = 0x73726167 // "srag"

func init() {
	// selfrag builds the bi-encoder of the rag pipeline but neither warms it up nor reads [rag].
	experiment.Register("selfrag", runSelfRAG, configs.KindSpec{
		Sections: []string{"world", "tokenizer", "reader", "model", "loss", "train", "index", "selfrag"},
		Losses:   []string{"infonce"},
		Own:      []configs.Section{section},
	})
}

// Resume. The phases of a selfrag run (reader_lm, reader_finetune, selfrag_finetune)
// checkpoint every train.checkpoint_every steps, at their end and when interrupted, with their
// optimizer state (and selfrag_finetune its count of contexts cut), in the run directory. What
// a later phase needs of an earlier one is saved as it is produced: the Retrieve labels read
// off the language model (retrieve_labels.json); each finished stage's metrics and table rows
// (rag.json, ragresume.Progress: stage "reader_lm" is the phase with the language model's cloze
// evaluation and the labels, "reader_finetune" the phase with the plain reader's evaluation);
// the plain reader, with the tokenizer before the reflection tokens, in plain/; the tokenizer
// with them in tokenizer.json. `train -resume` restores the finished stages and continues the
// phase of the latest checkpoint from its step; a run stopped before its first checkpoint (or
// whose run directory lacks those records, as an earlier version's) starts again from its
// first phase. Every batch, dropout mask and initialisation is a
// function of (seed, step), so the resumed run ends as an uninterrupted one does.

// Files of a selfrag run directory.
const (
	plainDir   = "plain"                // checkpoint of the plain reader, with its tokenizer
	labelsFile = "retrieve_labels.json" // the Retrieve labels of the training questions, by question id
)

// phaseOrder are the selfrag phases in the order they run.
var phaseOrder = []string{"reader_lm", "reader_finetune", "selfrag_finetune"}

// dropReflectiveTokenizer removes the tokenizer.json of the run directory dir, which starts
// again without the plain reader's tokenizer, if it holds the reflection tokens (an earlier
// version's run directory): the run then trains its tokenizer again.
func dropReflectiveTokenizer(dir string) error {
	path := filepath.Join(dir, checkpoints.TokenizerFile)
	tok, err := tokenize.Load(path)
	if err != nil {
		return nil // none yet, or unreadable: the run trains it again or names the file
	}
	if _, has := tok.ID(tokenize.RetrieveToken); !has {
		return nil
	}
	return os.Remove(path)
}

// missingStage names what a run directory whose latest checkpoint is of phase lacks to resume
// there ("" when nothing): the finished stage of every earlier phase in prog and, once
// reader_finetune is finished, the plain reader (hasPlain).
func missingStage(prog *ragresume.Progress, phase string, hasPlain bool) string {
	for _, p := range phaseOrder[:slices.Index(phaseOrder, phase)] {
		if _, ok := prog.Done(p); !ok {
			return fmt.Sprintf("stage %s in %s", p, filepath.Join(prog.Dir, ragresume.ProgressFile))
		}
	}
	if _, ok := prog.Done("reader_finetune"); ok && !hasPlain {
		return fmt.Sprintf("the plain reader (%s)", filepath.Join(prog.Dir, plainDir))
	}
	return ""
}

// runSelfRAG runs a selfrag recipe as named stages, methods of selfragRun, which carries the
// run's state from one to the next: the resume point, the world and the models, the plain
// reader's two stages, the reflective reader's training and the evaluation.
func runSelfRAG(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	if o.ResumeDir != "" && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		return o.ResumeDir, nil
	}
	s := &selfragRun{start: time.Now(), sr: *Of(rec), dir: o.ResumeDir}
	defer s.close()
	err := experiment.RunStages(
		func() error { return s.resume(o) },          // the latest checkpoint, finished stages and plain reader of a resumed run
		func() error { return s.open(rec, o) },       // the world, the tokenizer, the run directory, the models
		func() error { return s.pretrainLM(ctx) },    // stage reader_lm: language-model pretraining, the Retrieve labels
		func() error { return s.finetunePlain(ctx) }, // stage reader_finetune: the plain reader, evaluated, saved in plain/
		s.grow, // the reflection tokens and a grown copy of the plain reader
		func() error { return s.finetuneReflective(ctx) }, // stage selfrag_finetune: the reflective reader trained
		s.evaluate, // the reflective reader, over the poisoned datastore too; metrics.json
	)
	return s.dir, err
}

// resume finds where a resumed run continues: the latest checkpoint of its directory, the
// finished stages of rag.json and the plain reader of plain/; a run directory lacking what its
// checkpoint's phase needs starts again from the first phase.
func (s *selfragRun) resume(o experiment.Options) error {
	if o.ResumeDir == "" {
		return nil
	}
	var err error
	if experiment.HasCheckpoint(o.ResumeDir) {
		if s.from, err = checkpoints.Load(o.ResumeDir); err != nil {
			return err
		}
		if !slices.Contains(phaseOrder, s.from.Trainer.Phase) {
			return fmt.Errorf("%s: phase %q is not a selfrag phase (%s)", s.from.Dir, s.from.Trainer.Phase, strings.Join(phaseOrder, ", "))
		}
		if s.prog, err = ragresume.ReadProgress(o.ResumeDir); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.Out, "resume: %s has no checkpoint yet; starting from the first phase\n", o.ResumeDir)
	}
	if pd := filepath.Join(o.ResumeDir, plainDir); experiment.HasCheckpoint(pd) {
		if s.plainCk, err = checkpoints.Load(pd); err != nil {
			return err
		}
		s.tokFile = filepath.Join(s.plainCk.Dir, checkpoints.TokenizerFile)
	}
	if s.from != nil {
		if missing := missingStage(s.prog, s.from.Trainer.Phase, s.plainCk != nil); missing != "" {
			// A run directory of an earlier version, which started again on resume.
			fmt.Fprintf(o.Out, "resume: %s holds no record of %s; starting from the first phase\n", o.ResumeDir, missing)
			s.from, s.prog = nil, nil
		}
	}
	if s.from == nil && s.tokFile == "" {
		return dropReflectiveTokenizer(o.ResumeDir)
	}
	return nil
}

// open generates the world, makes the run directory (or reopens the resumed one) with the
// tokenizer and the models, and restores the parameters of a checkpoint before the reflective
// phase.
func (s *selfragRun) open(rec *configs.Recipe, o experiment.Options) error {
	run, d, dir, err := ragkit.NewGardenRun(rec, o, "entry", false, s.from != nil, s.tokFile)
	s.GardenRun, s.d, s.dir = run, d, dir
	if err != nil {
		return err
	}
	if o.ResumeDir != "" && s.from == nil && s.tokFile != "" {
		// Starting again: tokenizer.json may hold the reflection tokens already.
		if err := run.Tok.Save(run.TokenizerPath); err != nil {
			return err
		}
	}
	if s.prog == nil {
		s.prog = &ragresume.Progress{Dir: dir}
	}
	run.RAGConfig.Kind = model.KindSelfRAG
	run.MidPhase, run.From = true, s.from
	if err := s.formats(); err != nil {
		return err
	}
	s.all = append(run.Reader.Params(), run.Encoder.Params()...)
	if s.from != nil && s.from.Trainer.Phase != "selfrag_finetune" {
		if err := experiment.SetParams(s.all, s.from.Params); err != nil {
			return fmt.Errorf("%s: %w", s.from.Dir, err)
		}
	}
	return nil
}

// close closes the run's log.
func (s *selfragRun) close() {
	if s.GardenRun != nil && s.Log != nil {
		s.Log.Close()
	}
}

// begin starts the stage of phase name, unless an earlier segment finished it: then it
// restores the stage's results.
func (s *selfragRun) begin(name string) (restored bool) {
	if st, ok := s.prog.Done(name); ok {
		s.prog.Restore(s.GardenRun, s.ev, st)
		fmt.Fprintf(s.Opts.Out, "%s: finished in an earlier segment\n", name)
		return true
	}
	s.prog.Begin(s.GardenRun, s.ev)
	return false
}

// pretrainLM is stage reader_lm: the reader pretrained as a language model on long rows, its
// cloze evaluation, and the Retrieve labels read off it (or read back from a finished stage).
func (s *selfragRun) pretrainLM(ctx context.Context) error {
	rows, cutDocs := s.fLong.PackDocuments(s.d.Docs)
	fmt.Fprintf(s.Opts.Out, "reader: %d parameters; corpus packed into %d rows of <= %d tokens (%d documents cut)\n",
		ragkit.CountParams(s.Reader.Params()), len(rows), s.fLong.L, cutDocs)
	s.Format = s.fRow
	s.ev = s.NewEval(s.d)
	var err error
	if s.begin("reader_lm") {
		s.retrieve, err = s.readLabels()
		return err
	}
	s.Format = s.fLong
	if err := s.PretrainReader(ctx, rows); err != nil {
		return err
	}
	s.Format = s.fRow
	if s.Rec.Reader.PretrainPasses > 0 {
		if err := s.ev.AddCloze(s.Reader, "lm_cloze"); err != nil {
			return err
		}
	}
	if s.retrieve, err = s.retrieveLabels(); err != nil {
		return err
	}
	if err := s.writeLabels(s.retrieve); err != nil {
		return err
	}
	return s.prog.Finish("reader_lm", s.GardenRun, s.ev)
}

// finetunePlain is stage reader_finetune: BM25 over the datastore, the plain reader fine-tuned
// (or restored from plain/), evaluated and saved with its tokenizer in plain/.
func (s *selfragRun) finetunePlain(ctx context.Context) error {
	s.replay, _ = s.fRow.PackDocuments(s.d.Docs)
	s.bm25 = index.NewBM25(s.d.IDs, s.d.Texts, index.BM25Params{K1: s.Rec.Index.K1, B: s.Rec.Index.B})
	s.row = make(map[string]int, len(s.d.IDs))
	for i, id := range s.d.IDs {
		s.row[id] = i
	}
	s.searchTest(s.ev)
	s.plain = s.Reader
	if s.plainRestored = s.begin("reader_finetune"); s.plainRestored {
		if err := experiment.SetParams(s.all, s.plainCk.Params); err != nil {
			return fmt.Errorf("%s: %w", s.plainCk.Dir, err)
		}
		fmt.Fprintf(s.Opts.Out, "resume: the plain reader in %s\n", s.plainCk.Dir)
		return nil
	}
	if err := s.FinetuneReader(ctx, s.replay, s.d.FinetuneQ, s.d.Gold); err != nil {
		return err
	}
	if err := s.evaluatePlain(s.ev, s.plain); err != nil {
		return err
	}
	if err := s.Save(filepath.Join(s.Dir, plainDir), s.all, s.RAGConfig, nil,
		checkpoints.TrainerState{Phase: "plain", Seed: s.Seed, LogBytes: s.Log.Size()}); err != nil {
		return err
	}
	return s.prog.Finish("reader_finetune", s.GardenRun, s.ev)
}

// grow adds the reflection tokens to the tokenizer and makes the reflective reader: a copy of
// the plain reader with the vocabulary grown (model.GrowVocab), restored from a checkpoint of the
// reflective phase.
func (s *selfragRun) grow() error {
	if err := s.addReflectionTokens(s.plainRestored); err != nil {
		return err
	}
	refl, err := model.GrowVocab(s.plain, s.Tok.VocabSize(), s.Seed^streamSelfRAG)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Opts.Out, "reflection tokens: vocabulary %d -> %d ids, new embedding rows = the mean of the old\n", s.plain.Vocab(), refl.Vocab())
	s.refl, s.Reader = refl, refl
	s.RAGConfig.Reader.Vocab = refl.Vocab()
	if s.from != nil && s.from.Trainer.Phase == "selfrag_finetune" {
		if err := experiment.SetParams(append(refl.Params(), s.Encoder.Params()...), s.from.Params); err != nil {
			return fmt.Errorf("%s: %w", s.from.Dir, err)
		}
	}
	return nil
}

// evaluate evaluates the reflective reader, the plain and reflective readers over the poisoned
// datastore, prints the tables and writes metrics.json.
func (s *selfragRun) evaluate() error {
	if err := s.evaluateReflective(s.ev, s.refl); err != nil {
		return err
	}
	if err := s.evaluatePoisoned(s.ev, s.plain, s.refl); err != nil {
		return err
	}
	s.Metrics["train/seconds"] = s.TrainSec
	s.Metrics["run/seconds"] = time.Since(s.start).Seconds()
	s.report(s.ev)
	fmt.Fprintf(s.Opts.Out, "run: %.0fs\n", time.Since(s.start).Seconds())
	return experiment.WriteMetrics(s.Dir, s.Metrics)
}

// selfragRun is a rag run with what the selfrag phases add.
type selfragRun struct {
	*ragkit.GardenRun
	start time.Time
	dir   string // the run directory once made (the resumed one before)
	// the resume point: the checkpoint continued from, the finished stages, the plain reader
	// and its tokenizer file
	from, plainCk *checkpoints.Checkpoint
	prog          *ragresume.Progress
	tokFile       string

	d             *ragkit.Data
	sr            Config
	all           []*model.Param // the plain reader's and the bi-encoder's parameters
	ev            *ragkit.Eval
	retrieve      map[int]bool // per training question, its Retrieve label
	replay        [][]int      // packed rows of selfrag.row_length replayed in fine-tuning
	plain, refl   *model.Reader
	plainRestored bool              // the plain reader came from plain/
	fRow, fLong   *ragreader.Format // selfrag.row_length (one passage), reader.max_length (K passages)
	bm25          *index.BM25
	row           map[string]int // chunk id -> index in d.ids
	topK          [][]string     // per test question, BM25's top K passages
	concat        []string       // per test question, those passages joined
	rateRows      []eval.Row
}

// formats makes the two reader formats from the run's current tokenizer.
func (s *selfragRun) formats() error {
	var err error
	if s.fRow, err = ragreader.NewFormat(s.Tok, s.sr.RowLength); err != nil {
		return err
	}
	s.fLong, err = ragreader.NewFormat(s.Tok, s.Rec.Reader.MaxLength)
	return err
}

// search returns the texts of BM25's top k passages for query, best first.
func (s *selfragRun) search(bm25 *index.BM25, texts []string, row map[string]int, query string, k int) []string {
	var out []string
	for _, h := range bm25.Search(query, k) {
		out = append(out, texts[row[h.DocID]])
	}
	return out
}

// retrieveLabels reads the closed-book reader's answers to the training questions off the
// language model's cloze completions ("Jude Riskem lives in" -> greedy, as many tokens as the
// answer has) before the reader ever sees a question: Retrieve unless the completion is the
// answer with probability >= selfrag.retrieve_confidence. Keyed by index in World.Questions.
func (s *selfragRun) retrieveLabels() (map[int]bool, error) {
	rr, err := model.NewReaderRunner(s.Reader, 64, s.fRow.L)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	byLen := map[int][]int{}
	answers := map[int][]int{}
	for _, i := range s.d.FinetuneQ {
		a := s.Tok.Encode(s.World.Questions[i].Answer)
		answers[i] = a
		byLen[len(a)] = append(byLen[len(a)], i)
	}
	labels := map[int]bool{}
	var right, noRetrieve int
	for n, qs := range byLen {
		prompts := make([][]int, len(qs))
		for j, i := range qs {
			prompts[j] = append([]int{s.fRow.Cls}, s.Tok.Encode(s.World.Questions[i].Cloze)...)
		}
		gens, err := rr.Greedy(prompts, n, s.fRow.Sep)
		if err != nil {
			return nil, err
		}
		for j, i := range qs {
			correct := slices.Equal(gens[j].Tokens, answers[i])
			labels[i] = retrieveLabel(correct, gens[j].Confidence(), s.sr.RetrieveConfidence)
			if correct {
				right++
			}
			if !labels[i] {
				noRetrieve++
			}
		}
	}
	n := float64(len(s.d.FinetuneQ))
	s.Metrics["labels/closed_book_EM"] = float64(right) / n
	s.Metrics["labels/no_retrieve_rate"] = float64(noRetrieve) / n
	fmt.Fprintf(s.Opts.Out, "retrieve labels: the language model completes %d of %d training clozes; %d labelled [No Retrieve] (right with p >= %g)\n",
		right, len(s.d.FinetuneQ), noRetrieve, s.sr.RetrieveConfidence)
	return labels, nil
}

// addReflectionTokens adds the reflection tokens to the run's tokenizer, rewrites its
// tokenizer.json (checkpoints saved from now on carry it) and reloads it. A resumed run whose
// tokenizer.json holds them already (at the ids after the run's tokenizer's) reads it back.
func (s *selfragRun) addReflectionTokens(resumed bool) error {
	if resumed {
		tok, err := tokenize.Load(s.TokenizerPath)
		if err != nil {
			return err
		}
		if _, has := tok.ID(tokenize.RetrieveToken); has {
			v := s.Tok.VocabSize()
			for i, t := range tokenize.ReflectionTokens() {
				if id, ok := tok.ID(t); !ok || id != v+i {
					return fmt.Errorf("%s: reflection token %s has id %d (%t), want %d (after the plain reader's %d ids)", s.TokenizerPath, t, id, ok, v+i, v)
				}
			}
			if tok.VocabSize() != v+len(tokenize.ReflectionTokens()) {
				return fmt.Errorf("%s: %d tokens, want the plain reader's %d and the %d reflection tokens", s.TokenizerPath, tok.VocabSize(), v, len(tokenize.ReflectionTokens()))
			}
			s.Tok = tok
			return s.formats()
		}
	}
	if _, err := s.Tok.AddSpecialTokens(tokenize.ReflectionTokens()); err != nil {
		return err
	}
	if err := s.Tok.Save(s.TokenizerPath); err != nil {
		return err
	}
	tok, err := tokenize.Load(s.TokenizerPath)
	if err != nil {
		return err
	}
	s.Tok = tok
	return s.formats()
}

// writeLabels writes the Retrieve labels (keyed by index in World.Questions) to
// retrieve_labels.json, by question id.
func (s *selfragRun) writeLabels(labels map[int]bool) error {
	byID := make(map[string]bool, len(labels))
	for i, l := range labels {
		byID[s.World.Questions[i].ID] = l
	}
	return atomicfile.WriteJSON(filepath.Join(s.Dir, labelsFile), byID)
}

// readLabels reads the Retrieve labels writeLabels wrote; every training question must have one.
func (s *selfragRun) readLabels() (map[int]bool, error) {
	path := filepath.Join(s.Dir, labelsFile)
	b, err := bounded.ReadFile(path, bounded.RunState)
	if err != nil {
		return nil, err
	}
	var byID map[string]bool
	if err := json.Unmarshal(b, &byID); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	labels := make(map[int]bool, len(s.d.FinetuneQ))
	for _, i := range s.d.FinetuneQ {
		l, ok := byID[s.World.Questions[i].ID]
		if !ok {
			return nil, fmt.Errorf("%s: no label for training question %s", path, s.World.Questions[i].ID)
		}
		labels[i] = l
	}
	return labels, nil
}

// finetuneReflective trains the reflective reader on the training questions' reflective
// examples (selfrag_data.go), the loss on the target tokens, replaying reader.replay rows.
func (s *selfragRun) finetuneReflective(ctx context.Context) error {
	sr, rd, replay, retrieve := s.sr, s.Rec.Reader, s.replay, s.retrieve
	if sr.FinetuneSteps == 0 || len(s.d.FinetuneQ) == 0 {
		return nil
	}
	// Negatives are news and the entries of other training gardeners: a test gardener's entry
	// seen only as an irrelevant context would be judged irrelevant by rote at test time.
	chunks, err := s.World.Chunks("entry")
	if err != nil {
		return err
	}
	const perKind = 4
	gardenerOf := map[string]int{}
	trainEntries := map[string][]string{} // first name -> entries of training gardeners
	for _, c := range chunks {
		g := s.World.Entries[c.Entry].Gardener
		gardenerOf[c.ID] = g
		if g >= 0 && s.World.Questions[g*garden.NumRelations].Split == "train" {
			first := s.World.Gardeners[g].FirstName
			trainEntries[first] = append(trainEntries[first], c.Text)
		}
	}
	sources := make([]reflectSource, len(s.d.FinetuneQ))
	var news, others int
	for j, i := range s.d.FinetuneQ {
		q := &s.World.Questions[i]
		gd := &s.World.Gardeners[q.Gardener]
		src := reflectSource{q: q, name: gd.Name(), entry: s.d.Gold[i], retrieve: retrieve[i]}
		for _, h := range s.bm25.Search(q.Trained, 50) {
			if gardenerOf[h.DocID] < 0 && len(src.news) < perKind {
				src.news = append(src.news, s.d.Texts[s.row[h.DocID]])
			}
		}
		for _, text := range trainEntries[gd.FirstName] {
			if text != src.entry && len(src.others) < perKind {
				src.others = append(src.others, text)
			}
		}
		news, others = news+len(src.news), others+len(src.others)
		sources[j] = src
	}
	o := reflectOptions{closedBook: rd.ClosedBookFraction, irrelevant: sr.IrrelevantFraction, entryNegatives: sr.EntryNegativeFraction,
		unsupported: sr.UnsupportedFraction, counterfactual: rd.CounterfactualFraction, rename: sr.RenameFraction}
	if sr.RenameSurnames == "world" {
		o.taken = map[string]bool{}
		for i := range s.World.Gardeners {
			g := &s.World.Gardeners[i]
			o.surnames = append(o.surnames, g.Surname)
			o.taken[g.Name()] = true
		}
	}
	B, R := sr.BatchSize, min(rd.Replay, len(replay))
	cut := 0
	task, err := ragreader.NewWeightedTask(s.Reader, B+R, s.fRow.L, s.fRow.L-1, s.Seed, streamSelfRAG, sr.RelevanceLossWeight, func(step int) ([]ragreader.LMRow, error) {
		rng := rand.New(rand.NewPCG(s.Seed^streamSelfRAG, uint64(step)))
		batch := make([]ragreader.LMRow, 0, B+R)
		add := func(ex reflectExample) error {
			row, c, err := reflectRow(s.fRow, ex)
			if err != nil {
				return err
			}
			if c {
				cut++
			}
			batch = append(batch, row)
			return nil
		}
		for _, j := range ragreader.Cycle(len(sources), B, step, s.Seed^streamSelfRAG) {
			if len(batch) == B {
				break
			}
			src := &sources[j]
			ex := src.example(o, s.World.Values[src.q.Relation], rng)
			if err := add(ex); err != nil {
				return nil, err
			}
			if sr.PairFraction > 0 && len(batch) < B && rng.Float64() < sr.PairFraction {
				if neg, ok := o.pairNegative(ex, rng); ok {
					if err := add(neg); err != nil {
						return nil, err
					}
				}
			}
		}
		if R > 0 {
			for _, i := range ragreader.Cycle(len(replay), R, step, s.Seed^ragkit.StreamReplay) {
				batch = append(batch, ragreader.TextRow(replay[i], ragreader.GroupReplay))
			}
		}
		return batch, nil
	})
	if err != nil {
		return err
	}
	defer task.Close()
	fmt.Fprintf(s.Opts.Out, "reflective data: %d training questions; irrelevant contexts per question: %.1f news naming the gardener, %.1f entries of training gardeners of the same first name\n",
		len(sources), float64(news)/float64(len(sources)), float64(others)/float64(len(sources)))
	if ck := s.From; ck != nil && ck.Trainer.Phase == "selfrag_finetune" {
		cut = ck.Trainer.Counters["contexts_cut"]
	}
	if err := s.TrainPhase(ctx, experiment.Phase{Name: "selfrag_finetune", Steps: sr.FinetuneSteps, Task: task, LR: sr.LR,
		State: func(_ int, ts *checkpoints.TrainerState) { ts.Counters = map[string]int{"contexts_cut": cut} }}); err != nil {
		return err
	}
	s.Metrics["selfrag_finetune/contexts_cut"] = float64(cut)
	return nil
}

// plainSystem decodes the plain reader over ctx (one context per test question, "" closed-book)
// in format f and returns per question whether it is right, and its confidence.
func (s *selfragRun) plainSystem(ev *ragkit.Eval, r *model.Reader, f *ragreader.Format, name string, ctx []string, ask []bool) ([]bool, []float64, error) {
	e := *ev
	e.Format = f
	prompts, cut, err := e.ReaderPrompts(ctx, ask)
	if err != nil {
		return nil, nil, err
	}
	if cut > 0 {
		s.Metrics[name+"/contexts_cut"] = float64(cut)
	}
	return e.Decode(r, name, prompts, false)
}

// searchTest retrieves BM25's top K passages of every test question (topK, concat).
func (s *selfragRun) searchTest(ev *ragkit.Eval) {
	n, K := len(ev.Qs), s.sr.TopK
	s.topK, s.concat = make([][]string, n), make([]string, n)
	for i, q := range ev.Qs {
		s.topK[i] = s.search(s.bm25, s.d.Texts, s.row, q.Trained, K)
		s.concat[i] = strings.Join(s.topK[i], " ")
	}
}

// evaluatePlain evaluates BM25's recall and the plain reader closed-book, over BM25 top-1 and
// over the top K concatenated (searchTest's), and on the questions whose gardener has no entry.
func (s *selfragRun) evaluatePlain(ev *ragkit.Eval, plain *model.Reader) error {
	n, K := len(ev.Qs), s.sr.TopK
	top1 := make([]string, n)
	for i := range ev.Qs {
		if len(s.topK[i]) > 0 {
			top1[i] = s.topK[i][0]
		}
	}
	bm25Run, _ := ev.BM25Run(&ragjoint.Index{BM25: s.bm25, Texts: s.d.Texts, Row: s.row})
	if err := ev.AddRetrieval("bm25", bm25Run); err != nil {
		return err
	}
	noEntry := make([]bool, n)
	for i := range noEntry {
		noEntry[i] = !ev.HasEntry[i]
	}
	c, conf, err := s.plainSystem(ev, plain, s.fRow, "plain_closed_book", make([]string, n), ev.All)
	if err != nil {
		return err
	}
	ev.AddRow("plain_closed_book", c, conf, ev.All)
	if c, conf, err = s.plainSystem(ev, plain, s.fRow, "plain_bm25_top1", top1, ev.All); err != nil {
		return err
	}
	ev.AddRow("plain_bm25_top1", c, conf, ev.All)
	ev.AddRow("plain_bm25_top1.no_entry", c, conf, noEntry)
	name := fmt.Sprintf("plain_concat_k%d", K)
	if c, conf, err = s.plainSystem(ev, plain, s.fLong, name, s.concat, ev.All); err != nil {
		return err
	}
	ev.AddRow(name, c, conf, ev.All)
	return nil
}

// reflective runs reflective decoding for every test question over passages[i] and returns the
// decisions and per question whether the answer is right (the value's tokens, then a reflection
// token or [SEP]) and its confidence.
func (s *selfragRun) reflective(ev *ragkit.Eval, sc *reflectReader, name string, passages [][]string, p reflectPolicy) ([]reflectDecision, []bool, []float64, error) {
	start := time.Now()
	qs := make([]int, len(ev.Qs))
	for i := range qs {
		qs[i] = i
	}
	dec, err := reflectiveDecode(sc, qs, passages, p)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	correct, conf := make([]bool, len(dec)), make([]float64, len(dec))
	for i, d := range dec {
		correct[i] = d.answer.ended && slices.Equal(d.answer.tokens, ev.Answers[i])
		conf[i] = d.answer.confidence
	}
	fmt.Fprintf(s.Opts.Progress, "eval %s: %d questions in %.1fs\n", name, len(dec), time.Since(start).Seconds())
	return dec, correct, conf, nil
}

// bucketValue is one observation of a rate row: a question's bucket and a value.
type bucketValue struct {
	bucket string
	v      float64
}

// addRate records the mean of the values per bucket and overall as a row of the rate table and
// as metrics "<name>/<metric>" and "<name>/<metric>.<bucket>".
func (s *selfragRun) addRate(name, metric string, obs []bucketValue) {
	sum, n := map[string]float64{}, map[string]int{}
	var all float64
	for _, o := range obs {
		sum[o.bucket] += o.v
		n[o.bucket]++
		all += o.v
	}
	scores := map[string]float64{}
	for _, b := range garden.Buckets {
		if n[b] > 0 {
			scores[b] = sum[b] / float64(n[b])
			s.Metrics[name+"/"+metric+"."+b] = scores[b]
		}
	}
	if len(obs) > 0 {
		scores["all"] = all / float64(len(obs))
		s.Metrics[name+"/"+metric] = scores["all"]
	}
	scores["n"] = float64(len(obs))
	s.rateRows = append(s.rateRows, eval.Row{System: name + " (" + metric + ")", Scores: scores})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// evaluateReflective evaluates the reflective reader's systems and decisions.
func (s *selfragRun) evaluateReflective(ev *ragkit.Eval, refl *model.Reader) error {
	sr, n, K := s.sr, len(ev.Qs), s.sr.TopK
	policy := reflectPolicy{retrieve: sr.RetrieveThreshold, relevance: sr.RelevanceThreshold, supportWeight: sr.SupportWeight}
	sc, err := newReflectReader(refl, s.fRow, ev.Qs, s.Rec.Reader.MaxAnswerTokens)
	if err != nil {
		return err
	}
	defer sc.Close()
	noEntry := make([]bool, n)
	top1 := make([][]string, n)
	for i := range noEntry {
		noEntry[i] = !ev.HasEntry[i]
		top1[i] = s.topK[i][:min(1, len(s.topK[i]))]
	}

	_, cbCorrect, conf, err := s.reflective(ev, sc, "selfrag_closed_book", make([][]string, n), policy)
	if err != nil {
		return err
	}
	ev.AddRow("selfrag_closed_book", cbCorrect, conf, ev.All)
	_, c, conf, err := s.reflective(ev, sc, "selfrag_bm25_top1", top1, policy)
	if err != nil {
		return err
	}
	ev.AddRow("selfrag_bm25_top1", c, conf, ev.All)
	ev.AddRow("selfrag_bm25_top1.no_entry", c, conf, noEntry)

	name := fmt.Sprintf("selfrag_k%d", K)
	dec, kCorrect, conf, err := s.reflective(ev, sc, name, s.topK, policy)
	if err != nil {
		return err
	}
	ev.AddRow(name, kCorrect, conf, ev.All)
	ev.AddRow(name+".no_entry", kCorrect, conf, noEntry)
	var retr, gain []bucketValue
	for i, d := range dec {
		b := ev.Qs[i].Bucket
		retr = append(retr, bucketValue{b, b2f(d.retrieved)})
		gain = append(gain, bucketValue{b, b2f(kCorrect[i]) - b2f(cbCorrect[i])})
	}
	s.addRate(name, "retrieve_rate", retr)
	s.addRate(name, "EM_gain_over_closed_book", gain)

	always := policy
	always.retrieve = 0
	dec, c, conf, err = s.reflective(ev, sc, name+"_always", s.topK, always)
	if err != nil {
		return err
	}
	ev.AddRow(name+"_always", c, conf, ev.All)
	var relEntry, relOther []bucketValue
	for i, d := range dec {
		for k, text := range s.topK[i] {
			o := bucketValue{ev.Qs[i].Bucket, b2f(d.relevance[k] >= sr.RelevanceThreshold)}
			if ev.HasEntry[i] && text == ev.Gold[i] {
				relEntry = append(relEntry, o)
			} else {
				relOther = append(relOther, o)
			}
		}
	}
	s.addRate("isrel_entry", "judged_relevant", relEntry)
	s.addRate("isrel_not_entry", "judged_relevant", relOther)

	long, err := newReflectReader(refl, s.fLong, ev.Qs, s.Rec.Reader.MaxAnswerTokens)
	if err != nil {
		return err
	}
	defer long.Close()
	concat := make([][]string, n)
	for i := range concat {
		concat[i] = []string{s.concat[i]}
	}
	name = fmt.Sprintf("selfrag_concat_k%d", K)
	if _, c, conf, err = s.reflective(ev, long, name, concat, policy); err != nil {
		return err
	}
	ev.AddRow(name, c, conf, ev.All)
	return nil
}

// evaluatePoisoned repeats BM25 retrieval over the poisoned datastore (world.poisoned_fraction
// of the entries state a wrong value for one fact) and evaluates, on the test questions about a
// poisoned fact, the plain reader over top-1 and the reflective reader over the top K: exact
// match against the true answer, how often the answer is the poisoned value, and how often the
// reflective reader judges the poisoned entry relevant (it is on topic, but wrong).
func (s *selfragRun) evaluatePoisoned(ev *ragkit.Eval, plain, refl *model.Reader) error {
	frac := s.World.Config.PoisonedFraction
	if frac == 0 {
		return nil
	}
	pw, err := s.World.Poisoned(frac, s.Seed)
	if err != nil {
		return err
	}
	chunks, err := pw.Chunks("entry")
	if err != nil {
		return err
	}
	ids, texts := make([]string, len(chunks)), make([]string, len(chunks))
	row := make(map[string]int, len(chunks))
	for i, c := range chunks {
		ids[i], texts[i], row[c.ID] = c.ID, c.Text, i
	}
	bm25 := index.NewBM25(ids, texts, index.BM25Params{K1: s.Rec.Index.K1, B: s.Rec.Index.B})
	n, K := len(ev.Qs), s.sr.TopK
	ask := make([]bool, n)
	poisoned := make([]*garden.Question, n)
	topK, top1 := make([][]string, n), make([]string, n)
	for i, qi := range s.d.TestQ {
		q := &pw.Questions[qi]
		ask[i], poisoned[i] = q.Poisoned != "", q
		topK[i] = s.search(bm25, texts, row, q.Trained, K)
		if len(topK[i]) > 0 {
			top1[i] = topK[i][0]
		}
	}
	if ragkit.CountTrue(ask) == 0 {
		return nil
	}
	wrongValue := func(i int, tokens []int) float64 {
		return b2f(slices.Equal(tokens, s.Tok.Encode(poisoned[i].Poisoned)))
	}

	// The plain reader (its tokenizer's ids are the grown one's old ids).
	e := *ev
	e.Format = s.fRow
	prompts, _, err := e.ReaderPrompts(top1, ask)
	if err != nil {
		return err
	}
	rr, err := model.NewReaderRunner(plain, 64, s.fRow.L)
	if err != nil {
		return err
	}
	defer rr.Close()
	var batch [][]int
	var which []int
	for i, p := range prompts {
		if p != nil {
			batch, which = append(batch, p), append(which, i)
		}
	}
	gens, err := rr.Greedy(batch, s.Rec.Reader.MaxAnswerTokens, s.fRow.Sep)
	if err != nil {
		return err
	}
	correct, conf := make([]bool, n), make([]float64, n)
	var plainWrong []bucketValue
	for j, g := range gens {
		i := which[j]
		correct[i], conf[i] = g.Stopped && slices.Equal(g.Tokens, ev.Answers[i]), g.Confidence()
		plainWrong = append(plainWrong, bucketValue{ev.Qs[i].Bucket, wrongValue(i, g.Tokens)})
	}
	ev.AddRow("plain_bm25_top1.poisoned", correct, conf, ask)
	s.addRate("plain_bm25_top1.poisoned", "answers_poisoned_value", plainWrong)

	sc, err := newReflectReader(refl, s.fRow, poisoned, s.Rec.Reader.MaxAnswerTokens)
	if err != nil {
		return err
	}
	defer sc.Close()
	policy := reflectPolicy{retrieve: s.sr.RetrieveThreshold, relevance: s.sr.RelevanceThreshold, supportWeight: s.sr.SupportWeight}
	name := fmt.Sprintf("selfrag_k%d.poisoned", K)
	dec, c, conf, err := s.reflective(ev, sc, name, topK, policy)
	if err != nil {
		return err
	}
	ev.AddRow(name, c, conf, ask)
	var rel, wrong, sup []bucketValue
	entryOf := map[int]string{}
	for _, c := range chunks {
		if g := pw.Entries[c.Entry].Gardener; g >= 0 {
			entryOf[g] = c.Text
		}
	}
	for i, d := range dec {
		if !ask[i] {
			continue
		}
		b := ev.Qs[i].Bucket
		wrong = append(wrong, bucketValue{b, wrongValue(i, d.answer.tokens)})
		for k, text := range topK[i] {
			if text == entryOf[poisoned[i].Gardener] && d.relevance != nil {
				rel = append(rel, bucketValue{b, b2f(d.relevance[k] >= s.sr.RelevanceThreshold)})
			}
		}
		if d.chosen >= 0 {
			sup = append(sup, bucketValue{b, d.answer.support})
		}
	}
	s.addRate(name, "answers_poisoned_value", wrong)
	s.addRate(name, "poisoned_entry_judged_relevant", rel)
	s.addRate(name, "support_of_answer", sup)
	return nil
}

// report prints the exact-match table and the rate table.
func (s *selfragRun) report(ev *ragkit.Eval) {
	sr := s.sr
	fmt.Fprintf(s.Opts.Out, "\nexact match on the %d test questions by pretraining mentions of the fact (%s); .no_entry: the %d questions whose gardener has no entry; .poisoned: the questions about a poisoned fact, over the poisoned datastore; reflective decoding with K = %d, retrieve >= %g, relevance >= %g, support weight %g:\n%s",
		len(ev.Qs), ev.BucketCounts(), len(ev.Qs)-ragkit.CountTrue(ev.HasEntry), sr.TopK, sr.RetrieveThreshold, sr.RelevanceThreshold, sr.SupportWeight,
		eval.FormatTable(ragkit.ReaderColumns(), ev.Rows))
	fmt.Fprintf(s.Opts.Out, "\nreflective decisions (rates by bucket of the question; n observations); isrel_*: BM25 top-%d passages, judged with every question retrieving:\n%s",
		sr.TopK, eval.FormatTable(append(append([]string(nil), garden.Buckets...), "all", "n"), s.rateRows))
}

// loadReflectiveReader reads a reader and its tokenizer from a checkpoint directory written by
// a rag or selfrag run and checks that both carry the reflection tokens: a checkpoint saved
// before the reader was grown fails with an error that says so.
func loadReflectiveReader(dir string) (*model.Reader, *tokenize.Tokenizer, error) {
	ck, err := checkpoints.LoadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var cfg model.RAGConfig
	if err := ck.DecodeConfig(&cfg); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	tok, err := tokenize.Load(filepath.Join(dir, checkpoints.TokenizerFile))
	if err != nil {
		return nil, nil, err
	}
	r, err := model.NewReader(cfg.Reader, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	byName := map[string]checkpoints.Tensor{}
	for _, t := range ck.Params {
		byName[t.Name] = t
	}
	for _, p := range r.Params() {
		t, ok := byName[p.Name]
		if !ok || !slices.Equal(t.Shape, p.Value.Shape()) {
			return nil, nil, fmt.Errorf("%s: parameter %s: missing or of shape %v, want %v", dir, p.Name, t.Shape, p.Value.Shape())
		}
		copy(p.Value.Data().([]float32), t.Data)
	}
	if _, err := reflectionIDs(tok, r.Vocab()); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	return r, tok, nil
}
