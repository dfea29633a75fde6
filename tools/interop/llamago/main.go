// Command llamago is the Go side of the LLaMA parity check (tools/interop/llama.py): it loads a
// LLaMA GGUF file (model.LoadLlamaGGUF) and, for token id sequences given as JSON lines
// ({"ids": [...]}), writes either the logits of every position or a greedy continuation:
//
//	go run ./tools/interop/llamago -model M.gguf -in seqs.jsonl -out DIR -mode logits
//	go run ./tools/interop/llamago -model M.gguf -in prompts.jsonl -out DIR -mode generate -max-new 64 -stop 2 [-batch 8]
//
// logits: DIR/logits-I.f32 for sequence I, float32 [len(ids), V] little-endian, computed by the
// training path (the Gorgonia graph, Llama.BuildLogits, one sequence per run; -decoder uses the
// cached decoder instead). generate: DIR/generate.jsonl, one {"tokens": [...], "gaps": [...]}
// per prompt: the greedy new tokens (LlamaDecoder.Generate, the stop id left out) and, at each
// step, the gap between the top two logits of the step's distribution; the decoding's tokens/s
// (prefill included, load excluded) goes to stderr. -cpuprofile FILE profiles the run.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
	"github.com/ragtrain/ragtrain/tools/interop/internal/jsonl"
	"gorgonia.org/gorgonia"
)

func main() {
	path := flag.String("model", "", "GGUF file, Hugging Face LlamaForCausalLM directory, or reader_lm run or checkpoint directory (LoRA merged)")
	in := flag.String("in", "", "JSONL file of {\"ids\": [...]}")
	out := flag.String("out", "", "output directory")
	mode := flag.String("mode", "logits", "logits or generate")
	maxNew := flag.Int("max-new", 64, "generate: new tokens at most")
	stop := flag.Int("stop", 2, "generate: stop id")
	decoder := flag.Bool("decoder", false, "logits: use the cached decoder instead of the graph")
	batch := flag.Int("batch", 1, "generate: prompts decoded together")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		cli.Check("llamago", err)
		defer pprof.StopCPUProfile()
	}
	cli.Need(*path != "" && *in != "" && *out != "")
	if err := run(*path, *in, *out, *mode, *maxNew, *stop, *batch, *decoder); err != nil {
		pprof.StopCPUProfile()
		cli.Check("llamago", err)
	}
}

func run(path, inPath, out, mode string, maxNew, stop, batch int, useDecoder bool) error {
	seqs, err := readIDs(inPath)
	if err != nil {
		return err
	}
	t0 := time.Now()
	m, err := loadLlama(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "llamago: loaded %s in %.1fs: %+v\n", path, time.Since(t0).Seconds(), m.Cfg)
	d, err := model.NewLlamaDecoder(m)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	switch mode {
	case "logits":
		for i, ids := range seqs {
			var logits []float32
			if useDecoder {
				if logits, err = decoderLogits(d, ids); err != nil {
					return err
				}
			} else if logits, err = graphLogits(m, ids); err != nil {
				return fmt.Errorf("sequence %d: %w", i, err)
			}
			if err := writeF32(filepath.Join(out, fmt.Sprintf("logits-%d.f32", i)), logits); err != nil {
				return err
			}
		}
		return nil
	case "generate":
		t0 := time.Now()
		gens, err := d.Generate(seqs, model.SampleOptions{MaxNew: maxNew, Stop: []int{stop}, Batch: batch})
		if err != nil {
			return err
		}
		n := 0
		for _, g := range gens {
			n += len(g.Tokens)
		}
		fmt.Fprintf(os.Stderr, "llamago: generated %d tokens in %.1fs (%.1f tokens/s, batch %d, prefill included)\n", n, time.Since(t0).Seconds(), float64(n)/time.Since(t0).Seconds(), batch)
		w, err := os.Create(filepath.Join(out, "generate.jsonl"))
		if err != nil {
			return err
		}
		defer w.Close()
		enc := json.NewEncoder(w)
		v := m.Cfg.Vocab
		for i, g := range gens {
			// The gaps of every step: teacher-forced logits of prompt + tokens.
			seq := append(append([]int(nil), seqs[i]...), g.Tokens...)
			steps := len(g.Tokens)
			if g.Stopped {
				steps++
			}
			l, err := decoderLogits(d, seq)
			if err != nil {
				return err
			}
			gaps := make([]float64, steps)
			for s := 0; s < steps; s++ {
				row := l[(len(seqs[i])-1+s)*v : (len(seqs[i])+s)*v]
				gaps[s] = topGap(row)
			}
			if err := enc.Encode(map[string]any{"tokens": nonNil(g.Tokens), "gaps": gaps}); err != nil {
				return err
			}
		}
		return w.Close()
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// loadLlama reads a GGUF file, a Hugging Face LlamaForCausalLM directory (an export) or a
// reader_lm run or checkpoint directory (export.OpenLlamaModel: LoRA merged).
func loadLlama(path string) (*model.Llama, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		for _, f := range []string{checkpoints.LatestFile, checkpoints.TrainerFile} {
			if _, err := os.Stat(filepath.Join(path, f)); err == nil {
				m, _, _, err := export.OpenLlamaModel(path)
				return m, err
			}
		}
		return export.OpenLlamaHF(path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	return model.LoadLlamaGGUF(f)
}

func nonNil(x []int) []int {
	if x == nil {
		return []int{}
	}
	return x
}

// decoderLogits runs the cached decoder on one sequence from an empty cache: the logits of every
// position, [len(ids), V].
func decoderLogits(d *model.LlamaDecoder, ids []int) ([]float32, error) {
	c, err := d.NewCache(len(ids))
	if err != nil {
		return nil, err
	}
	l, err := d.Forward([]*model.LlamaCache{c}, [][]int{ids}, true)
	if err != nil {
		return nil, err
	}
	return l[0], nil
}

// graphLogits runs Llama.BuildLogits on one sequence.
func graphLogits(m *model.Llama, ids []int) ([]float32, error) {
	g := gorgonia.NewGraph()
	in := model.NewInputs(g, 1, len(ids), "in")
	mask := make([]float32, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	if err := in.Let(ids, mask, nil); err != nil {
		return nil, err
	}
	out, err := m.BuildLogits(model.NewBinder(g), in)
	if err != nil {
		return nil, err
	}
	model.ShareBuffers(g, out)
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return nil, err
	}
	return append([]float32(nil), out.Value().Data().([]float32)...), nil
}

func topGap(row []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, x := range row {
		v := float64(x)
		if v > a {
			a, b = v, a
		} else if v > b {
			b = v
		}
	}
	return a - b
}

func readIDs(path string) ([][]int, error) {
	var out [][]int
	err := jsonl.Lines(path, func(n int, line []byte) error {
		var r struct{ IDs []int }
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, r.IDs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func writeF32(path string, v []float32) error {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return os.WriteFile(path, b, 0o644)
}
