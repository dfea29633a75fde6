package fusion

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
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
	"github.com/ragtrain/ragtrain/trainer"
)

// The fid stage: Fusion-in-Decoder against in-context RAG as the number of retrieved entries k
// grows (issue 41 item 1; the lecture's claim: FiD's accuracy holds as k grows, in-context
// RAG's falls).
//
// Both readers start from scratch (fid.init = "scratch", the default) or from one GPT-2 language
// model the stage pretrains on the garden corpus (fid.init = "lm", phase fid_lm: the in-context
// reader is the LM, FiD's encoder and decoder are each a copy of it, its cross-attention new;
// Izacard & Grave start FiD from pretrained T5), with the same sizes as the garden reader
// ([reader] hidden, layers, heads, ffn, dropout), then get the same steps, batches, learning
// rate and the same stream of training examples: the training gardeners' questions
// (reader fine-tuning and joint-training halves alike), each with BM25's top k entries for its
// trained phrasing (the retriever of rag@1), k drawn per example from fid.ks, the entry stating
// the fact made counterfactual in reader.counterfactual_fraction of the examples (its value
// replaced, the answer changed to match: read, not recall; ragkit.Counterfactual).
//
//   - fid@k: model.FiD, one encoder row "[CLS] question cloze [SEP] entry" (fid.encoder_length
//     tokens) per retrieved entry, the decoder writing "answer [SEP]" after "[CLS] cloze"
//     (fid.decoder_prefix) over the k encodings;
//   - rag@k (rag_long@1 at k = 1 in a run of every stage: rag@1 is then the qa stage's reader): the
//     garden reader (GPT-2) with a context of fid.reader_length tokens, "[CLS] <ctx>
//     entry_1 ... entry_k </ctx> question cloze answer [SEP]" (ragreader.Format; entries
//     beyond the length are cut, counted in rag@k/contexts_cut).
//
// Evaluated on the test gardeners' questions at every k of fid.ks: <system>@k/EM and per
// popularity bucket; after the swap (garden.World.Updated, BM25 rebuilt over the updated
// entries, no weight changes) <system>@k/moved_new_town on the moved test gardeners' towns.
// Each reader's training is a phase checkpointed every fid.checkpoint_every steps in
// fid/<system>/ (resumable mid-phase, exactly: batches, k, counterfactuals and dropout masks
// are functions of the step).

// fidSection is the [fid] table, owned by this kind.
var fidSection = configs.NewSection("fid", defaultFiDConfig, checkFiD)

// FiDOf returns the [fid] section of a recipe.
func FiDOf(r *configs.Recipe) *FiDConfig { return configs.SectionOf[FiDConfig](r, "fid") }

