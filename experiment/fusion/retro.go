package fusion

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// The retro stage: a RETRO-style model (Borgeaud et al. 2022; model.Retro) against a
// closed-book GPT-2 of the same decoder size and the same steps (issue 41 item 2; the lecture's
// claim: RETRO beats closed-book of the same size).
//
// Both are trained from scratch, [reader]-sized (hidden, layers, heads, ffn, dropout), on the
// same rows: retro.pretrain_steps of language modelling on the garden pretraining corpus packed
// into rows of retro.seq_length tokens ("[CLS] doc [SEP] doc [SEP] ..."), then
// retro.finetune_steps of closed-book question answering on the training gardeners' questions
// ("[CLS] question cloze answer [SEP]", the loss on the answer and [SEP]; with retro.replay
// corpus rows per step, every counted token in one mean). RETRO's decoder has chunked
// cross-attention from layer retro.cca_from (-1: the middle, reader.layers/2) on.
//
// Neighbours: the database is every pretraining document (and, with retro.entries, every entry
// of the encyclopedia) cut into chunks of retro.chunk tokens, each stored with its continuation
// in its document (retro.neighbour_length tokens in all: chunk + continuation, as the paper's
// [N, F]); the key is the chunk's text in a BM25 index (frozen: no training; the paper uses
// frozen BERT embeddings, this world's only frozen encoder is BM25, and its rare surnames are
// exactly what BM25 keys on). Each complete chunk of a sequence gets its top retro.neighbours by
// BM25 over its text; a training sequence never gets a neighbour from one of its own documents
// (the paper's rule, section 2.3: "we filter out neighbours originating from the same document
// as the training sequence"); questions have no document in the database.
//
// Evaluated on the test gardeners' questions by greedy decoding (retro/EM, retro_closedbook/EM,
// per popularity bucket); after the swap (garden.World.Updated) RETRO's database is rebuilt with
// the updated world's entries (the corpus is unchanged) and both models answer the moved test
// gardeners' town: <system>/moved_new_town, /moved_old_town; no weight changes. Each phase is
// checkpointed every retro.checkpoint_every steps in retro/<system>/<phase>/ and resumes
// exactly (rows, neighbours and dropout masks are functions of the step).

// retroSection is the [retro] table, owned by this kind.
var retroSection = configs.NewSection("retro", defaultRetroConfig, checkRetro)

// RetroOf returns the [retro] section of a recipe.
func RetroOf(r *configs.Recipe) *RetroConfig { return configs.SectionOf[RetroConfig](r, "retro") }

// RetroConfig is the [retro] section.
type RetroConfig struct {
	// Only runs the retro stage alone. Default false.
	Only bool `toml:"only"`
	// SeqLength n, Chunk m (n a multiple of m), Neighbours k per chunk and NeighbourLength r
	// (chunk + continuation) in tokens. Defaults 48, 8, 2, 16: a garden fact sentence ("ines
	// ronus lives in oakford .") is 6-8 tokens, so a chunk holds about one and its neighbour
	// the fact and the next sentence; a question "[CLS] where does ines ronus live ? ines ronus
	// lives in" is 12-16 tokens, so its first chunk (with the name) is complete before the
	// answer; the paper's m = 64 would leave every question inside its first chunk, which reads
	// no neighbours.
	SeqLength       int `toml:"seq_length"`
	Chunk           int `toml:"chunk"`
	Neighbours      int `toml:"neighbours"`
	NeighbourLength int `toml:"neighbour_length"`
	// EncoderLayers of the neighbour encoder; 1..12. Default 1.
	EncoderLayers int `toml:"encoder_layers"`
	// CCAFrom is the first decoder layer with chunked cross-attention; -1 (default):
	// reader.layers/2.
	CCAFrom int `toml:"cca_from"`
	// Entries adds the encyclopedia's entries to the database. Default true.
	Entries bool `toml:"entries"`
	// Steps, batch sizes (rows) and peak learning rates of the two phases of both models.
	PretrainSteps     int     `toml:"pretrain_steps"`
	PretrainBatchSize int     `toml:"pretrain_batch_size"`
	PretrainLR        float64 `toml:"pretrain_lr"`
	FinetuneSteps     int     `toml:"finetune_steps"`
	FinetuneBatchSize int     `toml:"finetune_batch_size"`
	FinetuneLR        float64 `toml:"finetune_lr"`
	// Replay corpus rows in every fine-tuning step; 0..finetune_batch_size. Default 4.
	Replay int `toml:"replay"`
	// CheckpointEvery saves each phase every n steps (0: at its end only). Default 100.
	CheckpointEvery int `toml:"checkpoint_every"`
}

