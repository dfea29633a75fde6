package ragjoint

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// Index is the datastore as joint training sees it: passage vectors encoded once by the
// passage tower at the start (frozen: the index-refresh issue lifts that), an exact
// inner-product index over them, and BM25.
type Index struct {
	IDs, Texts  []string
	Vecs        []float32 // N x dim, normalised when cosine
	Dim         int
	Flat        *index.Flat
	BM25        *index.BM25
	Row         map[string]int
	Cosine      bool
	Temperature float64
	L           int                 // tokens per query
	PassageCut  tokenize.TruncCount // what truncation to L cut of the passages encoded
}

// NewIndex encodes every passage with the passage tower of m.
func NewIndex(m *model.BiEncoder, tok *tokenize.Tokenizer, ids, texts []string, bm25 *index.BM25, cosine bool, tau float64, L int) (*Index, error) {
	var pCut tokenize.TruncCount
	vecs, err := biencoder.EncodeTexts(m.Passage, tok, texts, L, &pCut)
	if err != nil {
		return nil, err
	}
	dim := m.Passage.Dim()
	if cosine {
		biencoder.NormalizeRows(vecs, dim)
	}
	flat, err := index.NewFlat(ids, vecs, dim)
	if err != nil {
		return nil, err
	}
	x := &Index{IDs: ids, Texts: texts, Vecs: vecs, Dim: dim, Flat: flat, BM25: bm25, Row: map[string]int{}, Cosine: cosine, Temperature: tau, L: L, PassageCut: pCut}
	for i, id := range ids {
		x.Row[id] = i
	}
	return x, nil
}

// EncodeQueries encodes questions with the current query tower (no dropout), normalised when
// cosine.
func (x *Index) EncodeQueries(m *model.BiEncoder, tok *tokenize.Tokenizer, texts []string) ([]float32, error) {
	qv, err := biencoder.EncodeTexts(m.Query, tok, texts, x.L, nil)
	if err != nil {
		return nil, err
	}
	if x.Cosine {
		biencoder.NormalizeRows(qv, x.Dim)
	}
	return qv, nil
}

// candidates returns the K passages (row indices) of each query: the dense top K, or under
// "bm25+dense" BM25's top depth rescored by the dense score (ties by row).
func (x *Index) candidates(qv []float32, texts []string, k int, source string, depth int) [][]int {
	out := make([][]int, len(texts))
	if source == "bm25+dense" {
		for i, text := range texts {
			hits := x.BM25.Search(text, depth)
			rows := make([]int, len(hits))
			for j, h := range hits {
				rows[j] = x.Row[h.DocID]
			}
			q := qv[i*x.Dim : (i+1)*x.Dim]
			score := func(r int) float64 { return float64(index.DotInOrder(q, x.Vecs[r*x.Dim:(r+1)*x.Dim])) }
			slices.SortStableFunc(rows, func(a, b int) int {
				sa, sb := score(a), score(b)
				switch {
				case sa > sb:
					return -1
				case sa < sb:
					return 1
				}
				return a - b
			})
			out[i] = rows[:min(k, len(rows))]
		}
		return out
	}
	for i, hits := range x.Flat.SearchBatch(qv, k) {
		for _, h := range hits {
			out[i] = append(out[i], x.Row[h.DocID])
		}
	}
	return out
}

// logZ returns log sum over every passage of exp(score / tau) for one query vector.
func (x *Index) logZ(q []float32) float64 {
	n := len(x.IDs)
	s := make([]float64, n)
	mx := math.Inf(-1)
	for i := range n {
		s[i] = float64(index.DotInOrder(q, x.Vecs[i*x.Dim:(i+1)*x.Dim])) / x.Temperature
		mx = math.Max(mx, s[i])
	}
	var sum float64
	for _, v := range s {
		sum += math.Exp(v - mx)
	}
	return mx + math.Log(sum)
}

// Question is one training question of joint training.
type Question struct {
	Query  string // what the retriever reads (the trained phrasing)
	Prompt string // what the reader reads after the passage (ragreader.Question)
	Answer []int  // answer tokens and [SEP]
}

