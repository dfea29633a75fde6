// Package readerlm is the recipe kind reader_lm: causal language-model fine-tuning of a
// pretrained LLaMA (model.Llama from a GGUF file, e.g. SmolLM2-135M-Instruct, or from a Hugging
// Face LlamaForCausalLM directory in float32, float16 or bfloat16), in full or with
// LoRA adapters (model.LlamaLoRA; Hu et al., 2021), with AdamW, on the texts of a dataset's
// queries (SciFact claims as text), reporting the held-out perplexity before and after. One
// package and one registration (experiment.Register) with its own [reader_lm] and [lora]
// tables; checkpoints and exact resume through experiment.Env.RunPhase. `train export` writes
// a run as a Hugging Face LlamaForCausalLM directory, LoRA merged, or with -adapter the
// adapters alone as a peft directory (export.ReaderLMConfig).
package readerlm

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// Kind is the recipe kind and the checkpoints' config.json kind.
const Kind = export.KindReaderLM

// PhaseName names the training phase in log.jsonl and checkpoints.
const PhaseName = "reader_lm"

// TokenizerDir is the run directory's Hugging Face copy of init_from's tokenizer
// (GGUFTokenizer.WriteHF), whose tokenizer.json every checkpoint carries.
const TokenizerDir = "tokenizer"

func init() {
	experiment.Register(Kind, runReaderLM, configs.KindSpec{Sections: []string{"data", "train"}, Own: []configs.Section{section, loraSection}})
}

// runReaderLM: load init_from, encode the train and dev texts, report the dev perplexity of the
// base model, train (resuming from the latest checkpoint with -resume), report it again.
func runReaderLM(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	c := Of(rec)
	e, keys, err := Memory(rec)
	if err != nil {
		return "", err
	}
	if err := experiment.CheckEstimate(rec, o.Out, e, keys); err != nil {
		return "", err
	}
	m, tok, err := export.OpenLlama(c.InitFrom)
	if err != nil {
		return "", fmt.Errorf("reader_lm.init_from: %w", err)
	}
	if c.MaxLength > m.Cfg.MaxPosition {
		return "", fmt.Errorf("reader_lm.max_length = %d exceeds the model's context of %d tokens", c.MaxLength, m.Cfg.MaxPosition)
	}
	ds, err := data.Load(rec.Data.Dir, rec.Data.TrainSplit, rec.Data.DevSplit)
	if err != nil {
		return "", err
	}
	train, err := splitTexts(ds, rec.Data.TrainSplit, tok, c.MaxLength)
	if err != nil {
		return "", err
	}
	dev, err := splitTexts(ds, rec.Data.DevSplit, tok, c.MaxLength)
	if err != nil {
		return "", err
	}
	resume := o.ResumeDir != ""
	dir, err := experiment.PrepareRunDir(rec, o)
	if err != nil {
		return "", err
	}
	tokDir := filepath.Join(dir, TokenizerDir)
	if !resume {
		if err := tok.WriteHF(tokDir); err != nil {
			return dir, err
		}
	}
	seed := uint64(rec.Seed)
	cfg := export.ReaderLMConfig{Kind: Kind, InitFrom: c.InitFrom, Llama: m.Cfg}
	trainable := m.Params()
	var lora *model.LlamaLoRA
	if c.Mode == "lora" {
		lc := LoRAOf(rec).config()
		if lora, err = model.NewLlamaLoRA(m, lc, seed); err != nil {
			return dir, fmt.Errorf("[lora]: %w", err)
		}
		lora.RNG = &model.RNG{}
		cfg.LoRA, trainable = &lc, lora.Params()
	}
	fmt.Fprintf(o.Out, "reader_lm: %s, %d layers, H = %d, V = %d; %s, %d trainable values; %d train and %d dev texts (%s), L = %d\n",
		c.InitFrom, m.Cfg.Layers, m.Cfg.Hidden, m.Cfg.Vocab, c.Mode, countValues(trainable), len(train), len(dev), rec.Data.Dir, c.MaxLength)

	ev, err := newPerplexity(m, c.EvalBatch, c.MaxLength)
	if err != nil {
		return dir, err
	}
	before, err := ev.run(dev) // the base model (LoRA not attached yet; a full run's weights not yet restored)
	if err != nil {
		return dir, err
	}
	fmt.Fprintf(o.Out, "reader_lm: dev perplexity before %.4f\n", before)

	ph := experiment.Phase{Name: PhaseName, Steps: rec.Train.Steps, LR: rec.Train.LR,
		Warmup: experiment.ShortWarmup(rec.Train.WarmupSteps, rec.Train.Steps), CheckpointEvery: rec.Train.CheckpointEvery,
		Params: trainable, Config: cfg}
	if resume && experiment.HasCheckpoint(dir) {
		ck, err := checkpoints.Load(dir)
		if err != nil {
			return dir, err
		}
		if err := experiment.SetParams(trainable, ck.Params); err != nil {
			return dir, fmt.Errorf("%s: %w", ck.Dir, err)
		}
		ph.Start, ph.Optimizer, ph.SecondsBefore = ck.Trainer.Step, ck.Optimizer, ck.Trainer.TrainSeconds
		fmt.Fprintf(o.Out, "resume: %s at step %d\n", ck.Dir, ck.Trainer.Step)
	}
	if lora != nil {
		m.AttachLoRA(lora)
		if ev, err = newPerplexity(m, c.EvalBatch, c.MaxLength); err != nil { // with the adapters, no dropout
			return dir, err
		}
	}
	if ph.Task, err = newLMTask(m, rec.Train.BatchSize, c.micro(rec.Train.BatchSize), c.MaxLength, train, seed, trainable); err != nil {
		return dir, err
	}
	lg, err := experiment.OpenRunLog(dir, resume)
	if err != nil {
		return dir, err
	}
	defer lg.Close()
	env := &experiment.Env{Rec: rec, Opts: o, Dir: dir, Seed: seed, TokenizerPath: filepath.Join(tokDir, export.TokenizerFile), Log: lg}
	res, seconds, err := env.RunPhase(ctx, ph)
	if err != nil {
		return dir, err
	}
	after, err := ev.run(dev)
	if err != nil {
		return dir, err
	}
	fmt.Fprintf(o.Out, "reader_lm: dev perplexity %.4f -> %.4f\n", before, after)
	return dir, experiment.WriteMetrics(dir, map[string]float64{
		"reader_lm/dev_perplexity_before": before, "reader_lm/dev_perplexity_after": after,
		"train/last_loss": res.LastLoss, "train/seconds": seconds, "train/trainable_values": float64(countValues(trainable)),
	})
}