func defaultRetroConfig() RetroConfig {
	return RetroConfig{SeqLength: 48, Chunk: 8, Neighbours: 2, NeighbourLength: 16, EncoderLayers: 1, CCAFrom: -1, Entries: true,
		PretrainSteps: 600, PretrainBatchSize: 32, PretrainLR: 1.5e-3, FinetuneSteps: 300, FinetuneBatchSize: 32, FinetuneLR: 1e-3, Replay: 4, CheckpointEvery: 100}
}

func checkRetro(v *configs.Checker, _ *configs.Recipe, c *RetroConfig) {
	if c.SeqLength < 4 || c.SeqLength > 512 {
		v.Fail("retro.seq_length", "must be in 4..512, got %d", c.SeqLength)
	}
	if c.Chunk < 1 || c.Chunk > c.SeqLength || c.SeqLength%c.Chunk != 0 {
		v.Fail("retro.chunk", "must divide retro.seq_length = %d, got %d", c.SeqLength, c.Chunk)
	}
	if c.Neighbours < 1 || c.Neighbours > 16 {
		v.Fail("retro.neighbours", "must be in 1..16, got %d", c.Neighbours)
	}
	if c.NeighbourLength < c.Chunk || c.NeighbourLength > 512 {
		v.Fail("retro.neighbour_length", "must be in retro.chunk..512, got %d", c.NeighbourLength)
	}
	if c.EncoderLayers < 1 || c.EncoderLayers > 12 {
		v.Fail("retro.encoder_layers", "must be in 1..12, got %d", c.EncoderLayers)
	}
	configs.AtLeast(v, "retro.cca_from", c.CCAFrom, -1)
	configs.AtLeast(v, "retro.pretrain_steps", c.PretrainSteps, 0)
	configs.AtLeast(v, "retro.finetune_steps", c.FinetuneSteps, 0)
	configs.AtLeast(v, "retro.pretrain_batch_size", c.PretrainBatchSize, 1)
	configs.AtLeast(v, "retro.finetune_batch_size", c.FinetuneBatchSize, 1)
	v.Positive("retro.pretrain_lr", c.PretrainLR)
	v.Positive("retro.finetune_lr", c.FinetuneLR)
	if c.Replay < 0 || c.Replay > c.FinetuneBatchSize {
		v.Fail("retro.replay", "must be in 0..retro.finetune_batch_size, got %d", c.Replay)
	}
	configs.AtLeast(v, "retro.checkpoint_every", c.CheckpointEvery, 0)
}

// PCG streams of the retro stage's rows and dropout.
const (
	streamRetroRows    = 0x726574726f726f77 // "retrorow"
	streamRetroDropout = 0x726574726f64726f // "retrodro"
)

// retroSystems are the stage's two models, in training order.
var retroSystems = []string{"retro", "retro_closedbook"}

// retroDB is RETRO's retrieval database: chunks of tokenized documents, each with its
// continuation, keyed by BM25 over the chunk's text.
type retroDB struct {
	tok   *tokenize.Tokenizer
	bm    *index.BM25
	nbr   [][]int // chunk + continuation, <= r tokens
	doc   []int   // the document of each chunk
	k     int
	calls int // searches so far
}

// newRetroDB cuts each of docs into chunks of m tokens stored with their continuation (r tokens
// in all).
func newRetroDB(tok *tokenize.Tokenizer, docs [][]int, m, r, k int, p index.BM25Params) *retroDB {
	db := &retroDB{tok: tok, k: k}
	var ids, texts []string
	for d, ids0 := range docs {
		for o := 0; o < len(ids0); o += m {
			ids = append(ids, strconv.Itoa(len(db.nbr)))
			texts = append(texts, tok.Decode(ids0[o:min(o+m, len(ids0))]))
			db.nbr = append(db.nbr, ids0[o:min(o+r, len(ids0))])
			db.doc = append(db.doc, d)
		}
	}
	db.bm = index.NewBM25(ids, texts, p)
	return db
}