// Task trains the query tower and the reader jointly with a RAG objective (Lewis et al.
// 2020): per step, B questions, each with K candidates retrieved with the current query tower
// from the frozen index; the retrieval logits s [B,K] (losses.RetrievalLogits over the query
// tower's output and the candidates' index vectors) and the reader's log-probabilities of the
// answer tokens given each candidate, logp [B,K,T], enter losses.RAGSequence, RAGToken or
// RAGSequenceFull. No passage label is used: the answer alone decides which candidates help.
// Both towers run without dropout, so the scores match the index's. With
// TaskOptions.TrainPassages the candidates' vectors come from the passage tower run in the
// graph over their texts, so it trains too (REALM, package realm), and TaskOptions.Retrieve draws the
// candidates from a refreshed index instead of the frozen one.
// JointBatch draws the batches of the joint-training tasks (Task, replug's task): B questions
// of qs per step, their queries encoded by the query tower M, K candidates each (from Retrieve, a
// refreshed index, when set; else from the frozen Index by Source and BM25Depth), and the query
// tower's graph inputs QueryIn loaded with the queries.
type JointBatch struct {
	Name      string // "rag" or "replug", in errors
	M         *model.BiEncoder
	Tok       *tokenize.Tokenizer
	Index     *Index
	Qs        []Question
	Next      func(step int) []int
	Retrieve  func(step int, qv []float32, texts []string) ([][]int, error)
	B, K      int
	Source    string
	BM25Depth int
	QueryIn   *model.Inputs
	// qCut and pCut count what truncation to x.L cut of the queries and of the passages the
	// passage tower reads, over the steps run.
	qCut, PassageCut tokenize.TruncCount
}

func (t *JointBatch) Truncation() (int, []tokenize.TruncPart) {
	return t.Index.L, []tokenize.TruncPart{{Name: "queries", Count: &t.qCut}, {Name: "passages", Count: &t.PassageCut}}
}

// Draw returns step's questions (indices into qs), their query vectors qv [B*dim] and each
// one's candidate rows of x.
func (t *JointBatch) Draw(step int) ([]int, []float32, [][]int, error) {
	batch := t.Next(step)
	if len(batch) != t.B {
		return nil, nil, nil, fmt.Errorf("%s batch of %d questions, graph built for %d", t.Name, len(batch), t.B)
	}
	texts := make([]string, t.B)
	for i, qi := range batch {
		texts[i] = t.Qs[qi].Query
	}
	qv, err := t.Index.EncodeQueries(t.M, t.Tok, texts)
	if err != nil {
		return nil, nil, nil, err
	}
	var cands [][]int
	if t.Retrieve != nil {
		if cands, err = t.Retrieve(step, qv, texts); err != nil {
			return nil, nil, nil, err
		}
	} else {
		cands = t.Index.candidates(qv, texts, t.K, t.Source, t.BM25Depth)
	}
	qb := t.qCut.Add(t.Tok.EncodeBatch(texts, t.Index.L))
	if err := t.QueryIn.Let(qb.IDs, qb.Mask, qb.Types); err != nil {
		return nil, nil, nil, err
	}
	return batch, qv, cands, nil
}

// Task is the joint retriever-reader training task of NewTask (kinds rag and realm).
type Task struct {
	JointBatch
	r *model.Reader
	f *ragreader.Format

	T     int
	dvec  *tensor.Dense // [B*K,H] candidate vectors from the index (nil with TrainPassages)
	pIn   *model.Inputs // B*K candidate passages (TrainPassages only)
	rIn   *model.Inputs // B*K reader rows
	tg    *model.Targets
	amask *tensor.Dense // [B,T]
	logZ  *tensor.Dense // [B], "full" candidate mass only
	drop  *tensor.Dense // [B,B*K], in-batch negatives only: 1 where a column repeats one counted
	loss  *gorgonia.Node
	trainer.GraphParams
	trainable []trainer.Param

	ids      []int
	mask     []float32
	pos, tgt []int
	Cut      int // passages cut to fit reader.max_length

	passage     []int // indices into trainable of the passage tower's parameters
	frozenSteps int   // steps during which the passage tower does not train
	step        int   // the step last run
}

// TaskOptions are the settings of a joint training task (the [rag] section).
type TaskOptions struct {
	B, K         int    // questions per step, candidates per question
	Objective    string // "sequence" or "token"
	Mass         string // "renormalize" or "full"
	Source       string // "dense" or "bm25+dense"
	BM25Depth    int    // BM25 hits rescored under "bm25+dense"
	Similarity   losses.Similarity
	UpdateReader bool
	// TrainPassages builds the passage tower into the graph over the candidates' texts, so
	// that both towers train (REALM); false reads the candidates' vectors from x (frozen).
	TrainPassages bool
	// Retrieve, if set, returns each question's K candidate rows of x at step (REALM: from
	// the refresher's serving index); nil uses x.candidates.
	Retrieve func(step int, qv []float32, texts []string) ([][]int, error)
	// InBatch normalises each question's retrieval distribution over every candidate of the
	// batch (losses.RAGSequenceInBatch; sequence objective, renormalize mass only): the other
	// questions' candidates are negatives.
	InBatch bool
	// PassageLRScale (0: 1) multiplies the learning rate of the passage tower, and
	// PassageWarmupSteps keeps it frozen for the first steps (TrainPassages only).
	PassageLRScale     float64
	PassageWarmupSteps int
	// ClipPerTower clips the passage tower's gradient by its own norm (train.grad_clip),
	// apart from the query tower's and the reader's.
	ClipPerTower bool
}