// Memory estimates the memory of training the recipe's LLaMA (model.EstimateLlamaTraining)
// from reader_lm.init_from's header (GGUF) or config.json (a Hugging Face directory) alone,
// before any weight is read, at the larger of
// the training pass's sequences (reader_lm.micro_batch, else train.batch_size) and
// reader_lm.eval_batch sequences of reader_lm.max_length tokens; keys
// names the recipe keys and model sizes behind it.
func Memory(rec *configs.Recipe) (model.MemoryEstimate, string, error) {
	c := Of(rec)
	cfg, err := export.LlamaConfigOf(c.InitFrom)
	if err != nil {
		return model.MemoryEstimate{}, "", fmt.Errorf("reader_lm.init_from: %w", err)
	}
	var lora *model.LoRAConfig
	keys := fmt.Sprintf("reader_lm.mode = %q", c.Mode)
	if c.Mode == "lora" {
		lc := LoRAOf(rec).config()
		lora = &lc
		keys += fmt.Sprintf(", lora.rank = %d, lora.targets = %v", lc.Rank, lc.Targets)
	}
	rows := max(c.micro(rec.Train.BatchSize), c.EvalBatch)
	keys += fmt.Sprintf(", train.batch_size = %d, reader_lm.micro_batch = %d, reader_lm.eval_batch = %d, reader_lm.max_length = %d (init_from: H = %d, %d layers, FFN %d, V = %d)",
		rec.Train.BatchSize, c.MicroBatch, c.EvalBatch, c.MaxLength, cfg.Hidden, cfg.Layers, cfg.FFN, cfg.Vocab)
	return model.EstimateLlamaTraining(cfg, lora, rows*c.MaxLength, c.MaxLength), keys, nil
}

func countValues(ps []*model.Param) int {
	n := 0
	for _, p := range ps {
		n += p.Value.Shape().TotalSize()
	}
	return n
}