// search returns the database chunks of the k best neighbours of chunk (token ids) by BM25 over
// its text, none from a document of exclude (sorted).
func (db *retroDB) search(chunk []int, exclude []int) []int {
	db.calls++
	var out []int
	for _, h := range db.bm.Search(db.tok.Decode(chunk), db.k+4*len(exclude)) {
		i, _ := strconv.Atoi(h.DocID)
		if _, found := slices.BinarySearch(exclude, db.doc[i]); !found {
			out = append(out, i)
		}
		if len(out) == db.k {
			break
		}
	}
	return out
}

// neighbours returns the neighbours (chunk + continuation) search finds.
func (db *retroDB) neighbours(chunk []int, exclude []int) [][]int {
	var out [][]int
	for _, i := range db.search(chunk, exclude) {
		out = append(out, db.nbr[i])
	}
	return out
}

// retroStudy is what the retro stage holds.
type retroStudy struct {
	*ragkit.GardenRun
	d       *ragkit.Data
	rc      *RetroConfig
	m       *model.Retro
	twin    *model.Reader
	docs    [][]int // the corpus documents' tokens
	rows    [][]int // packed corpus rows
	rowDocs [][]int // their documents, sorted
	db      *retroDB
	cache   map[int][][][]int // neighbours of rows (>= 0) and questions (-1-question)
	noNbr   bool              // rows without neighbours (the twin's training)
}

func newRetroStudy(run *ragkit.GardenRun, d *ragkit.Data) (*retroStudy, error) {
	rc := RetroOf(run.Rec)
	s := &retroStudy{GardenRun: run, d: d, rc: rc, cache: map[int][][][]int{}}
	c := run.Reader.Cfg
	cca := rc.CCAFrom
	if cca < 0 {
		cca = c.Layers / 2
	}
	var err error
	if s.m, err = model.NewRetro(model.RetroConfig{Vocab: c.Vocab, Hidden: c.Hidden, Layers: c.Layers, Heads: c.Heads, FFN: c.FFN, Dropout: c.Dropout,
		SeqLen: rc.SeqLength, Chunk: rc.Chunk, Neighbours: rc.Neighbours, NeighbourLen: rc.NeighbourLength, EncoderLayers: rc.EncoderLayers, CCAFrom: cca}, run.Seed); err != nil {
		return nil, fmt.Errorf("retro.cca_from, reader sizes: %w", err)
	}
	c.MaxPosition = rc.SeqLength
	if s.twin, err = model.NewReader(c, run.Seed); err != nil {
		return nil, err
	}
	s.docs = make([][]int, len(d.Docs))
	for i, doc := range d.Docs {
		s.docs[i] = run.Tok.Encode(doc)
	}
	s.rows, s.rowDocs = packRows(s.docs, rc.SeqLength, run.Format.Cls, run.Format.Sep)
	if s.db, err = s.database(run.World); err != nil {
		return nil, err
	}
	return s, nil
}

// packRows packs docs whole, in order, into rows of at most L tokens, "[CLS] doc [SEP] doc [SEP]
// ..." (ragreader.Format.PackDocuments' layout; a document longer than L-2 tokens is cut), and
// returns each row's documents.
func packRows(docs [][]int, L, cls, sep int) (rows, rowDocs [][]int) {
	row, in := []int{cls}, []int(nil)
	for d, ids := range docs {
		ids = ids[:min(len(ids), L-2)]
		if len(row)+len(ids)+1 > L {
			rows, rowDocs = append(rows, row), append(rowDocs, in)
			row, in = []int{cls}, nil
		}
		row, in = append(append(row, ids...), sep), append(in, d)
	}
	if len(row) > 1 {
		rows, rowDocs = append(rows, row), append(rowDocs, in)
	}
	return rows, rowDocs
}

