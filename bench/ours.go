package bench

import (
	"crypto/sha256"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// job is one workload on our side: run is timed; check, called after, reports what lets the
// orchestrator compare both sides' results (a loss, a digest of the rankings).
type job interface {
	run() (units int, err error)
	check() (loss float64, digest string)
	close()
}

// newJob builds workload name from the files Prepare wrote in dir.
func newJob(name, dir string) (job, error) {
	if strings.HasPrefix(name, "bm25-") {
		ids, texts, err := readTSV(filepath.Join(dir, "corpus.tsv"))
		if err != nil {
			return nil, err
		}
		qids, qtexts, err := readTSV(filepath.Join(dir, "queries.tsv"))
		if err != nil {
			return nil, err
		}
		d, err := LoadData(filepath.Join(dir, "data.json"))
		if err != nil {
			return nil, err
		}
		return newBM25Job(name, ids, texts, qids, qtexts, d.Shapes.Depth)
	}
	if w, ok := Find(name); ok && w.SciFact {
		return newSciFactJob(name, dir)
	} else if ok && w.SmolLM2 {
		return newSmolLM2Job(name, dir)
	}
	d, err := LoadData(filepath.Join(dir, "data.json"))
	if err != nil {
		return nil, err
	}
	s := d.Shapes
	opt := optim{WD: s.WD, Clip: s.Clip, LR: s.LR}
	switch name {
	case "bi-transformer-step":
		return newBiJob(d.Bi, s.transformer(s.Vocab, s.L), biencoder.Lengths{Query: s.L, Passage: s.L}, s.Temperature, opt)
	case "bi-bow-step":
		return newBiJob(d.Bi, s.bow(), biencoder.Lengths{Query: s.L, Passage: s.L}, s.Temperature, opt)
	case "encode-transformer":
		return newEncodeJob(d, s.transformer(s.Vocab, s.L))
	case "encode-bow":
		return newEncodeJob(d, s.bow())
	case "cross-step":
		cfg := s.transformer(s.Vocab, s.CrossL)
		cfg.Pooling = model.PoolingCLS
		return newCrossJob(cfg, d.Cross, s.CrossLists, s.CrossK, s.CrossL, opt)
	case "cross-score":
		cfg := s.transformer(s.Vocab, s.CrossL)
		cfg.Pooling = model.PoolingCLS
		return newScoreJob(cfg, d.Score, s.ScoreB)
	case "reader-step":
		return newReaderJob(d)
	}
	return nil, fmt.Errorf("bench: unknown workload %q", name)
}

// newSciFactJob builds a pretrained-shape workload (random weights) from scifact.json.
func newSciFactJob(name, dir string) (job, error) {
	d, err := LoadSciFact(filepath.Join(dir, "scifact.json"))
	if err != nil {
		return nil, err
	}
	s := d.Shapes
	opt := optim{WD: s.WD, Clip: s.Clip, LR: s.LR}
	switch name {
	case "minilm-train":
		return newBiJob(d.Bi, s.MiniLM.config(s.Dropout, s.MiniLM.Pooling), biencoder.Lengths{Query: s.QueryL, Passage: s.PassageL}, s.Temperature, opt)
	case "minilm-encode":
		return newDynamicEncodeJob(s.MiniLM.config(0, s.MiniLM.Pooling), d.Encode, s.EncodeL)
	case "bge-small-encode":
		return newDynamicEncodeJob(s.BGESmall.config(0, s.BGESmall.Pooling), d.Encode, s.EncodeL)
	case "minilm-cross-train":
		return newCrossJob(s.MiniLM.config(s.Dropout, model.PoolingCLS), d.Cross, s.CrossLists, s.CrossK, s.CrossL, opt)
	case "minilm-cross-score":
		return newScoreJob(s.MiniLM.config(0, model.PoolingCLS), d.Score, s.ScoreB)
	}
	return nil, fmt.Errorf("bench: unknown workload %q", name)
}

// optim is the optimiser of a training workload: AdamW's decoupled weight decay, the global
// gradient-norm clip and the learning rate.
type optim struct{ WD, Clip, LR float64 }

func batch(s Seqs) tokenize.Batch {
	b := tokenize.Batch{B: s.N, L: s.L, IDs: s.IDs, Mask: floats(s.Mask), Types: s.Types}
	if b.Types == nil {
		b.Types = make([]int, len(s.IDs))
	}
	return b
}

func floats(v []int) []float32 {
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return f
}

// biJob: one retriever training step (biencoder.BiStep: both towers, masked InfoNCE with cosine
// similarity, clipping, AdamW) per run.
type biJob struct {
	s       *biencoder.BiStep
	q, p    []tokenize.Batch
	keep    [][]float32
	lr      float64
	step    int
	loss    float64
	queries int
}

func newBiJob(batches []BiBatch, cfg model.EncoderConfig, lens biencoder.Lengths, tau float64, o optim) (*biJob, error) {
	if len(batches) == 0 {
		return nil, fmt.Errorf("bench: no retriever batches")
	}
	B := batches[0].Q.N
	m, err := model.NewBiEncoder(cfg, true, 42)
	if err != nil {
		return nil, err
	}
	st, err := biencoder.NewBiStep(m, biencoder.BiStepOptions{B: B, N: 2 * B, Lengths: lens, Temperature: tau, Similarity: losses.Cosine, Masked: true, WeightDecay: o.WD, GradClip: o.Clip, Seed: 42})
	if err != nil {
		return nil, err
	}
	j := &biJob{s: st, lr: o.LR, queries: B}
	for _, b := range batches {
		j.q, j.p, j.keep = append(j.q, batch(b.Q)), append(j.p, batch(b.P)), append(j.keep, floats(b.Keep))
	}
	return j, nil
}

func (j *biJob) run() (int, error) {
	i := j.step % len(j.q)
	loss, err := j.s.Step(j.step, j.q[i], j.p[i], j.keep[i], j.lr)
	j.step++
	j.loss = loss
	return j.queries, err
}
func (j *biJob) check() (float64, string) { return j.loss, "" }
func (j *biJob) close()                   { j.s.Close() }

// encodeJob: EncodeN passages through the passage tower's inference graph per run.
type encodeJob struct {
	r   *model.EncoderRunner
	in  tokenize.Batch
	sum float64
}

func newEncodeJob(d *Data, cfg model.EncoderConfig) (*encodeJob, error) {
	m, err := model.NewBiEncoder(cfg, true, 42)
	if err != nil {
		return nil, err
	}
	r, err := model.NewEncoderRunner(m.Passage, d.Shapes.EncodeB, d.Shapes.L)
	if err != nil {
		return nil, err
	}
	return &encodeJob{r: r, in: batch(d.Encode)}, nil
}

func (j *encodeJob) run() (int, error) {
	v, err := j.r.Encode(j.in.IDs, j.in.Mask, nil, j.in.B)
	if err != nil {
		return 0, err
	}
	j.sum = 0
	for _, x := range v {
		j.sum += float64(x) * float64(x)
	}
	return j.in.B, nil
}
func (j *encodeJob) check() (float64, string) { return j.sum, "" }
func (j *encodeJob) close()                   { j.r.Close() }

// dynamicEncodeJob: the passages of r through the project's inference Encoder with dynamic
// padding (biencoder.Encoder.EncodeIDs: sorted by length, each batch padded to its longest, one graph
// per padded length, the large ones rebuilt on every call as Encode does) per run.
type dynamicEncodeJob struct {
	e   *biencoder.Encoder
	ids [][]int
	sum float64
}

func newDynamicEncodeJob(cfg model.EncoderConfig, r Ragged, maxLen int) (*dynamicEncodeJob, error) {
	m, err := model.NewBiEncoder(cfg, true, 42)
	if err != nil {
		return nil, err
	}
	e, err := biencoder.NewEncoder(m.Passage, nil, maxLen, true)
	if err != nil {
		return nil, err
	}
	return &dynamicEncodeJob{e: e, ids: r.IDs}, nil
}

func (j *dynamicEncodeJob) run() (int, error) {
	v, err := j.e.EncodeIDs(j.ids)
	if err != nil {
		return 0, err
	}
	j.sum = 0
	for _, x := range v {
		j.sum += float64(x) * float64(x)
	}
	return len(j.ids), nil
}
func (j *dynamicEncodeJob) check() (float64, string) { return j.sum, "" }
func (j *dynamicEncodeJob) close()                   { j.e.Close() }

// trainGraph runs a training graph as the experiment package does: forward and backward, global
// clipping, AdamW, zeroing the gradients the machine accumulates (trainer.GraphParams).
type trainGraph struct {
	trainer.GraphParams
	opt  *trainer.AdamW
	clip float64
	lr   float64
}

func newTrainGraph(g *gorgonia.ExprGraph, b *model.Binder, loss *gorgonia.Node, o optim) (*trainGraph, error) {
	if _, err := gorgonia.Grad(loss, b.Nodes()...); err != nil {
		return nil, err
	}
	model.ShareBuffers(g, loss)
	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...))
	return &trainGraph{GraphParams: trainer.NewGraphParams(b, vm), opt: trainer.NewAdamW(o.WD), clip: o.Clip, lr: o.LR}, nil
}