// FiDConfig is the [fid] section.
type FiDConfig struct {
	// Only runs the fid stage alone: no language-model pretraining, fine-tuning or kNN-LM
	// (the other systems' stages). Default false.
	Only bool `toml:"only"`
	// Ks are the numbers of retrieved entries trained on (one drawn per example) and evaluated;
	// each 1..64, distinct. Default 1, 3, 10.
	Ks []int `toml:"ks"`
	// Steps, BatchSize (questions per step) and LR (peak, warm-up and schedule of [train]) of
	// both readers' training. Defaults 600, 16, 1e-3.
	Steps     int     `toml:"steps"`
	BatchSize int     `toml:"batch_size"`
	LR        float64 `toml:"lr"`
	// EncoderLength is FiD's encoder row, "[CLS] question cloze [SEP] entry", in tokens;
	// 8..512. Default 48.
	EncoderLength int `toml:"encoder_length"`
	// ReaderLength is the in-context reader's sequence, which must hold max(ks) entries;
	// 16..2048. Default 320.
	ReaderLength int `toml:"reader_length"`
	// DecoderLength is FiD's decoder sequence, "[CLS] prefix answer [SEP]"; 3..256. Default 16.
	DecoderLength int `toml:"decoder_length"`
	// DecoderPrefix is what FiD's decoder reads before the answer: "cloze" (the question's
	// cloze, "Ines Ronus lives in", as the garden reader's answer prefix, ragkit's
	// rag_reader.go) or "none" (only [CLS], as Izacard & Grave's decoder). Default "cloze".
	DecoderPrefix string `toml:"decoder_prefix"`
	// CheckpointEvery saves each reader's training every n steps (0: at its end only). Default 100.
	CheckpointEvery int `toml:"checkpoint_every"`
	// Init is where both readers start: "scratch" (the default: fresh parameters) or "lm": a
	// GPT-2 language model of the [reader] sizes with fid.reader_length positions, pretrained
	// in this stage (phase fid_lm, fid/lm/) for LMSteps steps of LMBatchSize rows of the
	// pretraining corpus packed into fid.reader_length tokens, peak LMLR; the in-context reader
	// is that LM, and FiD's encoder and decoder are each a copy of it (model.FiD.InitFromReader:
	// everything but the new cross-attention), as Izacard & Grave start both from one
	// pretrained T5. Both readers then get the same fine-tuning.
	Init        string  `toml:"init"`
	LMSteps     int     `toml:"lm_steps"`
	LMBatchSize int     `toml:"lm_batch_size"`
	LMLR        float64 `toml:"lm_lr"`
	// CrossInit is how FiD's cross-attention starts with fid.init = "lm": "new" (the default:
	// freshly initialised) or "self" (each layer's a copy of that layer's self-attention of
	// the LM, model.FiD.CrossFromSelf).
	CrossInit string `toml:"cross_init"`
	// EncoderCausal keeps the causal mask in FiD's encoder (model.FiDConfig.CausalEncoder: each
	// passage token reads the question and the passage before it, as the LM copied in was
	// trained). Default false: bidirectional, as Izacard & Grave's T5 encoder.
	EncoderCausal bool `toml:"encoder_causal"`
	// EncoderLRScale multiplies fid.lr for FiD's encoder ("fid.encoder.*"), CrossLRScale for its
	// decoder's cross-attention sublayers ("layer.N.xattn.*", "layer.N.ln_x.*"); each in
	// (0, 100]. Default 1 and 1. A slower encoder keeps its memory from collapsing early in
	// training: while the decoder's cross-attention is still nearly uniform over the K·Le
	// encodings, the loss gradient on every memory row of a question is almost the same vector
	// (its share 0.997-0.9999 of the gradient's squared norm in the first 20 steps of the garden
	// run), Adam turns that consistent push into full-size steps of the encoder's weights, and
	// within 25 steps every row of the final-LayerNormed memory is nearly the same vector
	// (docs/results/fusion-garden.md, "Why FiD did not read").
	EncoderLRScale float64 `toml:"encoder_lr_scale"`
	CrossLRScale   float64 `toml:"cross_lr_scale"`
}

func defaultFiDConfig() FiDConfig {
	return FiDConfig{Ks: []int{1, 3, 10}, Steps: 600, BatchSize: 16, LR: 1e-3, EncoderLength: 48, ReaderLength: 320, DecoderLength: 16, DecoderPrefix: "cloze", CheckpointEvery: 100,
		Init: "scratch", LMSteps: 300, LMBatchSize: 16, LMLR: 1.5e-3, CrossInit: "new", EncoderLRScale: 1, CrossLRScale: 1}
}

