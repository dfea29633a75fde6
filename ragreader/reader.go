package ragreader

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// Reader sequences. A reader reads one passage and a question and writes the answer:
//
//	[CLS] <ctx> passage </ctx> question cloze answer [SEP]
//
// closed-book with an empty passage ("[CLS] <ctx> </ctx> question"). Greedy decoding starts
// after the question and stops at [SEP]. Pretraining rows pack whole documents:
// "[CLS] doc [SEP] doc [SEP] ...".
//
// The question is followed by its cloze prompt as the answer's prefix, and the answer is the
// one-word value: "where does Ines Ronus live ? Ines Ronus lives in" -> "Larkhill". The value
// is then generated right after the words that preceded it in every pretraining biography,
// so a closed-book answer recalls it the way the language model stored it. After the bare
// question, the reader would have to learn from the training gardeners alone a new route
// from the question's words to that memory, and it learns instead to answer the training
// gardeners by rote; left to generate the prefix itself, it miscopies rare surnames from the
// question. (Measured on the default world, closed-book exact match on the test gardeners'
// >= 30 bucket: 0.47-0.64 after the bare question, 0.63 writing the prefix itself, against
// 0.88 for the language model's own cloze completion.)

// Special tokens the reader's tokenizer gets on top of the trained vocabulary.
const (
	CtxOpen  = "<ctx>"
	CtxClose = "</ctx>"
)

// Format turns texts into reader token sequences of at most L tokens.
type Format struct {
	Tok             *tokenize.Tokenizer
	L               int
	Cls, Sep        int
	CtxOpen, CtxEnd int
}

// NewFormat is the format of reader sequences of at most L tokens of tok, which must hold
// the special tokens CtxOpen and CtxClose.
func NewFormat(tok *tokenize.Tokenizer, L int) (*Format, error) {
	f := &Format{Tok: tok, L: L, Cls: tok.CLSID(), Sep: tok.SEPID()}
	var ok1, ok2 bool
	f.CtxOpen, ok1 = tok.ID(CtxOpen)
	f.CtxEnd, ok2 = tok.ID(CtxClose)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("reader: the tokenizer lacks the special tokens %s and %s", CtxOpen, CtxClose)
	}
	return f, nil
}

// Prompt returns the ids of "[CLS] <ctx> passage </ctx> question", leaving room for reserve
// more tokens within L: the passage is cut from its end when needed (cut reports it). It fails
// when the question alone does not fit.
func (f *Format) Prompt(passage, question string, reserve int) (ids []int, cut bool, err error) {
	q := f.Tok.Encode(question)
	room := f.L - reserve - 3 - len(q)
	if room < 0 {
		return nil, false, fmt.Errorf("reader: question %q is %d tokens, too long for reader.max_length = %d with %d answer tokens", question, len(q), f.L, reserve)
	}
	var p []int
	if passage != "" {
		p = f.Tok.Encode(passage)
	}
	if len(p) > room {
		p, cut = p[:room], true
	}
	ids = make([]int, 0, 3+len(p)+len(q)+reserve)
	ids = append(ids, f.Cls, f.CtxOpen)
	ids = append(ids, p...)
	ids = append(ids, f.CtxEnd)
	return append(ids, q...), cut, nil
}

// Answer returns the ids of an answer followed by [SEP].
func (f *Format) Answer(a string) []int { return append(f.Tok.Encode(a), f.Sep) }

// Question is the question as the reader reads it: the trained phrasing, then the cloze
// prompt that its answer completes.
func Question(q *garden.Question) string { return q.Trained + " " + q.Cloze }

// LMRow is one row of a reader training batch: the tokens, the token predicted after each
// position, and which of those predictions the loss counts. Group names the loss the counted
// targets belong to (GroupMain: language modelling or the answer; GroupReplay: replayed
// pretraining text), each group averaged over its own tokens.
type LMRow struct {
	IDs    []int
	Target []int  // target[t] is the token predicted after position t (len(ids) values)
	Keep   []bool // whether target[t] counts
	group  int
	// RelevanceFirst: the row's first counted target is an IsRel decision ([Relevant] or
	// [Irrelevant]), counted in groupRelevance when the task weighs that group (Self-RAG rows).
	RelevanceFirst bool
}

const (
	GroupMain = iota
	GroupReplay
	groupRelevance // IsRel decisions, with their own mean and weight (selfrag.relevance_loss_weight)
	numGroups
)