// splitTexts encodes the texts of the split's judged queries (sorted by id): each the text's
// tokens cut to L-1, then eos; a text of no tokens is an error naming it.
func splitTexts(ds *data.Dataset, split string, tok *tokenize.GGUFTokenizer, L int) ([][]int, error) {
	ids := ds.Qrels[split].QueryIDs()
	slices.Sort(ids)
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s: split %q has no judged queries", ds.Dir, split)
	}
	out := make([][]int, len(ids))
	for i, q := range ids {
		text, _ := ds.Queries.Text(q)
		t := tok.Encode(text)
		if len(t) == 0 {
			return nil, fmt.Errorf("%s: query %s of split %q has no tokens", ds.Dir, q, split)
		}
		out[i] = append(t[:min(len(t), L-1):min(len(t), L-1)], tok.EOS())
	}
	return out, nil
}

// lmBatch is a graph's LLaMA log-probabilities of B rows of L tokens, B·(L-1) target slots
// (row r's token t predicts token t+1 in slot r·(L-1)+t) and the slots' keep mask.
type lmBatch struct {
	B, L        int
	ids         []int
	mask        []float32
	pos, tgt    []int
	keep        []float32
	in          *model.Inputs
	tg          *model.Targets
	keepT       *tensor.Dense
	logp, keepN *gorgonia.Node
}

func newLMBatch(g *gorgonia.ExprGraph, b *model.Binder, m *model.Llama, B, L int) (*lmBatch, error) {
	M := B * (L - 1)
	lb := &lmBatch{B: B, L: L, ids: make([]int, B*L), mask: make([]float32, B*L), pos: make([]int, M), tgt: make([]int, M),
		keepT: tensor.New(tensor.WithShape(M), tensor.Of(tensor.Float32))}
	lb.keep = lb.keepT.Data().([]float32)
	lb.in = model.NewInputs(g, B, L, "lm")
	lb.tg = model.NewTargets(g, M, "lm.targets")
	var err error
	if lb.logp, err = m.BuildLogProbs(b, lb.in, lb.tg); err != nil {
		return nil, err
	}
	lb.keepN = gorgonia.NewTensor(g, tensor.Float32, 1, gorgonia.WithShape(M), gorgonia.WithValue(lb.keepT), gorgonia.WithName("lm.keep"))
	return lb, nil
}

// let fills the batch from seqs (at most B; rows past len(seqs) empty, their slots not kept).
func (lb *lmBatch) let(seqs [][]int) error {
	clear(lb.ids)
	clear(lb.mask)
	clear(lb.keep)
	for i := range lb.pos {
		lb.pos[i], lb.tgt[i] = -1, 0
	}
	if len(seqs) > lb.B {
		return fmt.Errorf("reader_lm: batch of %d texts, graph built for %d", len(seqs), lb.B)
	}
	for r, s := range seqs {
		if len(s) > lb.L {
			return fmt.Errorf("reader_lm: text of %d tokens, graph built for %d", len(s), lb.L)
		}
		copy(lb.ids[r*lb.L:], s)
		for t := range s {
			lb.mask[r*lb.L+t] = 1
			if t+1 < len(s) {
				k := r*(lb.L-1) + t
				lb.pos[k], lb.tgt[k], lb.keep[k] = r*lb.L+t, s[t+1], 1
			}
		}
	}
	if err := lb.in.Let(lb.ids, lb.mask, nil); err != nil {
		return err
	}
	return lb.tg.Let(lb.pos, lb.tgt)
}

// perplexity evaluates exp(mean NLL) of texts, no dropout, no gradient.
type perplexity struct {
	lb *lmBatch
	vm gorgonia.VM
}

func newPerplexity(m *model.Llama, B, L int) (*perplexity, error) {
	if l := m.LoRA(); l != nil {
		l.Train = false
	}
	g := gorgonia.NewGraph()
	lb, err := newLMBatch(g, model.NewBinder(g), m, B, L)
	if err != nil {
		return nil, err
	}
	model.ShareBuffers(g, lb.logp) // forward only: activations die as they are consumed
	return &perplexity{lb: lb, vm: gorgonia.NewTapeMachine(g)}, nil
}

func (p *perplexity) run(texts [][]int) (float64, error) {
	var nll float64
	var n int
	for i := 0; i < len(texts); i += p.lb.B {
		if err := p.lb.let(texts[i:min(i+p.lb.B, len(texts))]); err != nil {
			return 0, err
		}
		if err := p.vm.RunAll(); err != nil {
			return 0, err
		}
		lp := p.lb.logp.Value().Data().([]float32)
		for k, keep := range p.lb.keep {
			if keep == 1 {
				nll -= float64(lp[k])
				n++
			}
		}
		p.vm.Reset()
	}
	return math.Exp(nll / float64(n)), nil
}