func checkFiD(v *configs.Checker, _ *configs.Recipe, c *FiDConfig) {
	if len(c.Ks) == 0 {
		v.Fail("fid.ks", "must hold at least one value")
	}
	for _, k := range c.Ks {
		if k < 1 || k > 64 {
			v.Fail("fid.ks", "each must be in 1..64, got %d", k)
		}
	}
	s := slices.Clone(c.Ks)
	slices.Sort(s)
	if len(slices.Compact(s)) != len(c.Ks) {
		v.Fail("fid.ks", "values must be distinct")
	}
	configs.AtLeast(v, "fid.steps", c.Steps, 0)
	configs.AtLeast(v, "fid.batch_size", c.BatchSize, 1)
	v.Positive("fid.lr", c.LR)
	if c.EncoderLength < 8 || c.EncoderLength > 512 {
		v.Fail("fid.encoder_length", "must be in 8..512, got %d", c.EncoderLength)
	}
	if c.ReaderLength < 16 || c.ReaderLength > 2048 {
		v.Fail("fid.reader_length", "must be in 16..2048, got %d", c.ReaderLength)
	}
	if c.DecoderLength < 3 || c.DecoderLength > 256 {
		v.Fail("fid.decoder_length", "must be in 3..256, got %d", c.DecoderLength)
	}
	v.OneOf("fid.decoder_prefix", c.DecoderPrefix, []string{"cloze", "none"})
	configs.AtLeast(v, "fid.checkpoint_every", c.CheckpointEvery, 0)
	for _, sc := range []struct {
		key string
		v   float64
	}{{"fid.encoder_lr_scale", c.EncoderLRScale}, {"fid.cross_lr_scale", c.CrossLRScale}} {
		if !(sc.v > 0 && sc.v <= 100) {
			v.Fail(sc.key, "must be in (0, 100], got %g", sc.v)
		}
	}
	v.OneOf("fid.init", c.Init, []string{"scratch", "lm"})
	v.OneOf("fid.cross_init", c.CrossInit, []string{"new", "self"})
	if c.CrossInit == "self" && c.Init != "lm" {
		v.Fail("fid.cross_init", "\"self\" copies the LM's self-attention: it needs fid.init = \"lm\"")
	}
	if c.Init == "lm" {
		configs.AtLeast(v, "fid.lm_steps", c.LMSteps, 1)
		configs.AtLeast(v, "fid.lm_batch_size", c.LMBatchSize, 1)
		v.Positive("fid.lm_lr", c.LMLR)
		if c.ReaderLength < max(c.EncoderLength, c.DecoderLength) {
			v.Fail("fid.reader_length", "with fid.init = \"lm\" the LM's positions (fid.reader_length = %d) must cover fid.encoder_length = %d and fid.decoder_length = %d", c.ReaderLength, c.EncoderLength, c.DecoderLength)
		}
	}
}

// PCG streams of the fid stage's examples and dropout.
const (
	streamFiDExamples = 0x6669646578616d70 // "fidexamp"
	streamFiDDropout  = 0x66696464726f706f // "fiddropo"
	streamFiDLM       = 0x6669646c6d726f77 // "fidlmrow": the LM's rows and dropout
)

// fidSystems are the stage's two readers, in training order.
var fidSystems = []string{"fid", "rag"}

// systemName names system at k in metrics: "fid@k", and "rag@k" for the in-context reader,
// but "rag_long@1" at k = 1 in a run of every stage, where rag@1 is the qa stage's garden
// reader (whose context holds one entry); rag@3 and rag@10 are always this stage's reader.
func (c *FiDConfig) systemName(system string, k int) string {
	if system == "rag" && !c.Only && k == 1 {
		system = "rag_long"
	}
	return fmt.Sprintf("%s@%d", system, k)
}

// fidStudy is what the fid stage holds.
type fidStudy struct {
	*ragkit.GardenRun
	d      *ragkit.Data
	fc     *FiDConfig
	kmax   int
	fid    *model.FiD
	reader *model.Reader
	format *ragreader.Format // the in-context reader's
	bm     index.BM25Params
}

func newFiDStudy(run *ragkit.GardenRun, d *ragkit.Data) (*fidStudy, error) {
	fc := FiDOf(run.Rec)
	s := &fidStudy{GardenRun: run, d: d, fc: fc, kmax: slices.Max(fc.Ks), bm: index.BM25Params{K1: run.Rec.Index.K1, B: run.Rec.Index.B}}
	rc := run.Reader.Cfg
	var err error
	s.fid, err = model.NewFiD(model.FiDConfig{Vocab: rc.Vocab, Hidden: rc.Hidden, Layers: rc.Layers, Heads: rc.Heads, FFN: rc.FFN, Dropout: rc.Dropout,
		K: s.kmax, EncLen: fc.EncoderLength, DecLen: fc.DecoderLength, CausalEncoder: fc.EncoderCausal}, run.Seed)
	if err != nil {
		return nil, err
	}
	rc.MaxPosition = fc.ReaderLength
	if s.reader, err = model.NewReader(rc, run.Seed); err != nil {
		return nil, err
	}
	if s.format, err = ragreader.NewFormat(run.Tok, fc.ReaderLength); err != nil {
		return nil, err
	}
	return s, nil
}

