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

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragreader"
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

// runReaderLM runs a reader_lm recipe as named stages, methods of readerRun, which carries the
// run's state from one to the next: init_from, the memory estimate and the texts are read
// before the run directory exists.
func runReaderLM(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	r := &readerRun{rec: rec, c: Of(rec), o: o, seed: uint64(rec.Seed), resume: o.ResumeDir != ""}
	defer r.close()
	err := experiment.RunStages(
		r.load,                               // the memory estimate, init_from's LLaMA and tokenizer, the train and dev texts
		r.open,                               // the run directory, its tokenizer copy, the LoRA adapters
		r.perplexityBefore,                   // the base model's dev perplexity
		r.restore,                            // a resumed run's latest checkpoint, the adapters attached, the task, the log
		func() error { return r.train(ctx) }, // the training phase
		r.perplexityAfter,                    // the dev perplexity after; metrics.json
	)
	return r.dir, err
}

// readerRun is the state a reader_lm run hands from stage to stage.
type readerRun struct {
	rec    *configs.Recipe
	c      *Config
	o      experiment.Options
	seed   uint64
	resume bool

	m                    *model.Llama
	tok                  *tokenize.GGUFTokenizer
	trainTexts, devTexts [][]int
	dir                  string
	tokDir               string
	cfg                  export.ReaderLMConfig
	trainable            []*model.Param
	lora                 *model.LlamaLoRA
	ev                   *perplexity
	before               float64
	ph                   experiment.Phase
	lg                   *trainer.Log
	res                  trainer.Result
	seconds              float64
}

// load checks the memory estimate, opens reader_lm.init_from and encodes the train and dev
// texts.
func (r *readerRun) load() error {
	rec, c := r.rec, r.c
	e, keys, err := Memory(rec)
	if err != nil {
		return err
	}
	if err := experiment.CheckEstimate(rec, r.o.Out, e, keys); err != nil {
		return err
	}
	if r.m, r.tok, err = export.OpenLlama(c.InitFrom); err != nil {
		return fmt.Errorf("reader_lm.init_from: %w", err)
	}
	if c.MaxLength > r.m.Cfg.MaxPosition {
		return fmt.Errorf("reader_lm.max_length = %d exceeds the model's context of %d tokens", c.MaxLength, r.m.Cfg.MaxPosition)
	}
	ds, err := data.Load(rec.Data.Dir, rec.Data.TrainSplit, rec.Data.DevSplit)
	if err != nil {
		return err
	}
	if r.trainTexts, err = splitTexts(ds, rec.Data.TrainSplit, r.tok, c.MaxLength); err != nil {
		return err
	}
	r.devTexts, err = splitTexts(ds, rec.Data.DevSplit, r.tok, c.MaxLength)
	return err
}

// open creates (or reopens) the run directory, writes init_from's tokenizer into it and builds
// the LoRA adapters of a reader_lm.mode = "lora" run.
func (r *readerRun) open() error {
	rec, c, m := r.rec, r.c, r.m
	dir, err := experiment.PrepareRunDir(rec, r.o)
	if err != nil {
		return err
	}
	r.dir, r.tokDir = dir, filepath.Join(dir, TokenizerDir)
	if !r.resume {
		if err := r.tok.WriteHF(r.tokDir); err != nil {
			return err
		}
	}
	r.cfg = export.ReaderLMConfig{Kind: Kind, InitFrom: c.InitFrom, Llama: m.Cfg}
	r.trainable = m.Params()
	if c.Mode == "lora" {
		lc := LoRAOf(rec).config()
		if r.lora, err = model.NewLlamaLoRA(m, lc, r.seed); err != nil {
			return fmt.Errorf("[lora]: %w", err)
		}
		r.lora.RNG = &model.RNG{}
		r.cfg.LoRA, r.trainable = &lc, r.lora.Params()
	}
	fmt.Fprintf(r.o.Out, "reader_lm: %s, %d layers, H = %d, V = %d; %s, %d trainable values; %d train and %d dev texts (%s), L = %d\n",
		c.InitFrom, m.Cfg.Layers, m.Cfg.Hidden, m.Cfg.Vocab, c.Mode, countValues(r.trainable), len(r.trainTexts), len(r.devTexts), rec.Data.Dir, c.MaxLength)
	return nil
}

// perplexityBefore is the base model's dev perplexity (LoRA not attached yet; a full run's
// weights not yet restored).
func (r *readerRun) perplexityBefore() error {
	var err error
	if r.ev, err = newPerplexity(r.m, r.c.EvalBatch, r.c.MaxLength); err != nil {
		return err
	}
	if r.before, err = r.ev.run(r.devTexts); err != nil {
		return err
	}
	fmt.Fprintf(r.o.Out, "reader_lm: dev perplexity before %.4f\n", r.before)
	return nil
}