// QARow is the training row of prompt -> answer: only the answer tokens (and the closing
// [SEP]) are targets; the passage and question are context.
func QARow(prompt, answer []int) LMRow {
	ids := append(append([]int(nil), prompt...), answer...)
	r := LMRow{IDs: ids, Target: make([]int, len(ids)), Keep: make([]bool, len(ids))}
	for t := 0; t+1 < len(ids); t++ {
		r.Target[t] = ids[t+1]
		r.Keep[t] = t >= len(prompt)-1
	}
	return r
}

// TextRow is a language-modelling row: every next token is a target.
func TextRow(ids []int, group int) LMRow {
	r := LMRow{IDs: ids, Target: make([]int, len(ids)), Keep: make([]bool, len(ids)), group: group}
	for t := 0; t+1 < len(ids); t++ {
		r.Target[t], r.Keep[t] = ids[t+1], true
	}
	return r
}

// PackDocuments tokenizes the documents and packs them whole, in order, into rows of at most L
// tokens: "[CLS] doc [SEP] doc [SEP] ...". A document longer than L-2 tokens is cut (counted).
func (f *Format) PackDocuments(docs []string) (rows [][]int, cut int) {
	row := []int{f.Cls}
	for _, d := range docs {
		ids := f.Tok.Encode(d)
		if len(ids) > f.L-2 {
			ids, cut = ids[:f.L-2], cut+1
		}
		if len(row)+len(ids)+1 > f.L {
			rows = append(rows, row)
			row = []int{f.Cls}
		}
		row = append(append(row, ids...), f.Sep)
	}
	if len(row) > 1 {
		rows = append(rows, row)
	}
	return rows, cut
}

// Task trains the reader on batches of lmRows: one graph of B rows x L tokens with S
// target slots per row, the loss the sum over groups of losses.TokenNLL on that group's
// targets (groupRelevance's times relWeight; with relWeight = 0 the IsRel decisions are
// ordinary targets of their row's group).
type Task struct {
	r            *model.Reader
	B, L, S      int
	seed, stream uint64
	relWeight    float64
	next         func(step int) ([]LMRow, error)
	in           *model.Inputs
	tg           *model.Targets
	masks        [numGroups]*tensor.Dense
	loss         *gorgonia.Node
	trainer.GraphParams

	ids          []int
	mask         []float32
	pos, tgt     []int
	lastExamples int
}

// NewTask is NewWeightedTask without a relevance term (relWeight 0).
func NewTask(r *model.Reader, B, L, S int, seed, stream uint64, next func(step int) ([]LMRow, error)) (*Task, error) {
	return NewWeightedTask(r, B, L, S, seed, stream, 0, next)
}

// NewWeightedTask is NewTask with the IsRel decisions (LMRow.RelevanceFirst) in a
// loss term of their own: their mean NLL times relWeight (> 0) added to the loss.
func NewWeightedTask(r *model.Reader, B, L, S int, seed, stream uint64, relWeight float64, next func(step int) ([]LMRow, error)) (*Task, error) {
	t := &Task{r: r, B: B, L: L, S: S, seed: seed, stream: stream, next: next, relWeight: relWeight,
		ids: make([]int, B*L), mask: make([]float32, B*L), pos: make([]int, B*S), tgt: make([]int, B*S)}
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	t.in = model.NewInputs(g, B, L, "reader")
	t.tg = model.NewTargets(g, B*S, "reader.targets")
	logp, err := r.BuildLogProbs(b, t.in, t.tg, true)
	if err != nil {
		return nil, err
	}
	for gi := range t.masks {
		t.masks[gi] = tensor.New(tensor.WithShape(B*S), tensor.Of(tensor.Float32))
		if gi == groupRelevance && relWeight == 0 {
			continue
		}
		mn := gorgonia.NewTensor(g, tensor.Float32, 1, gorgonia.WithShape(B*S), gorgonia.WithValue(t.masks[gi]), gorgonia.WithName(fmt.Sprintf("reader.group%d", gi)))
		l, err := losses.TokenNLL(logp, mn)
		if err != nil {
			return nil, err
		}
		if gi == groupRelevance && relWeight != 1 {
			if l, err = gorgonia.Mul(l, gorgonia.NewConstant(float32(relWeight))); err != nil {
				return nil, err
			}
		}
		if t.loss == nil {
			t.loss = l
		} else if t.loss, err = gorgonia.Add(t.loss, l); err != nil {
			return nil, err
		}
	}
	if _, err := gorgonia.Grad(t.loss, b.Nodes()...); err != nil {
		return nil, fmt.Errorf("reader gradient graph: %w", err)
	}
	t.GraphParams = trainer.NewGraphParams(b, gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...)))
	return t, nil
}