// retrieve returns BM25's top kmax entries of w for each question of qs (its trained phrasing).
func (s *fidStudy) retrieve(w *garden.World, qs []int) ([][]string, error) {
	chunks, err := w.Chunks(s.Rec.RAG.Chunking)
	if err != nil {
		return nil, err
	}
	ids, texts := make([]string, len(chunks)), map[string]string{}
	all := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i], all[i], texts[c.ID] = c.ID, c.Text, c.Text
	}
	bm := index.NewBM25(ids, all, s.bm)
	out := make([][]string, len(qs))
	for i, qi := range qs {
		for _, h := range bm.Search(w.Questions[qi].Trained, s.kmax) {
			out[i] = append(out[i], texts[h.DocID])
		}
		if len(out[i]) == 0 {
			return nil, fmt.Errorf("BM25 finds no entry for %q", w.Questions[qi].Trained)
		}
	}
	return out, nil
}

// fidExample is one training or test example: the question, its k entries and the answer.
type fidExample struct {
	q       *garden.Question
	entries []string
	answer  string
}

func question(q *garden.Question) string { return q.Trained + " " + q.Cloze }

// examples returns the training examples of step: fid.batch_size questions (ragreader.Cycle), k
// drawn from fid.ks, the gold entry counterfactual in reader.counterfactual_fraction of them.
func (s *fidStudy) examples(trainQ []int, top [][]string, step int) []fidExample {
	rng := rand.New(rand.NewPCG(s.Seed^streamFiDExamples, uint64(step)))
	out := make([]fidExample, 0, s.fc.BatchSize)
	for _, i := range ragreader.Cycle(len(trainQ), s.fc.BatchSize, step, s.Seed^streamFiDExamples) {
		q := &s.World.Questions[trainQ[i]]
		k := s.fc.Ks[rng.IntN(len(s.fc.Ks))]
		e := fidExample{q: q, entries: slices.Clone(top[i][:min(k, len(top[i]))]), answer: q.Answer}
		if rng.Float64() < s.Rec.Reader.CounterfactualFraction {
			if j := slices.Index(e.entries, s.d.Gold[trainQ[i]]); j >= 0 && e.entries[j] != "" {
				e.entries[j], e.answer = ragkit.Counterfactual(e.entries[j], q.Answer, s.World.Values[q.Relation], rng)
			}
		}
		out = append(out, e)
	}
	return out
}

// fidInput is FiD's input for e: one encoder row per entry, cut to fid.encoder_length (cut
// counts the rows cut), and the decoder's "[CLS] prefix answer [SEP]" (the prefix the cloze
// with fid.decoder_prefix = "cloze"; with answer "", "[CLS] prefix"), and the position of the
// prefix's last token, whose next token is the answer's first.
func (s *fidStudy) fidInput(e fidExample, cut *int) (model.FiDExample, int) {
	qt := append(append([]int{s.Format.Cls}, s.Tok.Encode(question(e.q))...), s.Format.Sep)
	var x model.FiDExample
	for _, p := range e.entries {
		row := append(slices.Clone(qt), s.Tok.Encode(p)...)
		if len(row) > s.fc.EncoderLength {
			row = row[:s.fc.EncoderLength]
			*cut++
		}
		x.Passages = append(x.Passages, row)
	}
	x.Decoder = []int{s.Format.Cls}
	if s.fc.DecoderPrefix == "cloze" {
		x.Decoder = append(x.Decoder, s.Tok.Encode(e.q.Cloze)...)
	}
	first := len(x.Decoder) - 1
	if e.answer != "" {
		x.Decoder = append(append(x.Decoder, s.Tok.Encode(e.answer)...), s.Format.Sep)
	}
	if len(x.Decoder) > s.fid.Cfg.DecLen {
		x.Decoder = x.Decoder[:s.fid.Cfg.DecLen]
		*cut++
	}
	return x, first
}

// ragPrompt is the in-context reader's prompt for e with room for reserve answer tokens.
func (s *fidStudy) ragPrompt(e fidExample, reserve int, cut *int) ([]int, error) {
	p, c, err := s.format.Prompt(strings.Join(e.entries, " "), question(e.q), reserve)
	if c {
		*cut++
	}
	return p, err
}

