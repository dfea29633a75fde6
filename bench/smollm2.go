package bench

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment/readerlm"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/trainer"
)

// The SmolLM2 workloads (issue 38): the real SmolLM2-135M-Instruct weights of its GGUF
// (dequantized to float32 on our side and in transformers), token ids of SciFact abstracts made
// by its own tokenizer.
const (
	SmolLM2TrainFull = "smollm2-train-full"
	SmolLM2TrainLoRA = "smollm2-train-lora"
	SmolLM2GenB1     = "smollm2-generate-b1"
	SmolLM2GenB8     = "smollm2-generate-b8"
)

// SmolLM2Shapes are the sizes of the SmolLM2 workloads (the issue's): a training step of TrainB
// sequences of TrainL tokens, with AdamW (LR, WD) and clipping at Clip, in full or with the
// adapters of LoRA; generation of MaxNew tokens after prompts of PromptL tokens, batches of 1
// and GenB.
type SmolLM2Shapes struct {
	TrainB, TrainL  int
	PromptL, MaxNew int
	GenB            int
	LR, WD, Clip    float64
	// Micro is the rows per forward and backward pass of our step (reader_lm.micro_batch; 0:
	// TrainB, one pass); the peer always runs one pass.
	Micro int
	// Checkpoint runs our step with gradient checkpointing (reader_lm.gradient_checkpointing).
	Checkpoint bool
	LoRA       model.LoRAConfig
}

// DefaultSmolLM2Shapes are the issue's: 4 x 512 tokens, 128 new tokens after 256, batches of 1
// and 8; LoRA as recipes/smollm2-claims-lora.toml (rank 8, alpha 16, dropout 0.05, the seven
// projections).
func DefaultSmolLM2Shapes() SmolLM2Shapes {
	return SmolLM2Shapes{TrainB: 4, TrainL: 512, PromptL: 256, MaxNew: 128, GenB: 8, LR: 1e-3, WD: 0, Clip: 1,
		LoRA: model.LoRAConfig{Rank: 8, Alpha: 16, Dropout: 0.05,
			Targets: []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}}}
}

// SmolLM2Data is smollm2.json: the GGUF every side loads and the token ids: Train (TrainB rows
// of TrainL ids) and Prompts (GenB rows of PromptL ids), windows of the SciFact abstracts joined
// by eos, as the GGUF's tokenizer encodes them.
type SmolLM2Data struct {
	Shapes  SmolLM2Shapes `json:"shapes"`
	GGUF    string        `json:"gguf"`
	EOS     int           `json:"eos"`
	Train   [][]int       `json:"train"`
	Prompts [][]int       `json:"prompts"`
}