func (t *trainGraph) step() error {
	if err := t.Run(); err != nil {
		return err
	}
	trainer.ClipGlobalNorm(t.Params(), t.clip)
	t.opt.Step(t.Params(), t.lr)
	t.AfterUpdate()
	return nil
}

// crossJob: one cross-encoder training step on CrossLists lists of CrossK pairs, the graph of the
// reranker recipe (CrossEncoder.Score, losses.Listwise).
type crossJob struct {
	m       *model.CrossEncoder
	tg      *trainGraph
	in      *model.Inputs
	labels  *tensor.Dense
	loss    *gorgonia.Node
	batches []CrossBatch
	step    int
	last    float64
}

func newCrossJob(cfg model.EncoderConfig, batches []CrossBatch, B, K, L int, o optim) (*crossJob, error) {
	m, err := model.NewCrossEncoder(cfg, 42)
	if err != nil {
		return nil, err
	}
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	j := &crossJob{m: m, batches: batches, in: model.NewInputs(g, B*K, L, "pair")}
	sc, err := m.Score(b, j.in, true)
	if err != nil {
		return nil, err
	}
	a, err := gorgonia.Reshape(sc, tensor.Shape{B, K})
	if err != nil {
		return nil, err
	}
	j.labels = tensor.New(tensor.WithShape(B, K), tensor.Of(tensor.Float32))
	y := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(B, K), gorgonia.WithValue(j.labels), gorgonia.WithName("labels"))
	if j.loss, err = losses.Listwise(a, y); err != nil {
		return nil, err
	}
	if j.tg, err = newTrainGraph(g, b, j.loss, o); err != nil {
		return nil, err
	}
	return j, nil
}