// fidTask trains FiD: the answer tokens' mean NLL (losses.TokenNLL).
type fidTask struct {
	s     *fidStudy
	in    *model.FiDInputs
	tg    *model.Targets
	mask  *tensor.Dense
	loss  *gorgonia.Node
	next  func(step int) []fidExample
	cut   int
	slots int
	trainer.GraphParams
}

func newFiDTask(s *fidStudy, next func(int) []fidExample) (*fidTask, error) {
	B, S := s.fc.BatchSize, s.fid.Cfg.DecLen-1
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	t := &fidTask{s: s, next: next, slots: S, in: s.fid.NewFiDInputs(g, B, "fid"), tg: model.NewTargets(g, B*S, "fid.targets")}
	lp, err := s.fid.BuildLogProbs(b, t.in, t.tg, true)
	if err != nil {
		return nil, err
	}
	if t.mask, t.loss, t.GraphParams, err = nllGraph(g, b, lp, B*S, "fid"); err != nil {
		return nil, err
	}
	ps := t.GraphParams.Params()
	for i := range ps {
		switch {
		case strings.HasPrefix(ps[i].Name, model.PrefixFiD+".encoder."):
			ps[i].LRScale = s.fc.EncoderLRScale
		case strings.Contains(ps[i].Name, ".xattn.") || strings.Contains(ps[i].Name, ".ln_x."):
			ps[i].LRScale = s.fc.CrossLRScale
		}
	}
	return t, nil
}

func (t *fidTask) Step(step int) (float64, int, error) {
	ex := t.next(step)
	xs := make([]model.FiDExample, len(ex))
	B, S, Ld := t.in.B, t.slots, t.s.fid.Cfg.DecLen
	pos, tgt := make([]int, B*S), make([]int, B*S)
	m := t.mask.Data().([]float32)
	clear(m)
	for i := range pos {
		pos[i] = -1
	}
	for i, e := range ex {
		var first int
		xs[i], first = t.s.fidInput(e, &t.cut)
		for j := first; j+1 < len(xs[i].Decoder); j++ {
			pos[i*S+j-first], tgt[i*S+j-first], m[i*S+j-first] = i*Ld+j, xs[i].Decoder[j+1], 1
		}
	}
	if err := t.in.Let(xs, t.s.Format.Cls); err != nil {
		return 0, 0, err
	}
	if err := t.tg.Let(pos, tgt); err != nil {
		return 0, 0, err
	}
	t.s.fid.SetRNG(rand.New(rand.NewPCG(t.s.Seed^streamFiDDropout, uint64(step))))
	if err := t.Run(); err != nil {
		return 0, 0, err
	}
	return trainer.ScalarValue(t.loss), len(ex), nil
}

func (t *fidTask) Close() { t.VM.Close() }

// trainedQ are the training gardeners' questions (reader fine-tuning and joint halves).
func trainedQ(d *ragkit.Data) []int {
	return append(slices.Clone(d.FinetuneQ), d.JointQ...)
}

// train trains system ("fid" or "rag") for fid.steps, resuming from fid/<system>/ when it holds
// a checkpoint of that phase.
func (s *fidStudy) train(ctx context.Context, system string) error {
	trainQ := trainedQ(s.d)
	top, err := s.retrieve(s.World, trainQ)
	if err != nil {
		return err
	}
	next := func(step int) []fidExample { return s.examples(trainQ, top, step) }
	var params []*model.Param
	var task interface {
		trainer.Task
		Close()
	}
	var cut *int
	switch system {
	case "fid":
		t, err := newFiDTask(s, next)
		if err != nil {
			return err
		}
		task, params, cut = t, s.fid.Params(), &t.cut
	case "rag":
		c := new(int)
		t, err := ragreader.NewWeightedTask(s.reader, s.fc.BatchSize, s.fc.ReaderLength, s.fid.Cfg.DecLen+4, s.Seed, streamFiDDropout, 0, func(step int) ([]ragreader.LMRow, error) {
			var rows []ragreader.LMRow
			for _, e := range next(step) {
				ans := append(s.Tok.Encode(e.answer), s.Format.Sep)
				p, err := s.ragPrompt(e, len(ans), c)
				if err != nil {
					return nil, err
				}
				rows = append(rows, ragreader.QARow(p, ans))
			}
			return rows, nil
		})
		if err != nil {
			return err
		}
		task, params, cut = t, s.reader.Params(), c
	}
	defer task.Close()
	phase := "fid_" + system
	ph := experiment.Phase{Name: phase, Steps: s.fc.Steps, Task: task, LR: s.fc.LR, Warmup: experiment.ShortWarmup(s.Rec.Train.WarmupSteps, s.fc.Steps),
		CheckpointEvery: s.fc.CheckpointEvery, Dir: filepath.Join(s.Dir, "fid", system), Params: params, Config: map[string]any{"system": system, "fid": s.fid.Cfg, "reader": s.reader.Cfg}}
	what := fmt.Sprintf("%d training questions, %d steps of %d, k from %v", len(trainQ), s.fc.Steps, s.fc.BatchSize, s.fc.Ks)
	if err := resumablePhase(ctx, s.GardenRun, ph, map[string]*int{"cut": cut}, what); err != nil {
		return err
	}
	s.Metrics[phase+"/train_contexts_cut"] = float64(*cut)
	return nil
}