// PrepareSmolLM2 tokenizes SciFact's abstracts (dir) with the GGUF's tokenizer and writes
// smollm2.json into out: the training rows from the start of the stream, the prompts after
// them.
func PrepareSmolLM2(dir, ggufPath, out string, s SmolLM2Shapes) (*SmolLM2Data, string, error) {
	abs, err := filepath.Abs(ggufPath)
	if err != nil {
		return nil, "", err
	}
	_, tok, err := export.OpenLlamaGGUF(abs)
	if err != nil {
		return nil, "", err
	}
	ds, err := data.Load(dir)
	if err != nil {
		return nil, "", err
	}
	need := s.TrainB*s.TrainL + s.GenB*s.PromptL
	var stream []int
	for i := 0; i < ds.Corpus.Len() && len(stream) < need; i++ {
		stream = append(append(stream, tok.Encode(ds.Corpus.Passage(i, true))...), tok.EOS())
	}
	if len(stream) < need {
		return nil, "", fmt.Errorf("bench: %s: %d tokens of abstracts, want %d", dir, len(stream), need)
	}
	d := &SmolLM2Data{Shapes: s, GGUF: abs, EOS: tok.EOS()}
	for r := range s.TrainB {
		d.Train = append(d.Train, stream[r*s.TrainL:(r+1)*s.TrainL])
	}
	off := s.TrainB * s.TrainL
	for r := range s.GenB {
		d.Prompts = append(d.Prompts, stream[off+r*s.PromptL:off+(r+1)*s.PromptL])
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(out, "smollm2.json")
	return d, path, atomicfile.WriteFile(path, b)
}

// LoadSmolLM2 reads smollm2.json.
func LoadSmolLM2(path string) (*SmolLM2Data, error) { return readJSON[SmolLM2Data](path) }

func (d *SmolLM2Data) size(w Workload) string {
	s := d.Shapes
	switch w.Name {
	case SmolLM2TrainFull, SmolLM2TrainLoRA:
		passes := ""
		if s.Micro > 0 && s.Micro < s.TrainB {
			passes = fmt.Sprintf(" (ours in passes of %d rows, reader_lm.micro_batch)", s.Micro)
		}
		if s.Checkpoint {
			passes += " (ours with gradient checkpointing)"
		}
		return fmt.Sprintf("%d x %d tokens of SciFact abstracts, next-token loss, AdamW%s", s.TrainB, s.TrainL, passes)
	case SmolLM2GenB8:
		return fmt.Sprintf("%d prompts of %d tokens, %d new tokens each, greedy, no stop", s.GenB, s.PromptL, s.MaxNew)
	}
	return fmt.Sprintf("1 prompt of %d tokens, %d new tokens, greedy, no stop", s.PromptL, s.MaxNew)
}

// newSmolLM2Job builds a SmolLM2 workload from smollm2.json in dir.
func newSmolLM2Job(name, dir string) (job, error) {
	d, err := LoadSmolLM2(filepath.Join(dir, "smollm2.json"))
	if err != nil {
		return nil, err
	}
	m, _, err := export.OpenLlamaGGUF(d.GGUF)
	if err != nil {
		return nil, err
	}
	switch name {
	case SmolLM2TrainFull, SmolLM2TrainLoRA:
		return newSmolTrainJob(m, d, name == SmolLM2TrainLoRA)
	case SmolLM2GenB1, SmolLM2GenB8:
		n := 1
		if name == SmolLM2GenB8 {
			n = d.Shapes.GenB
		}
		dec, err := model.NewLlamaDecoder(m)
		if err != nil {
			return nil, err
		}
		return &smolGenJob{d: dec, prompts: d.Prompts[:n], maxNew: d.Shapes.MaxNew}, nil
	}
	return nil, fmt.Errorf("bench: unknown workload %q", name)
}

// smolTrainJob: one training step of kind reader_lm (readerlm.NewTask: Llama.BuildLogProbs,
// losses.TokenNLL over every next token of the TrainB rows, in passes of Micro rows), then
// clipping and AdamW on the trainable parameters (every one, or the LoRA adapters with dropout).
type smolTrainJob struct {
	task trainer.Task
	opt  *trainer.AdamW
	s    SmolLM2Shapes
	step int
	last float64
}

func newSmolTrainJob(m *model.Llama, d *SmolLM2Data, lora bool) (*smolTrainJob, error) {
	s := d.Shapes
	trainable := m.Params()
	if lora {
		l, err := model.NewLlamaLoRA(m, s.LoRA, 42)
		if err != nil {
			return nil, err
		}
		l.RNG = &model.RNG{}
		m.AttachLoRA(l)
		trainable = l.Params()
	}
	micro := s.Micro
	if micro == 0 {
		micro = s.TrainB
	}
	task, err := readerlm.NewTask(m, s.TrainB, micro, s.TrainL, d.Train, 42, trainable, s.Checkpoint)
	if err != nil {
		return nil, err
	}
	return &smolTrainJob{task: task, opt: trainer.NewAdamW(s.WD), s: s}, nil
}

func (j *smolTrainJob) run() (int, error) {
	loss, n, err := j.task.Step(j.step)
	if err != nil {
		return 0, err
	}
	ps := j.task.Params()
	trainer.ClipGlobalNorm(ps, j.s.Clip)
	j.opt.Step(ps, j.s.LR)
	j.task.AfterUpdate()
	j.step++
	j.last = loss
	return n, nil
}
func (j *smolTrainJob) check() (float64, string) { return j.last, "" }
func (j *smolTrainJob) close()                   {}

// smolGenJob: greedy generation of MaxNew tokens for each prompt, together (the cached
// decoder's batch), no stop token; the digest is that of the new tokens.
type smolGenJob struct {
	d       *model.LlamaDecoder
	prompts [][]int
	maxNew  int
	digest  string
}

func (j *smolGenJob) run() (int, error) {
	gens, err := j.d.Generate(j.prompts, model.SampleOptions{MaxNew: j.maxNew, Batch: len(j.prompts)})
	if err != nil {
		return 0, err
	}
	h := sha256.New()
	n := 0
	for _, g := range gens {
		fmt.Fprintln(h, g.Tokens)
		n += len(g.Tokens)
	}
	j.digest = fmt.Sprintf("%x", h.Sum(nil))[:16]
	return n, nil
}
func (j *smolGenJob) check() (float64, string) { return 0, j.digest }
func (j *smolGenJob) close()                   {}