// database builds the database over the corpus and, with retro.entries, w's entries.
func (s *retroStudy) database(w *garden.World) (*retroDB, error) {
	docs := s.docs
	if s.rc.Entries {
		chunks, err := w.Chunks("entry")
		if err != nil {
			return nil, err
		}
		docs = slices.Clip(docs)
		for _, c := range chunks {
			docs = append(docs, s.Tok.Encode(c.Text))
		}
	}
	return newRetroDB(s.Tok, docs, s.rc.Chunk, s.rc.NeighbourLength, s.rc.Neighbours, index.BM25Params{K1: s.Rec.Index.K1, B: s.Rec.Index.B}), nil
}

// neighboursOf returns (cached under key) the neighbours of every complete chunk of ids from db,
// excluding the documents exclude; nil when the study trains the closed-book twin (s.noNbr).
func (s *retroStudy) neighboursOf(key int, ids, exclude []int) [][][]int {
	if s.noNbr {
		return nil
	}
	if nb, ok := s.cache[key]; ok {
		return nb
	}
	m := s.rc.Chunk
	nb := make([][][]int, len(ids)/m)
	for c := range nb {
		nb[c] = s.db.neighbours(ids[c*m:(c+1)*m], exclude)
	}
	s.cache[key] = nb
	return nb
}

// retroRow is one training row with the neighbours of its chunks.
type retroRow struct {
	row ragreader.LMRow
	nbr [][][]int
}

// prompt is the question's prompt, "[CLS] question cloze".
func (s *retroStudy) prompt(q *garden.Question) []int {
	return append([]int{s.Format.Cls}, s.Tok.Encode(ragreader.Question(q))...)
}

// batch returns the rows of step of phase ("pretrain" or "finetune").
func (s *retroStudy) batch(phase string, step int) ([]retroRow, error) {
	rc := s.rc
	var out []retroRow
	corpus := func(B int, stream uint64) {
		for _, i := range ragreader.Cycle(len(s.rows), B, step, s.Seed^stream) {
			out = append(out, retroRow{ragreader.TextRow(s.rows[i], ragreader.GroupMain), s.neighboursOf(i, s.rows[i], s.rowDocs[i])})
		}
	}
	if phase == "pretrain" {
		corpus(rc.PretrainBatchSize, streamRetroRows)
		return out, nil
	}
	trainQ := trainedQ(s.d)
	for _, i := range ragreader.Cycle(len(trainQ), rc.FinetuneBatchSize-rc.Replay, step, s.Seed^streamRetroRows^1) {
		q := &s.World.Questions[trainQ[i]]
		row := ragreader.QARow(s.prompt(q), s.Format.Answer(q.Answer))
		if len(row.IDs) > rc.SeqLength {
			return nil, fmt.Errorf("question %s: %d tokens with its answer, more than retro.seq_length = %d", q.ID, len(row.IDs), rc.SeqLength)
		}
		out = append(out, retroRow{row, s.neighboursOf(-1-trainQ[i], row.IDs, nil)})
	}
	corpus(rc.Replay, streamRetroRows^2)
	return out, nil
}

// retroTask trains model.Retro: the mean NLL of the counted targets (losses.TokenNLL), as
// ragreader.Task does for the closed-book twin on the same rows.
type retroTask struct {
	s    *retroStudy
	in   *model.RetroInputs
	tg   *model.Targets
	mask *tensor.Dense
	loss *gorgonia.Node
	next func(step int) ([]retroRow, error)
	trainer.GraphParams
}

func newRetroTask(s *retroStudy, B int, next func(int) ([]retroRow, error)) (*retroTask, error) {
	S := s.rc.SeqLength - 1
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	in, err := s.m.NewRetroInputs(g, B, "retro")
	if err != nil {
		return nil, err
	}
	t := &retroTask{s: s, next: next, in: in, tg: model.NewTargets(g, B*S, "retro.targets")}
	lp, err := s.m.BuildLogProbs(b, t.in, t.tg, true)
	if err != nil {
		return nil, err
	}
	t.mask, t.loss, t.GraphParams, err = nllGraph(g, b, lp, B*S, "retro")
	return t, err
}