// answer decodes ex with system at its k and returns per example whether it wrote the answer
// (the value's tokens, then [SEP]) and how many inputs were cut.
func (s *fidStudy) answer(system string, ex []fidExample) ([]bool, int, error) {
	maxNew := s.Rec.Reader.MaxAnswerTokens + 1
	var gens []model.Generation
	cut := 0
	switch system {
	case "fid":
		r, err := model.NewFiDRunner(s.fid, 32)
		if err != nil {
			return nil, 0, err
		}
		defer r.Close()
		xs := make([]model.FiDExample, len(ex))
		for i, e := range ex {
			e.answer = ""
			xs[i], _ = s.fidInput(e, &cut)
		}
		if gens, err = r.Greedy(xs, maxNew, s.Format.Sep, s.Format.Cls); err != nil {
			return nil, 0, err
		}
	case "rag":
		prompts := make([][]int, len(ex))
		for i, e := range ex {
			p, err := s.ragPrompt(e, maxNew, &cut)
			if err != nil {
				return nil, 0, err
			}
			prompts[i] = p
		}
		rr, err := model.NewReaderRunner(s.reader, 32, s.fc.ReaderLength)
		if err != nil {
			return nil, 0, err
		}
		defer rr.Close()
		if gens, err = rr.Greedy(prompts, maxNew, s.Format.Sep); err != nil {
			return nil, 0, err
		}
	}
	correct := make([]bool, len(ex))
	for i, g := range gens {
		correct[i] = g.Stopped && slices.Equal(g.Tokens, s.Tok.Encode(ex[i].answer))
	}
	return correct, cut, nil
}

// testExamples are ev's questions, each with its top k of top.
func testExamples(ev *ragkit.Eval, top [][]string, k int) []fidExample {
	ex := make([]fidExample, len(ev.Qs))
	for i, q := range ev.Qs {
		ex[i] = fidExample{q: q, entries: top[i][:min(k, len(top[i]))], answer: q.Answer}
	}
	return ex
}

// evaluate answers the test questions at every k, then the moved gardeners' after the swap.
func (s *fidStudy) evaluate() error {
	ev := s.NewEval(s.d)
	top, err := s.retrieve(s.World, s.d.TestQ)
	if err != nil {
		return err
	}
	upd, moved, err := movedQuestions(s.GardenRun, s.d)
	if err != nil {
		return err
	}
	updTop, err := s.retrieve(upd, moved)
	if err != nil {
		return err
	}
	movedEv := movedEval(s.GardenRun, s.d, upd, moved)
	m := s.Metrics
	for _, system := range fidSystems {
		for _, k := range s.fc.Ks {
			name := s.fc.systemName(system, k)
			t0 := time.Now()
			correct, cut, err := s.answer(system, testExamples(ev, top, k))
			if err != nil {
				return err
			}
			m["cost/"+name+"/seconds_per_question"] = time.Since(t0).Seconds() / float64(len(ev.Qs))
			m["cost/"+name+"/searches_per_question"] = 1
			m[name+"/contexts_cut"] = float64(cut)
			ev.AddRow(name, correct, nil, ev.All)
			if correct, _, err = s.answer(system, testExamples(movedEv, updTop, k)); err != nil {
				return err
			}
			addMoved(m, movedEv, name, correct)
			fmt.Fprintf(s.Opts.Out, "%s: EM %.3f (cut %d); moved gardeners' new town %.3f\n", name, m[name+"/EM"], cut, m[name+"/moved_new_town"])
		}
	}
	m["cost/fid_bytes"] = float64(4 * ragkit.CountParams(s.fid.Params()))
	m["cost/rag_long_reader_bytes"] = float64(4 * ragkit.CountParams(s.reader.Params()))
	m["swap/fid_moved_questions"] = float64(len(moved))
	return nil
}

