package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/model"
)

// generateArgs are the flags of `train generate`.
type generateArgs struct {
	model, prompts string
	maxNew         int
	chat           bool
	temperature    float64
	topP           float64
	seed           uint64
	batch          int
	precision      string
	log            io.Writer // where the model read is named (stderr), nil: nowhere
}

func generateFlags(a *generateArgs) *flag.FlagSet {
	fs := flag.NewFlagSet("train generate", flag.ContinueOnError)
	fs.StringVar(&a.model, "model", "", "LLaMA model: a GGUF file (F32, F16, BF16, Q8_0, Q4_0, Q4_1 tensors; e.g. pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf from tools/pretrained/get.sh), a Hugging Face LlamaForCausalLM directory (e.g. one train export wrote), or a reader_lm run directory (its latest checkpoint, the newest intact one if that is damaged; LoRA merged) or checkpoint directory")
	fs.StringVar(&a.prompts, "prompts", "", `JSONL file, one {"prompt": "..."} object per line (blank lines skipped)`)
	fs.IntVar(&a.maxNew, "max-new-tokens", 128, "new tokens per prompt at most (the stop token included); prompt + this must fit the model's context")
	fs.BoolVar(&a.chat, "chat", false, "wrap each prompt in the tokenizer's chat template as one user message, ready for the assistant's reply")
	fs.Float64Var(&a.temperature, "temperature", 0, "0: greedy decoding; above 0: sample from softmax(logits / temperature)")
	fs.Float64Var(&a.topP, "top-p", 1, "with -temperature: sample among the most probable tokens whose probabilities sum to at least this (nucleus sampling), in (0,1]")
	fs.Uint64Var(&a.seed, "seed", 0, "with -temperature: the sampling seed (prompt i draws from its own stream, so outputs do not depend on batching)")
	fs.IntVar(&a.batch, "batch", 8, "prompts decoded together")
	fs.StringVar(&a.precision, "precision", "float32", `the model's matrix products: "float32", or "bf16" (operands rounded to bfloat16, float32 accumulation: train.precision's products)`)
	subUsage(fs, "Usage: train generate -model M -prompts FILE [-max-new-tokens N] [-chat] [-temperature T -top-p P -seed S] [-precision bf16]\n\n"+
		"Prints one JSON line per prompt: {\"prompt\", \"text\", \"tokens\"}, tokens the new ids without the stop token (the\n"+
		"tokenizer's eos), text their decoding without special tokens.")
	return fs
}

// runGenerate is `train generate`: it continues every prompt of a JSONL file with a LLaMA model
// (model.LlamaDecoder, key/value cache) and prints one JSON line per prompt.
func runGenerate(args []string) error {
	var a generateArgs
	fs := generateFlags(&a)
	ok := func() bool { return a.model != "" && a.prompts != "" }
	if err := parseSub(fs, args, ok, "generate: -model and -prompts are required, and nothing else"); err != nil {
		return err
	}
	if a.maxNew < 1 || !(a.temperature >= 0) || math.IsInf(a.temperature, 1) || !(a.topP > 0 && a.topP <= 1) || a.batch < 1 {
		return fmt.Errorf("generate: -max-new-tokens %d, -temperature %g, -top-p %g, -batch %d: want >= 1, finite >= 0, in (0,1] and >= 1", a.maxNew, a.temperature, a.topP, a.batch)
	}
	a.log = os.Stderr
	if err := generate(a, os.Stdout); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	return nil
}

// promptLine is one prompt of the -prompts file with its line number.
type promptLine struct {
	text string
	line int
}

// readPrompts reads the JSONL prompts file: each non-blank line one object with a string
// "prompt" (other keys ignored).
func readPrompts(path string) ([]promptLine, error) {
	f, _, err := bounded.Open(path, bounded.NoLimit) // streamed: each line at most 16 MiB
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []promptLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var r struct {
			Prompt *string `json:"prompt"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w (want a JSON object {\"prompt\": \"...\"})", path, line, err)
		}
		if r.Prompt == nil {
			return nil, fmt.Errorf("%s:%d: no \"prompt\" string", path, line)
		}
		out = append(out, promptLine{*r.Prompt, line})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no prompts", path)
	}
	return out, nil
}

func generate(a generateArgs, w io.Writer) error {
	precision, err := model.ParsePrecision(a.precision)
	if err != nil {
		return fmt.Errorf("-precision: %w", err)
	}
	defer model.SetMatmulPrecision(model.SetMatmulPrecision(precision))
	prompts, err := readPrompts(a.prompts)
	if err != nil {
		return err
	}
	m, tok, from, err := export.OpenLlamaModel(a.model)
	if err != nil {
		return err
	}
	if tok.VocabSize() > m.Cfg.Vocab {
		return fmt.Errorf("%s: the tokenizer has %d tokens, the model %d", a.model, tok.VocabSize(), m.Cfg.Vocab)
	}
	if a.log != nil {
		fmt.Fprintf(a.log, "generate: %s, %d layers, H = %d, V = %d\n", from, m.Cfg.Layers, m.Cfg.Hidden, m.Cfg.Vocab)
	}
	ids := make([][]int, len(prompts))
	for i, p := range prompts {
		text := p.text
		if a.chat {
			text = tok.ChatPrompt(text)
		}
		ids[i] = tok.Encode(text)
		if len(ids[i]) == 0 {
			return fmt.Errorf("%s:%d: the prompt has no tokens", a.prompts, p.line)
		}
		if n := len(ids[i]) + a.maxNew; n > m.Cfg.MaxPosition {
			return fmt.Errorf("%s:%d: the prompt has %d tokens; with -max-new-tokens %d that is %d, beyond the model's context of %d tokens",
				a.prompts, p.line, len(ids[i]), a.maxNew, n, m.Cfg.MaxPosition)
		}
	}
	d, err := model.NewLlamaDecoder(m)
	if err != nil {
		return err
	}
	gens, err := d.Generate(ids, model.SampleOptions{MaxNew: a.maxNew, Temperature: a.temperature, TopP: a.topP, Seed: a.seed, Stop: []int{tok.EOS()}, Batch: a.batch})
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i, g := range gens {
		toks := g.Tokens
		if toks == nil {
			toks = []int{}
		}
		if err := enc.Encode(struct {
			Prompt string `json:"prompt"`
			Text   string `json:"text"`
			Tokens []int  `json:"tokens"`
		}{prompts[i].text, tok.Decode(toks, true), toks}); err != nil {
			return err
		}
	}
	return bw.Flush()
}