func (t *retroTask) Step(step int) (float64, int, error) {
	rows, err := t.next(step)
	if err != nil {
		return 0, 0, err
	}
	n, S := t.s.rc.SeqLength, t.s.rc.SeqLength-1
	ex := make([]model.RetroExample, len(rows))
	pos, tgt := make([]int, t.in.B*S), make([]int, t.in.B*S)
	m := t.mask.Data().([]float32)
	clear(m)
	for i := range pos {
		pos[i] = -1
	}
	for i, r := range rows {
		ex[i] = model.RetroExample{Tokens: r.row.IDs, Neighbours: r.nbr}
		slot := i * S
		for j, keep := range r.row.Keep {
			if keep {
				pos[slot], tgt[slot], m[slot] = i*n+j, r.row.Target[j], 1
				slot++
			}
		}
	}
	if err := t.in.Let(ex, t.s.Format.Cls); err != nil {
		return 0, 0, err
	}
	if err := t.tg.Let(pos, tgt); err != nil {
		return 0, 0, err
	}
	t.s.m.SetRNG(rand.New(rand.NewPCG(t.s.Seed^streamRetroDropout, uint64(step))))
	if err := t.Run(); err != nil {
		return 0, 0, err
	}
	return trainer.ScalarValue(t.loss), len(rows), nil
}

func (t *retroTask) Close() { t.VM.Close() }