// let copies rows into the graph's inputs; fewer than B rows leave empty rows.
func (t *Task) let(rows []LMRow) error {
	if len(rows) > t.B {
		return fmt.Errorf("reader batch of %d rows, graph built for %d", len(rows), t.B)
	}
	clear(t.ids)
	clear(t.mask)
	for i := range t.pos {
		t.pos[i], t.tgt[i] = -1, 0
	}
	var masks [numGroups][]float32
	for gi := range masks {
		masks[gi] = t.masks[gi].Data().([]float32)
		clear(masks[gi])
	}
	t.lastExamples = 0
	for b, r := range rows {
		if len(r.IDs) > t.L || len(r.Target) != len(r.IDs) || len(r.Keep) != len(r.IDs) || r.group < 0 || r.group >= numGroups {
			return fmt.Errorf("reader row %d: %d ids, %d targets, %d keep flags, group %d (L = %d)", b, len(r.IDs), len(r.Target), len(r.Keep), r.group, t.L)
		}
		if r.group == GroupMain {
			t.lastExamples++
		}
		copy(t.ids[b*t.L:], r.IDs)
		for j := range r.IDs {
			t.mask[b*t.L+j] = 1
		}
		slot := b * t.S
		first := true
		for j, k := range r.Keep {
			if !k {
				continue
			}
			if slot == (b+1)*t.S {
				return fmt.Errorf("reader row %d has more than %d targets", b, t.S)
			}
			t.pos[slot], t.tgt[slot] = b*t.L+j, r.Target[j]
			if first && r.RelevanceFirst && t.relWeight > 0 {
				masks[groupRelevance][slot] = 1
			} else {
				masks[r.group][slot] = 1
			}
			first = false
			slot++
		}
	}
	if err := t.in.Let(t.ids, t.mask, nil); err != nil {
		return err
	}
	return t.tg.Let(t.pos, t.tgt)
}

func (t *Task) Step(step int) (float64, int, error) {
	rows, err := t.next(step)
	if err != nil {
		return 0, 0, err
	}
	if err := t.let(rows); err != nil {
		return 0, 0, err
	}
	t.r.SetRNG(rand.New(rand.NewPCG(t.seed^t.stream, uint64(step))))
	if err := t.Run(); err != nil {
		return 0, 0, err
	}
	return trainer.ScalarValue(t.loss), t.lastExamples, nil
}

func (t *Task) Close() { t.VM.Close() }

// Cycle returns the B items of step from an endless sequence of seeded shuffles of [0, n):
// epoch e is a permutation drawn from PCG(seed, e), so step alone fixes the batch.
func Cycle(n, B, step int, seed uint64) []int {
	out := make([]int, 0, B)
	var perm []int
	epoch := -1
	for i := step * B; i < (step+1)*B; i++ {
		if e := i / n; e != epoch {
			epoch = e
			perm = rand.New(rand.NewPCG(seed, uint64(e))).Perm(n)
		}
		out = append(out, perm[i%n])
	}
	return out
}

// InitReader copies the weights of the reader.init_from directory into r (export.OpenReader
// lists the layouts). When the directory has a tokenizer.json it must hold the run's tokens,
// id for id: the word embedding rows are indexed by them.
func InitReader(r *model.Reader, tok *tokenize.Tokenizer, dir string, out io.Writer) error {
	d, err := export.OpenReader(dir)
	if err != nil {
		return fmt.Errorf("reader.init_from: %w", err)
	}
	if d.Tokenizer != "" {
		dt, err := tokenize.Load(d.Tokenizer)
		if err != nil {
			return fmt.Errorf("reader.init_from: %w", err)
		}
		for id := 0; id < max(dt.VocabSize(), tok.VocabSize()); id++ {
			a, _ := dt.Token(id)
			b, _ := tok.Token(id)
			if a != b {
				return fmt.Errorf("reader.init_from: %s has token %q at id %d (%d tokens), the run's tokenizer %q (%d tokens); set tokenizer.file = %q",
					d.Tokenizer, a, id, dt.VocabSize(), b, tok.VocabSize(), d.Tokenizer)
			}
		}
	}
	if err := d.Init(r); err != nil {
		return fmt.Errorf("reader.init_from: %w", err)
	}
	fmt.Fprintf(out, "reader: %d parameters from %s (%s layout)\n", len(r.Params()), dir, d.Layout)
	if len(d.Ignored) > 0 {
		fmt.Fprintf(out, "reader: skipped %d tensors by design: %s\n", len(d.Ignored), strings.Join(d.Ignored, ", "))
	}
	return nil
}