// pretrainLM trains the in-context reader as a language model (fid.init = "lm"): fid.lm_steps
// steps of fid.lm_batch_size rows of the pretraining corpus packed into fid.reader_length
// tokens ("[CLS] doc [SEP] doc [SEP] ...", every token counted), resuming from fid/lm/; then
// copies it into FiD's encoder and decoder (and, with fid.cross_init = "self", each decoder
// layer's self-attention into its cross-attention).
func (s *fidStudy) pretrainLM(ctx context.Context) error {
	fc := s.fc
	rows, cut := s.format.PackDocuments(s.d.Docs)
	if len(rows) == 0 {
		return fmt.Errorf("fid.init = \"lm\": no pretraining rows")
	}
	L := fc.ReaderLength
	task, err := ragreader.NewTask(s.reader, fc.LMBatchSize, L, L-1, s.Seed, streamFiDLM, func(step int) ([]ragreader.LMRow, error) {
		batch := make([]ragreader.LMRow, 0, fc.LMBatchSize)
		for _, i := range ragreader.Cycle(len(rows), fc.LMBatchSize, step, s.Seed^streamFiDLM) {
			batch = append(batch, ragreader.TextRow(rows[i], ragreader.GroupMain))
		}
		return batch, nil
	})
	if err != nil {
		return err
	}
	defer task.Close()
	ph := experiment.Phase{Name: "fid_lm", Steps: fc.LMSteps, Task: task, LR: fc.LMLR, Warmup: experiment.ShortWarmup(s.Rec.Train.WarmupSteps, fc.LMSteps),
		CheckpointEvery: fc.CheckpointEvery, Dir: filepath.Join(s.Dir, "fid", "lm"), Params: s.reader.Params(), Config: map[string]any{"system": "lm", "reader": s.reader.Cfg}}
	what := fmt.Sprintf("the corpus (%d documents) packed into %d rows of <= %d tokens (%d documents cut), %d steps of %d rows (%.2f passes)",
		len(s.d.Docs), len(rows), L, cut, fc.LMSteps, fc.LMBatchSize, float64(fc.LMSteps*fc.LMBatchSize)/float64(len(rows)))
	if err := resumablePhase(ctx, s.GardenRun, ph, nil, what); err != nil {
		return err
	}
	s.Metrics["fid_lm/rows"] = float64(len(rows))
	if err := s.fid.InitFromReader(s.reader); err != nil {
		return err
	}
	if fc.CrossInit == "self" {
		s.fid.CrossFromSelf()
	}
	return nil
}

// fidStage trains FiD and the in-context reader (from the stage's LM with fid.init = "lm") and
// evaluates both (the stage "fid").
func fidStage(ctx context.Context, run *ragkit.GardenRun, d *ragkit.Data) error {
	s, err := newFiDStudy(run, d)
	if err != nil {
		return err
	}
	if s.fc.Init == "lm" {
		if err := s.pretrainLM(ctx); err != nil {
			return err
		}
	}
	for _, system := range fidSystems {
		if err := s.train(ctx, system); err != nil {
			return err
		}
	}
	if err := s.evaluate(); err != nil {
		return err
	}
	fidReport(run.Opts, run.Metrics, s.fc)
	return nil
}

// fidReport prints EM per bucket of every fid@k and rag@k.
func fidReport(o experiment.Options, m map[string]float64, fc *FiDConfig) {
	var names []string
	for _, system := range fidSystems {
		for _, k := range fc.Ks {
			names = append(names, fc.systemName(system, k))
		}
	}
	emTable(o, "Fusion-in-Decoder and in-context RAG by k, exact match on the test questions by pretraining mentions of the fact", names, m)
}