// train runs the two phases of system, each resuming from retro/<system>/<phase>/.
func (s *retroStudy) train(ctx context.Context, system string) error {
	rc := s.rc
	for _, ph := range []struct {
		name     string
		steps, B int
		lr       float64
	}{{"pretrain", rc.PretrainSteps, rc.PretrainBatchSize, rc.PretrainLR}, {"finetune", rc.FinetuneSteps, rc.FinetuneBatchSize, rc.FinetuneLR}} {
		if ph.steps == 0 {
			continue
		}
		next := func(step int) ([]retroRow, error) { return s.batch(ph.name, step) }
		s.noNbr = system != "retro"
		var task interface {
			trainer.Task
			Close()
		}
		var params []*model.Param
		if system == "retro" {
			t, err := newRetroTask(s, ph.B, next)
			if err != nil {
				return err
			}
			task, params = t, s.m.Params()
		} else {
			t, err := ragreader.NewTask(s.twin, ph.B, rc.SeqLength, rc.SeqLength-1, s.Seed, streamRetroDropout, func(step int) ([]ragreader.LMRow, error) {
				rows, err := next(step)
				lm := make([]ragreader.LMRow, len(rows))
				for i, r := range rows {
					lm[i] = r.row
				}
				return lm, err
			})
			if err != nil {
				return err
			}
			task, params = t, s.twin.Params()
		}
		name := system + "_" + ph.name
		p := experiment.Phase{Name: name, Steps: ph.steps, Task: task, LR: ph.lr, Warmup: experiment.ShortWarmup(s.Rec.Train.WarmupSteps, ph.steps),
			CheckpointEvery: rc.CheckpointEvery, Dir: filepath.Join(s.Dir, "retro", system, ph.name), Params: params,
			Config: map[string]any{"system": system, "retro": s.m.Cfg, "reader": s.twin.Cfg}}
		err := resumablePhase(ctx, s.GardenRun, p, nil, fmt.Sprintf("%d steps of %d rows", ph.steps, ph.B))
		task.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// answer decodes the prompts of qs with system and returns per question its tokens (nil unless
// it stopped), the database's searches included for RETRO.
func (s *retroStudy) answer(system string, qs []*garden.Question) ([][]int, error) {
	prompts := make([][]int, len(qs))
	for i, q := range qs {
		prompts[i] = s.prompt(q)
	}
	maxNew := s.Rec.Reader.MaxAnswerTokens + 1
	var gens []model.Generation
	if system == "retro" {
		r, err := model.NewRetroRunner(s.m, 32)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		gens, err = r.Greedy(prompts, maxNew, s.Format.Sep, s.Format.Cls, func(chunk []int) ([][]int, error) { return s.db.neighbours(chunk, nil), nil })
		if err != nil {
			return nil, err
		}
	} else {
		rr, err := model.NewReaderRunner(s.twin, 32, s.rc.SeqLength)
		if err != nil {
			return nil, err
		}
		defer rr.Close()
		if gens, err = rr.Greedy(prompts, maxNew, s.Format.Sep); err != nil {
			return nil, err
		}
	}
	out := make([][]int, len(gens))
	for i, g := range gens {
		if g.Stopped {
			out[i] = g.Tokens
		}
	}
	return out, nil
}

// is says per question whether its answer is value(q).
func (s *retroStudy) is(answers [][]int, qs []*garden.Question, value func(*garden.Question) string) []bool {
	ok := make([]bool, len(qs))
	for i, q := range qs {
		ok[i] = answers[i] != nil && slices.Equal(answers[i], s.Tok.Encode(value(q)))
	}
	return ok
}

// evaluate answers the test questions, then the moved gardeners' after the swap.
func (s *retroStudy) evaluate() error {
	ev := s.NewEval(s.d)
	upd, moved, err := movedQuestions(s.GardenRun, s.d)
	if err != nil {
		return err
	}
	movedEv := movedEval(s.GardenRun, s.d, upd, moved)
	m := s.Metrics
	for _, system := range retroSystems {
		t0, calls := time.Now(), s.db.calls
		answers, err := s.answer(system, ev.Qs)
		if err != nil {
			return err
		}
		m["cost/"+system+"/seconds_per_question"] = time.Since(t0).Seconds() / float64(len(ev.Qs))
		m["cost/"+system+"/searches_per_question"] = float64(s.db.calls-calls) / float64(len(ev.Qs))
		ev.AddRow(system, s.is(answers, ev.Qs, func(q *garden.Question) string { return q.Answer }), nil, ev.All)
	}
	old := s.db
	if s.db, err = s.database(upd); err != nil {
		return err
	}
	for _, system := range retroSystems {
		answers, err := s.answer(system, movedEv.Qs)
		if err != nil {
			return err
		}
		addMoved(m, movedEv, system, s.is(answers, movedEv.Qs, func(q *garden.Question) string { return q.Answer }))
		m[system+"/moved_old_town"] = float64(ragkit.CountTrue(s.is(answers, movedEv.Qs, func(q *garden.Question) string { return q.Previous }))) / float64(len(moved))
		fmt.Fprintf(s.Opts.Out, "%s: EM %.3f; moved gardeners' new town %.3f, old town %.3f\n", system, m[system+"/EM"], m[system+"/moved_new_town"], m[system+"/moved_old_town"])
	}
	s.db = old
	m["cost/retro_bytes"] = float64(4 * ragkit.CountParams(s.m.Params()))
	m["cost/retro_closedbook_bytes"] = float64(4 * ragkit.CountParams(s.twin.Params()))
	m["cost/retro_database_chunks"] = float64(len(old.nbr))
	m["swap/retro_moved_questions"] = float64(len(moved))
	return nil
}

// retroStage trains RETRO and its closed-book twin and evaluates both (the stage "retro").
func retroStage(ctx context.Context, run *ragkit.GardenRun, d *ragkit.Data) error {
	s, err := newRetroStudy(run, d)
	if err != nil {
		return err
	}
	fmt.Fprintf(run.Opts.Out, "retro: %d corpus rows of <= %d tokens, database of %d chunks (m = %d, neighbours of %d tokens, k = %d), CCA from layer %d of %d\n",
		len(s.rows), s.rc.SeqLength, len(s.db.nbr), s.rc.Chunk, s.rc.NeighbourLength, s.rc.Neighbours, s.m.Cfg.CCAFrom, s.m.Cfg.Layers)
	for _, system := range retroSystems {
		if err := s.train(ctx, system); err != nil {
			return err
		}
	}
	if err := s.evaluate(); err != nil {
		return err
	}
	retroReport(run.Opts, run.Metrics)
	return nil
}

// retroReport prints EM per bucket of RETRO and its closed-book twin.
func retroReport(o experiment.Options, m map[string]float64) {
	emTable(o, "RETRO and its closed-book twin, exact match on the test questions by pretraining mentions of the fact", retroSystems, m)
}
