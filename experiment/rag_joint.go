package experiment

import (
	"fmt"
	"math"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// ragIndex is the datastore as joint training sees it: passage vectors encoded once by the
// passage tower at the start (frozen: the index-refresh issue lifts that), an exact
// inner-product index over them, and BM25.
type ragIndex struct {
	ids, texts []string
	vecs       []float32 // N x dim, normalised when cosine
	dim        int
	flat       *index.Flat
	bm25       *index.BM25
	row        map[string]int
	cosine     bool
	tau        float64
	L          int        // tokens per query
	pCut       truncCount // what truncation to L cut of the passages encoded
}

// newRAGIndex encodes every passage with the passage tower of m.
func newRAGIndex(m *model.BiEncoder, tok *tokenize.Tokenizer, ids, texts []string, bm25 *index.BM25, cosine bool, tau float64, L int) (*ragIndex, error) {
	var pCut truncCount
	vecs, err := encodeTexts(m.Passage, tok, texts, L, &pCut)
	if err != nil {
		return nil, err
	}
	dim := m.Passage.Dim()
	if cosine {
		normalizeRows(vecs, dim)
	}
	flat, err := index.NewFlat(ids, vecs, dim)
	if err != nil {
		return nil, err
	}
	x := &ragIndex{ids: ids, texts: texts, vecs: vecs, dim: dim, flat: flat, bm25: bm25, row: map[string]int{}, cosine: cosine, tau: tau, L: L, pCut: pCut}
	for i, id := range ids {
		x.row[id] = i
	}
	return x, nil
}

// encodeQueries encodes questions with the current query tower (no dropout), normalised when
// cosine.
func (x *ragIndex) encodeQueries(m *model.BiEncoder, tok *tokenize.Tokenizer, texts []string) ([]float32, error) {
	qv, err := encodeTexts(m.Query, tok, texts, x.L, nil)
	if err != nil {
		return nil, err
	}
	if x.cosine {
		normalizeRows(qv, x.dim)
	}
	return qv, nil
}

// candidates returns the K passages (row indices) of each query: the dense top K, or under
// "bm25+dense" BM25's top depth rescored by the dense score (ties by row).
func (x *ragIndex) candidates(qv []float32, texts []string, k int, source string, depth int) [][]int {
	out := make([][]int, len(texts))
	if source == "bm25+dense" {
		for i, text := range texts {
			hits := x.bm25.Search(text, depth)
			rows := make([]int, len(hits))
			for j, h := range hits {
				rows[j] = x.row[h.DocID]
			}
			q := qv[i*x.dim : (i+1)*x.dim]
			score := func(r int) float64 { return float64(dot32(q, x.vecs[r*x.dim:(r+1)*x.dim])) }
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
	for i, hits := range x.flat.SearchBatch(qv, k) {
		for _, h := range hits {
			out[i] = append(out[i], x.row[h.DocID])
		}
	}
	return out
}

// logZ returns log sum over every passage of exp(score / tau) for one query vector.
func (x *ragIndex) logZ(q []float32) float64 {
	n := len(x.ids)
	s := make([]float64, n)
	mx := math.Inf(-1)
	for i := range n {
		s[i] = float64(dot32(q, x.vecs[i*x.dim:(i+1)*x.dim])) / x.tau
		mx = math.Max(mx, s[i])
	}
	var sum float64
	for _, v := range s {
		sum += math.Exp(v - mx)
	}
	return mx + math.Log(sum)
}

func dot32(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// ragQuestion is one training question of joint training.
type ragQuestion struct {
	query  string // what the retriever reads (the trained phrasing)
	prompt string // what the reader reads after the passage (readerQuestion)
	answer []int  // answer tokens and [SEP]
}

// ragTask trains the query tower and the reader jointly with a RAG objective (Lewis et al.
// 2020): per step, B questions, each with K candidates retrieved with the current query tower
// from the frozen index; the retrieval logits s [B,K] (losses.RetrievalLogits over the query
// tower's output and the candidates' index vectors) and the reader's log-probabilities of the
// answer tokens given each candidate, logp [B,K,T], enter losses.RAGSequence, RAGToken or
// RAGSequenceFull. No passage label is used: the answer alone decides which candidates help.
// Both towers run without dropout, so the scores match the index's. With
// ragOptions.TrainPassages the candidates' vectors come from the passage tower run in the
// graph over their texts, so it trains too (REALM, realm.go), and ragOptions.Retrieve draws the
// candidates from a refreshed index instead of the frozen one.
// jointBatch draws the batches of the joint-training tasks (ragTask, replugTask): B questions
// of qs per step, their queries encoded by the query tower m, K candidates each (from retr, a
// refreshed index, when set; else from the frozen index x by source and depth), and the query
// tower's graph inputs qIn loaded with the queries.
type jointBatch struct {
	name   string // "rag" or "replug", in errors
	m      *model.BiEncoder
	tok    *tokenize.Tokenizer
	x      *ragIndex
	qs     []ragQuestion
	next   func(step int) []int
	retr   func(step int, qv []float32, texts []string) ([][]int, error)
	B, K   int
	source string
	depth  int
	qIn    *model.Inputs
	// qCut and pCut count what truncation to x.L cut of the queries and of the passages the
	// passage tower reads, over the steps run.
	qCut, pCut truncCount
}

func (t *jointBatch) truncation() (int, []truncPart) {
	return t.x.L, []truncPart{{"queries", &t.qCut}, {"passages", &t.pCut}}
}

// draw returns step's questions (indices into qs), their query vectors qv [B*dim] and each
// one's candidate rows of x.
func (t *jointBatch) draw(step int) ([]int, []float32, [][]int, error) {
	batch := t.next(step)
	if len(batch) != t.B {
		return nil, nil, nil, fmt.Errorf("%s batch of %d questions, graph built for %d", t.name, len(batch), t.B)
	}
	texts := make([]string, t.B)
	for i, qi := range batch {
		texts[i] = t.qs[qi].query
	}
	qv, err := t.x.encodeQueries(t.m, t.tok, texts)
	if err != nil {
		return nil, nil, nil, err
	}
	var cands [][]int
	if t.retr != nil {
		if cands, err = t.retr(step, qv, texts); err != nil {
			return nil, nil, nil, err
		}
	} else {
		cands = t.x.candidates(qv, texts, t.K, t.source, t.depth)
	}
	qb := t.qCut.add(t.tok.EncodeBatch(texts, t.x.L))
	if err := t.qIn.Let(qb.IDs, qb.Mask, qb.Types); err != nil {
		return nil, nil, nil, err
	}
	return batch, qv, cands, nil
}

type ragTask struct {
	jointBatch
	r *model.Reader
	f *readerFormat

	T     int
	dvec  *tensor.Dense // [B*K,H] candidate vectors from the index (nil with TrainPassages)
	pIn   *model.Inputs // B*K candidate passages (TrainPassages only)
	rIn   *model.Inputs // B*K reader rows
	tg    *model.Targets
	amask *tensor.Dense // [B,T]
	logZ  *tensor.Dense // [B], "full" candidate mass only
	loss  *gorgonia.Node
	graphParams
	trainable []trainer.Param

	ids      []int
	mask     []float32
	pos, tgt []int
	cut      int // passages cut to fit reader.max_length
}

// ragOptions are the settings of a joint training task (the [rag] section).
type ragOptions struct {
	B, K         int    // questions per step, candidates per question
	Objective    string // "sequence" or "token"
	Mass         string // "renormalize" or "full"
	Source       string // "dense" or "bm25+dense"
	BM25Depth    int    // BM25 hits rescored under "bm25+dense"
	Sim          losses.Similarity
	UpdateReader bool
	// TrainPassages builds the passage tower into the graph over the candidates' texts, so
	// that both towers train (REALM); false reads the candidates' vectors from x (frozen).
	TrainPassages bool
	// Retrieve, if set, returns each question's K candidate rows of x at step (REALM: from
	// the refresher's serving index); nil uses x.candidates.
	Retrieve func(step int, qv []float32, texts []string) ([][]int, error)
}

// newRAGTask builds the joint training graph for batches of o.B of the questions qs, next(step)
// naming the batch (indices into qs).
func newRAGTask(m *model.BiEncoder, r *model.Reader, tok *tokenize.Tokenizer, f *readerFormat, x *ragIndex, qs []ragQuestion,
	o ragOptions, next func(step int) []int) (*ragTask, error) {
	T := 1
	for _, q := range qs {
		T = max(T, len(q.answer))
	}
	B, K, objective, mass, sim := o.B, o.K, o.Objective, o.Mass, o.Sim
	t := &ragTask{jointBatch: jointBatch{name: "rag", m: m, tok: tok, x: x, qs: qs, next: next, retr: o.Retrieve, B: B, K: K, source: o.Source, depth: o.BM25Depth},
		r: r, f: f, T: T}
	L := f.L
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	t.qIn = model.NewInputs(g, B, x.L, "rag.query")
	q, err := m.Query.Build(b, t.qIn, false)
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
		t.dvec = tensor.New(tensor.WithShape(B*K, x.dim), tensor.Of(tensor.Float32))
		d = gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(B*K, x.dim), gorgonia.WithValue(t.dvec), gorgonia.WithName("rag.candidates"))
	}
	towerParams := len(b.Bound())
	s, err := losses.RetrievalLogits(q, d, K, x.tau, sim)
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
	t.graphParams = newGraphParams(b, gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...)))
	t.trainable = t.graphParams.params
	if !o.UpdateReader {
		t.trainable = t.graphParams.params[:towerParams]
	}
	t.ids, t.mask = make([]int, B*K*L), make([]float32, B*K*L)
	t.pos, t.tgt = make([]int, B*K*T), make([]int, B*K*T)
	return t, nil
}