func (j *crossJob) run() (int, error) {
	cb := j.batches[j.step%len(j.batches)]
	j.step++
	copy(j.labels.Data().([]float32), floats(cb.Labels))
	in := batch(cb.Pairs)
	if err := j.in.Let(in.IDs, in.Mask, in.Types); err != nil {
		return 0, err
	}
	if err := j.tg.step(); err != nil {
		return 0, err
	}
	j.last = scalar(j.loss)
	return in.B, nil
}
func (j *crossJob) check() (float64, string) { return j.last, "" }
func (j *crossJob) close()                   { j.tg.VM.Close() }

// scoreJob: ScoreN pairs through the cross-encoder's inference graph per run.
type scoreJob struct {
	r   *model.ScoreRunner
	in  tokenize.Batch
	sum float64
}

func newScoreJob(cfg model.EncoderConfig, pairs Seqs, B int) (*scoreJob, error) {
	m, err := model.NewCrossEncoder(cfg, 42)
	if err != nil {
		return nil, err
	}
	r, err := model.NewScoreRunner(m, B, pairs.L)
	if err != nil {
		return nil, err
	}
	return &scoreJob{r: r, in: batch(pairs)}, nil
}

func (j *scoreJob) run() (int, error) {
	v, err := j.r.Score(j.in.IDs, j.in.Mask, j.in.Types, j.in.B)
	if err != nil {
		return 0, err
	}
	j.sum = 0
	for _, x := range v {
		j.sum += float64(x)
	}
	return j.in.B, nil
}
func (j *scoreJob) check() (float64, string) { return j.sum, "" }
func (j *scoreJob) close()                   { j.r.Close() }

// readerJob: one language-model step of the reader (causal Transformer, tied embeddings,
// losses.TokenNLL over every next token) on ReaderB full rows.
type readerJob struct {
	tg   *trainGraph
	loss *gorgonia.Node
	last float64
	rows int
}