// NewTask builds the joint training graph for batches of o.B of the questions qs, next(step)
// naming the batch (indices into qs).
func NewTask(m *model.BiEncoder, r *model.Reader, tok *tokenize.Tokenizer, f *ragreader.Format, x *Index, qs []Question,
	o TaskOptions, next func(step int) []int) (*Task, error) {
	T := 1
	for _, q := range qs {
		T = max(T, len(q.Answer))
	}
	B, K, objective, mass, sim := o.B, o.K, o.Objective, o.Mass, o.Similarity
	t := &Task{JointBatch: JointBatch{Name: "rag", M: m, Tok: tok, Index: x, Qs: qs, Next: next, Retrieve: o.Retrieve, B: B, K: K, Source: o.Source, BM25Depth: o.BM25Depth},
		r: r, f: f, T: T}
	L := f.L
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	t.QueryIn = model.NewInputs(g, B, x.L, "rag.query")
	q, err := m.Query.Build(b, t.QueryIn, false)
	if err != nil {
		return nil, err
	}
	var d *gorgonia.Node
	if o.TrainPassages {
		if mass == "full" {
			return nil, fmt.Errorf("rag: candidate_mass = \"full\" needs the index's passage vectors; it cannot train the passage tower")
		}
		t.pIn = model.NewInputs(g, B*K, x.L, "rag.passages")
		if d, err = m.Passage.Build(b, t.pIn, false); err != nil {
			return nil, err
		}
	} else {
		t.dvec = tensor.New(tensor.WithShape(B*K, x.Dim), tensor.Of(tensor.Float32))
		d = gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(B*K, x.Dim), gorgonia.WithValue(t.dvec), gorgonia.WithName("rag.candidates"))
	}
	towerParams := len(b.Bound())
	var s *gorgonia.Node
	if o.InBatch {
		if objective != "sequence" || mass != "renormalize" {
			return nil, fmt.Errorf("rag: in-batch negatives need the sequence objective and candidate_mass = \"renormalize\"")
		}
		s, err = losses.BatchRetrievalLogits(q, d, x.Temperature, sim)
	} else {
		s, err = losses.RetrievalLogits(q, d, K, x.Temperature, sim)
	}
	if err != nil {
		return nil, err
	}
	t.rIn = model.NewInputs(g, B*K, L, "rag.reader")
	t.tg = model.NewTargets(g, B*K*T, "rag.answer")
	lp, err := r.BuildLogProbs(b, t.rIn, t.tg, false)
	if err != nil {
		return nil, err
	}
	logp, err := gorgonia.Reshape(lp, tensor.Shape{B, K, T})
	if err != nil {
		return nil, err
	}
	t.amask = tensor.New(tensor.WithShape(B, T), tensor.Of(tensor.Float32))
	am := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(B, T), gorgonia.WithValue(t.amask), gorgonia.WithName("rag.answer_mask"))
	switch {
	case o.InBatch:
		t.drop = tensor.New(tensor.WithShape(B, B*K), tensor.Of(tensor.Float32))
		dn := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(B, B*K), gorgonia.WithValue(t.drop), gorgonia.WithName("rag.drop"))
		t.loss, err = losses.RAGSequenceInBatch(s, dn, logp, am)
	case mass == "full" && objective == "sequence":
		t.logZ = tensor.New(tensor.WithShape(B), tensor.Of(tensor.Float32))
		z := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(B), gorgonia.WithValue(t.logZ), gorgonia.WithName("rag.logZ"))
		t.loss, err = losses.RAGSequenceFull(s, z, logp, am)
	case mass == "full":
		return nil, fmt.Errorf("rag: candidate_mass = \"full\" is implemented for the sequence objective only")
	case objective == "sequence":
		t.loss, err = losses.RAGSequence(s, logp, am)
	case objective == "token":
		t.loss, err = losses.RAGToken(s, logp, am)
	default:
		return nil, fmt.Errorf("rag: unknown objective %q", objective)
	}
	if err != nil {
		return nil, err
	}
	if _, err := gorgonia.Grad(t.loss, b.Nodes()...); err != nil {
		return nil, fmt.Errorf("rag gradient graph: %w", err)
	}
	t.GraphParams = trainer.NewGraphParams(b, gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...)))
	t.trainable = t.GraphParams.Params()
	if !o.UpdateReader {
		t.trainable = t.GraphParams.Params()[:towerParams]
	}
	if o.TrainPassages {
		for i := range t.trainable {
			if strings.HasPrefix(t.trainable[i].Name, model.PrefixPassage+".") {
				t.trainable[i].LRScale = o.PassageLRScale
				if o.ClipPerTower {
					t.trainable[i].ClipGroup = model.PrefixPassage
				}
				t.passage = append(t.passage, i)
			}
		}
		t.frozenSteps = o.PassageWarmupSteps
	}
	t.ids, t.mask = make([]int, B*K*L), make([]float32, B*K*L)
	t.pos, t.tgt = make([]int, B*K*T), make([]int, B*K*T)
	return t, nil
}