func (t *ragTask) Params() []trainer.Param { return t.trainable }

func (t *ragTask) Step(step int) (float64, int, error) {
	batch, qv, cands, err := t.draw(step)
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
	L, dim := t.f.L, t.x.dim
	for i := range t.pos {
		t.pos[i], t.tgt[i] = -1, 0
	}
	for b, qi := range batch {
		q := t.qs[qi]
		if len(cands[b]) < t.K {
			return 0, 0, fmt.Errorf("question %q: %d candidates, want K = %d", q.query, len(cands[b]), t.K)
		}
		for j := range q.answer {
			am[b*t.T+j] = 1
		}
		for k, row := range cands[b] {
			if dv != nil {
				copy(dv[(b*t.K+k)*dim:(b*t.K+k+1)*dim], t.x.vecs[row*dim:(row+1)*dim])
			} else {
				ptexts = append(ptexts, t.x.texts[row])
			}
			prompt, cut, err := t.f.prompt(t.x.texts[row], q.prompt, len(q.answer))
			if err != nil {
				return 0, 0, err
			}
			if cut {
				t.cut++
			}
			r := b*t.K + k
			seq := append(prompt, q.answer...)
			copy(t.ids[r*L:], seq)
			for j := range seq {
				t.mask[r*L+j] = 1
			}
			for j, a := range q.answer {
				t.pos[r*t.T+j] = r*L + len(prompt) - 1 + j
				t.tgt[r*t.T+j] = a
			}
		}
		if t.logZ != nil {
			t.logZ.Data().([]float32)[b] = float32(t.x.logZ(qv[b*dim : (b+1)*dim]))
		}
	}
	if t.pIn != nil {
		pb := t.pCut.add(t.tok.EncodeBatch(ptexts, t.x.L))
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
	if err := t.run(); err != nil {
		return 0, 0, err
	}
	return scalarValue(t.loss), t.B, nil
}

func (t *ragTask) Close() { t.vm.Close() }