// restore resumes the phase from a resumed run's latest checkpoint, attaches the adapters,
// builds the training task and opens the log.
func (r *readerRun) restore() error {
	rec, c, m := r.rec, r.c, r.m
	r.ph = experiment.Phase{Name: PhaseName, Steps: rec.Train.Steps, LR: rec.Train.LR,
		Warmup: experiment.ShortWarmup(rec.Train.WarmupSteps, rec.Train.Steps), CheckpointEvery: rec.Train.CheckpointEvery,
		Params: r.trainable, Config: r.cfg}
	if r.resume && experiment.HasCheckpoint(r.dir) {
		if _, err := r.ph.Restore(r.dir, r.o.Out); err != nil {
			return err
		}
	}
	var err error
	if r.lora != nil {
		m.AttachLoRA(r.lora)
		if r.ev, err = newPerplexity(m, c.EvalBatch, c.MaxLength); err != nil { // with the adapters, no dropout
			return err
		}
	}
	if r.ph.Task, err = newLMTask(m, rec.Train.BatchSize, c.micro(rec.Train.BatchSize), c.MaxLength, r.trainTexts, r.seed, r.trainable, c.GradientCheckpointing); err != nil {
		return err
	}
	r.lg, err = experiment.OpenRunLog(r.dir, r.resume)
	return err
}

// train runs the training phase.
func (r *readerRun) train(ctx context.Context) error {
	env := &experiment.Env{Rec: r.rec, Opts: r.o, Dir: r.dir, Seed: r.seed, TokenizerPath: filepath.Join(r.tokDir, export.TokenizerFile), Log: r.lg}
	var err error
	r.res, r.seconds, err = env.RunPhase(ctx, r.ph)
	return err
}

// perplexityAfter is the trained model's dev perplexity; it writes metrics.json.
func (r *readerRun) perplexityAfter() error {
	after, err := r.ev.run(r.devTexts)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.o.Out, "reader_lm: dev perplexity %.4f -> %.4f\n", r.before, after)
	return experiment.WriteMetrics(r.dir, map[string]float64{
		"reader_lm/dev_perplexity_before": r.before, "reader_lm/dev_perplexity_after": after,
		"train/last_loss": r.res.LastLoss, "train/seconds": r.seconds, "train/trainable_values": float64(countValues(r.trainable)),
	})
}

// close closes the log.
func (r *readerRun) close() {
	if r.lg != nil {
		r.lg.Close()
	}
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
	if c.GradientCheckpointing {
		keys += ", reader_lm.gradient_checkpointing = true"
		return model.EstimateLlamaTrainingCheckpointed(cfg, lora, rows*c.MaxLength, c.MaxLength), keys, nil
	}
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

// perplexity evaluates exp(mean NLL) of texts, no dropout, no gradient.
type perplexity struct {
	lb *model.LMBatch
	vm gorgonia.VM
}

func newPerplexity(m *model.Llama, B, L int) (*perplexity, error) {
	if l := m.LoRA(); l != nil {
		l.Train = false
	}
	g := gorgonia.NewGraph()
	lb, err := model.NewLMBatch(g, model.NewBinder(g), m, B, L, "lm", false)
	if err != nil {
		return nil, err
	}
	model.ShareBuffers(g, lb.LogP) // forward only: activations die as they are consumed
	return &perplexity{lb: lb, vm: gorgonia.NewTapeMachine(g)}, nil
}

func (p *perplexity) run(texts [][]int) (float64, error) {
	var nll float64
	var n int
	for i := 0; i < len(texts); i += p.lb.B {
		if err := p.lb.Let(texts[i:min(i+p.lb.B, len(texts))], nil); err != nil {
			return 0, err
		}
		if err := p.vm.RunAll(); err != nil {
			return 0, err
		}
		lp := p.lb.LogP.Value().Data().([]float32)
		for k, keep := range p.lb.Keep {
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
	lb     *model.LMBatch
	loss   *gorgonia.Node // the pass's weighted mean NLL
	weight *gorgonia.Node // the pass's share of the step's target tokens (nil: one pass)
	seqs   [][]int
	seed   uint64
	lora   *model.LlamaLoRA
}

func newLMTask(m *model.Llama, B, micro, L int, seqs [][]int, seed uint64, trainable []*model.Param, ckpt bool) (*lmTask, error) {
	t := &lmTask{B: B, seqs: seqs, seed: seed, lora: m.LoRA()}
	if t.lora != nil {
		t.lora.Train = true
	}
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	var err error
	if t.lb, err = model.NewLMBatch(g, b, m, micro, L, "lm", ckpt); err != nil {
		return nil, err
	}
	if t.loss, err = losses.TokenNLL(t.lb.LogP, t.lb.KeepN); err != nil {
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
	if ckpt {
		err = t.lb.Ckpt.Grad(t.loss, nodes...)
	} else {
		_, err = model.Grad(t.loss, nodes...)
	}
	if err != nil {
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
	for j, k := range ragreader.Cycle(n, t.B, step, t.seed) {
		batch[j] = t.seqs[k]
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
		if err := t.lb.Let(pass, nil); err != nil {
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
// its attached LoRA adapters, whose dropout is then on); with ckpt, through gradient
// checkpointing (reader_lm.gradient_checkpointing).
func NewTask(m *model.Llama, B, micro, L int, seqs [][]int, seed uint64, trainable []*model.Param, ckpt bool) (trainer.Task, error) {
	if micro < 1 || micro > B {
		return nil, fmt.Errorf("reader_lm: micro batch %d, want 1..%d", micro, B)
	}
	return newLMTask(m, B, micro, L, seqs, seed, trainable, ckpt)
}