func newReaderJob(d *Data) (*readerJob, error) {
	s := d.Shapes
	r, err := model.NewReader(s.transformer(s.ReaderVocab, s.ReaderL), 42)
	if err != nil {
		return nil, err
	}
	B, L := s.ReaderB, s.ReaderL
	M := B * (L - 1)
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	in := model.NewInputs(g, B, L, "reader")
	tg := model.NewTargets(g, M, "reader.targets")
	logp, err := r.BuildLogProbs(b, in, tg, true)
	if err != nil {
		return nil, err
	}
	mask := tensor.New(tensor.WithShape(M), tensor.WithBacking(floats(ones(M))))
	mn := gorgonia.NewTensor(g, tensor.Float32, 1, gorgonia.WithShape(M), gorgonia.WithValue(mask), gorgonia.WithName("reader.mask"))
	loss, err := losses.TokenNLL(logp, mn)
	if err != nil {
		return nil, err
	}
	pos, tgt := make([]int, 0, M), make([]int, 0, M)
	for row := range B {
		for t := range L - 1 {
			pos, tgt = append(pos, row*L+t), append(tgt, d.Reader.IDs[row*L+t+1])
		}
	}
	rb := batch(d.Reader)
	if err := in.Let(rb.IDs, rb.Mask, nil); err != nil {
		return nil, err
	}
	if err := tg.Let(pos, tgt); err != nil {
		return nil, err
	}
	j := &readerJob{loss: loss, rows: B}
	if j.tg, err = newTrainGraph(g, b, loss, optim{WD: s.WD, Clip: s.Clip, LR: s.LR}); err != nil {
		return nil, err
	}
	return j, nil
}

func (j *readerJob) run() (int, error) {
	if err := j.tg.step(); err != nil {
		return 0, err
	}
	j.last = scalar(j.loss)
	return j.rows, nil
}
func (j *readerJob) check() (float64, string) { return j.last, "" }
func (j *readerJob) close()                   { j.tg.VM.Close() }

func scalar(n *gorgonia.Node) float64 {
	switch v := n.Value().Data().(type) {
	case float32:
		return float64(v)
	case []float32:
		return float64(v[0])
	case float64:
		return v
	}
	return math.NaN()
}

// bm25Job: index the corpus (bm25-index) or run every query to depth (bm25-query) per run.
type bm25Job struct {
	name         string
	ids, texts   []string
	qids, qtexts []string
	depth        int
	x            *index.BM25
	hits         [][]index.Hit
}

func newBM25Job(name string, ids, texts, qids, qtexts []string, depth int) (*bm25Job, error) {
	j := &bm25Job{name: name, ids: ids, texts: texts, qids: qids, qtexts: qtexts, depth: depth}
	switch name {
	case "bm25-index":
	case "bm25-query":
		j.x = index.NewBM25(ids, texts, index.DefaultBM25Params())
	default:
		return nil, fmt.Errorf("bench: unknown workload %q", name)
	}
	return j, nil
}

func (j *bm25Job) run() (int, error) {
	if j.name == "bm25-index" {
		j.x = index.NewBM25(j.ids, j.texts, index.DefaultBM25Params())
		return j.x.Len(), nil
	}
	j.hits = j.hits[:0]
	for _, q := range j.qtexts {
		j.hits = append(j.hits, j.x.Search(q, j.depth))
	}
	return len(j.qtexts), nil
}

// check: for bm25-query, Digest of the rankings.
func (j *bm25Job) check() (float64, string) {
	if j.name == "bm25-index" {
		return float64(j.x.Len()), ""
	}
	scores := make([][]float32, len(j.hits))
	for i, hs := range j.hits {
		for _, h := range hs {
			scores[i] = append(scores[i], float32(h.Score))
		}
	}
	return 0, Digest(j.qids, scores)
}
func (j *bm25Job) close() {}

// Digest summarises rankings so that two BM25 implementations can be compared without shipping
// them: SHA-256 of one line per query, "qid n s1 s2 ... s10\n", n the number of hits and s the
// bits of the ten best float32 scores in hex (the order of tied passages is left out: Lucene
// breaks ties by insertion order, we by id).
func Digest(qids []string, scores [][]float32) string {
	h := sha256.New()
	for i, q := range qids {
		fmt.Fprintf(h, "%s %d", q, len(scores[i]))
		for _, s := range scores[i][:min(10, len(scores[i]))] {
			fmt.Fprintf(h, " %x", math.Float32bits(s))
		}
		fmt.Fprint(h, "\n")
	}
	return fmt.Sprintf("%x", h.Sum(nil))[:16]
}