// Params are the parameters the last step trains: all trainable ones, less the passage tower
// during its first TaskOptions.PassageWarmupSteps steps.
func (t *Task) Params() []trainer.Param {
	if t.step >= t.frozenSteps || len(t.passage) == 0 {
		return t.trainable
	}
	out := make([]trainer.Param, 0, len(t.trainable)-len(t.passage))
	for i, p := range t.trainable {
		if !slices.Contains(t.passage, i) {
			out = append(out, p)
		}
	}
	return out
}

func (t *Task) Step(step int) (float64, int, error) {
	t.step = step
	batch, qv, cands, err := t.Draw(step)
	if err != nil {
		return 0, 0, err
	}
	var dv []float32
	var ptexts []string
	if t.dvec != nil {
		dv = t.dvec.Data().([]float32)
	}
	am := t.amask.Data().([]float32)
	clear(am)
	clear(t.ids)
	clear(t.mask)
	L, dim := t.f.L, t.Index.Dim
	for i := range t.pos {
		t.pos[i], t.tgt[i] = -1, 0
	}
	for b, qi := range batch {
		q := t.Qs[qi]
		if len(cands[b]) < t.K {
			return 0, 0, fmt.Errorf("question %q: %d candidates, want K = %d", q.Query, len(cands[b]), t.K)
		}
		for j := range q.Answer {
			am[b*t.T+j] = 1
		}
		for k, row := range cands[b] {
			if dv != nil {
				copy(dv[(b*t.K+k)*dim:(b*t.K+k+1)*dim], t.Index.Vecs[row*dim:(row+1)*dim])
			} else {
				ptexts = append(ptexts, t.Index.Texts[row])
			}
			prompt, cut, err := t.f.Prompt(t.Index.Texts[row], q.Prompt, len(q.Answer))
			if err != nil {
				return 0, 0, err
			}
			if cut {
				t.Cut++
			}
			r := b*t.K + k
			seq := append(prompt, q.Answer...)
			copy(t.ids[r*L:], seq)
			for j := range seq {
				t.mask[r*L+j] = 1
			}
			for j, a := range q.Answer {
				t.pos[r*t.T+j] = r*L + len(prompt) - 1 + j
				t.tgt[r*t.T+j] = a
			}
		}
		if t.logZ != nil {
			t.logZ.Data().([]float32)[b] = float32(t.Index.logZ(qv[b*dim : (b+1)*dim]))
		}
	}
	if t.drop != nil {
		fillDrop(t.drop.Data().([]float32), cands, t.K)
	}
	if t.pIn != nil {
		pb := t.PassageCut.Add(t.Tok.EncodeBatch(ptexts, t.Index.L))
		if err := t.pIn.Let(pb.IDs, pb.Mask, pb.Types); err != nil {
			return 0, 0, err
		}
	}
	if err := t.rIn.Let(t.ids, t.mask, nil); err != nil {
		return 0, 0, err
	}
	if err := t.tg.Let(t.pos, t.tgt); err != nil {
		return 0, 0, err
	}
	if err := t.Run(); err != nil {
		return 0, 0, err
	}
	return trainer.ScalarValue(t.loss), t.B, nil
}

func (t *Task) Close() { t.VM.Close() }

// fillDrop sets drop [B, B*K] for the batch's candidates (rows of the datastore): question b
// keeps its own K and every other candidate once, dropping a repeat of one of its own or of a
// column already kept.
func fillDrop(drop []float32, cands [][]int, K int) {
	B := len(cands)
	n := B * K
	seen := map[int]bool{}
	for b := range B {
		clear(seen)
		for _, r := range cands[b][:K] {
			seen[r] = true
		}
		for j := range n {
			drop[b*n+j] = 0
			if j/K == b {
				continue
			}
			if r := cands[j/K][j%K]; seen[r] {
				drop[b*n+j] = 1
			} else {
				seen[r] = true
			}
		}
	}
}