// lmTask trains the trainable parameters on batches of B texts: step s takes texts s·B ..
// s·B+B-1 of the sequence of epochs, each a permutation of the texts drawn from (seed, epoch),
// so a batch depends on the step alone (exact resume); the LoRA dropout masks are drawn from
// (seed, step). The graph holds micro texts; a step runs ceil(B/micro) passes whose gradients
// the machine accumulates, each pass's mean NLL weighted by its share of the step's targets.
type lmTask struct {
	trainer.GraphParams
	B      int
	lb     *lmBatch
	loss   *gorgonia.Node // the pass's weighted mean NLL
	weight *gorgonia.Node // the pass's share of the step's target tokens (nil: one pass)
	seqs   [][]int
	seed   uint64
	lora   *model.LlamaLoRA
	epoch  int
	perm   []int
}

func newLMTask(m *model.Llama, B, micro, L int, seqs [][]int, seed uint64, trainable []*model.Param) (*lmTask, error) {
	t := &lmTask{B: B, seqs: seqs, seed: seed, lora: m.LoRA(), epoch: -1}
	if t.lora != nil {
		t.lora.Train = true
	}
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	var err error
	if t.lb, err = newLMBatch(g, b, m, micro, L); err != nil {
		return nil, err
	}
	if t.loss, err = losses.TokenNLL(t.lb.logp, t.lb.keepN); err != nil {
		return nil, err
	}
	if micro < B {
		t.weight = gorgonia.NewScalar(g, tensor.Float32, gorgonia.WithValue(float32(0)), gorgonia.WithName("lm.pass_weight"))
		if t.loss, err = gorgonia.Mul(t.loss, t.weight); err != nil {
			return nil, err
		}
	}
	keep := map[*model.Param]bool{}
	var nodes gorgonia.Nodes
	for _, p := range trainable {
		keep[p] = true
		nodes = append(nodes, b.Node(p))
	}
	if _, err := model.Grad(t.loss, nodes...); err != nil {
		return nil, fmt.Errorf("reader_lm gradient graph: %w", err)
	}
	model.ShareBuffers(g, t.loss) // only the loss and the gradients are read after a pass
	t.GraphParams = trainer.NewGraphParamsOf(b, gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(nodes...)), func(p *model.Param) bool { return keep[p] })
	return t, nil
}

func (t *lmTask) Step(step int) (float64, int, error) {
	n := len(t.seqs)
	batch := make([][]int, t.B)
	targets := 0
	for j := range batch {
		k := step*t.B + j
		if e := k / n; e != t.epoch {
			t.epoch, t.perm = e, rand.New(rand.NewPCG(t.seed, uint64(e))).Perm(n)
		}
		batch[j] = t.seqs[t.perm[k%n]]
		targets += len(batch[j]) - 1
	}
	if t.lora != nil {
		t.lora.RNG.R = rand.New(rand.NewPCG(t.seed^0x6c6f7261, uint64(step)))
	}
	var loss float64
	for i := 0; i < t.B; i += t.lb.B {
		pass := batch[i:min(i+t.lb.B, t.B)]
		if t.weight != nil {
			own := 0
			for _, s := range pass {
				own += len(s) - 1
			}
			if err := gorgonia.Let(t.weight, float32(float64(own)/float64(targets))); err != nil {
				return 0, 0, err
			}
			if i > 0 {
				t.VM.Reset() // the gradients stay in the dual values: this pass adds to them
			}
		}
		if err := t.lb.let(pass); err != nil {
			return 0, 0, err
		}
		if err := t.Run(); err != nil {
			return 0, 0, err
		}
		loss += trainer.ScalarValue(t.loss)
	}
	return loss, len(batch), nil
}

// NewTask is the kind's training step as a trainer.Task, for the bench (cmd/bench's smollm2-train
// workloads): B texts per step (each at most L tokens, the last one eos) drawn from seqs as a run
// draws them, in passes of micro texts, the gradients taken for trainable (m's parameters, or
// its attached LoRA adapters, whose dropout is then on).
func NewTask(m *model.Llama, B, micro, L int, seqs [][]int, seed uint64, trainable []*model.Param) (trainer.Task, error) {
	if micro < 1 || micro > B {
		return nil, fmt.Errorf("reader_lm: micro batch %d, want 1..%d", micro, B)
	}
	return newLMTask(m, B, micro, L, seqs, seed, trainable)
}
