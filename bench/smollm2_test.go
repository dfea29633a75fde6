package bench

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/model"
)

// tinySmolLM2 writes a random 2-layer grouped-query LLaMA with the tokenizer of package
// tokenize's tiny-bpe.gguf fixture as a GGUF, and prepares smollm2.json on SciFact at small
// shapes (2 x 16 training tokens; 3 prompts of 8 tokens, 5 new tokens).
func tinySmolLM2(t *testing.T) (*SmolLM2Data, string) {
	t.Helper()
	f, err := gguf.Open(filepath.Join("..", "tokenize", "testdata", "tiny-bpe.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	var meta []gguf.KV
	for _, k := range f.Keys() {
		if strings.HasPrefix(k, "tokenizer.") {
			meta = append(meta, gguf.KV{Key: k, Value: f.Meta[k]})
		}
	}
	m, err := model.NewLlama(model.LlamaConfig{Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, FFN: 24, Vocab: 860,
		RopeTheta: 10000, RMSEps: 1e-5, MaxPosition: 64, TieEmbeddings: true}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params() { // sharper distributions than the 0.02 initialisation: fewer near-ties
		if p.Value.Dims() == 2 {
			d := p.Value.Data().([]float32)
			for i := range d {
				d[i] *= 20
			}
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteLlamaGGUF(path, m, meta); err != nil {
		t.Fatal(err)
	}
	s := DefaultSmolLM2Shapes()
	s.TrainB, s.TrainL, s.PromptL, s.MaxNew, s.GenB, s.LR = 2, 16, 8, 5, 3, 1e-2
	s.LoRA.Targets = []string{"q_proj", "v_proj", "down_proj"}
	d, out, err := PrepareSmolLM2("../datasets/scifact", path, dir, s)
	if err != nil {
		t.Fatal(err)
	}
	return d, out
}

// TestServeSmolLM2: each SmolLM2 workload runs in our worker at tiny shapes: training lowers the
// loss from run to run (the same batch), generation gives MaxNew tokens per prompt and the same
// tokens every run; and, with the venv and RAGTRAIN_SMOLLM2_PEER=1, the transformers peer on the same GGUF starts from our
// first-step loss (full and LoRA: the adapters start at zero) within 1e-4 and generates our
// greedy tokens (the same digest).
func TestServeSmolLM2(t *testing.T) {
	d, path := tinySmolLM2(t)
	s := d.Shapes
	if len(d.Train) != s.TrainB || len(d.Train[0]) != s.TrainL || len(d.Prompts) != s.GenB || len(d.Prompts[0]) != s.PromptL {
		t.Fatalf("smollm2.json: %d x %d training ids, %d x %d prompt ids", len(d.Train), len(d.Train[0]), len(d.Prompts), len(d.Prompts[0]))
	}
	ours := map[string]message{}
	for _, c := range []struct {
		name  string
		units int
	}{{SmolLM2TrainFull, s.TrainB}, {SmolLM2TrainLoRA, s.TrainB}, {SmolLM2GenB1, s.MaxNew}, {SmolLM2GenB8, s.GenB * s.MaxNew}} {
		msgs, err := serve(t, c.name, filepath.Dir(path), "run\nrun\nrun\nquit\n")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(msgs) != 5 || !msgs[0].Ready || msgs[4].PeakRSSKiB <= 0 {
			t.Fatalf("%s: messages %+v", c.name, msgs)
		}
		for _, m := range msgs[1:4] {
			if m.Units != c.units || !(m.Seconds > 0) {
				t.Fatalf("%s: run %+v, want %d units", c.name, m, c.units)
			}
		}
		if strings.Contains(c.name, "train") {
			if l := msgs[1].Loss; !(l > 0) || !(msgs[3].Loss < l) || math.IsInf(l, 0) {
				t.Errorf("%s: losses %v, %v, %v: want finite and falling", c.name, msgs[1].Loss, msgs[2].Loss, msgs[3].Loss)
			}
		} else if msgs[1].Digest == "" || msgs[1].Digest != msgs[3].Digest {
			t.Errorf("%s: digests %q, %q", c.name, msgs[1].Digest, msgs[3].Digest)
		}
		ours[c.name] = msgs[1]
	}
	// our step in passes of one row: the same first loss (the mean over the step's targets)
	d.Shapes.Micro = 1
	b, _ := json.Marshal(d)
	microDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(microDir, "smollm2.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	msgs, err := serve(t, SmolLM2TrainFull, microDir, "run\nquit\n")
	if err != nil || len(msgs) != 3 {
		t.Fatalf("micro 1: %v %+v", err, msgs)
	}
	if l, w := msgs[1].Loss, ours[SmolLM2TrainFull].Loss; math.Abs(l-w) > 1e-6*w {
		t.Errorf("first loss in passes of 1 row %.8f, in one pass %.8f", l, w)
	}
	// with gradient checkpointing, in one pass: the same first loss, bit for bit
	d.Shapes.Micro, d.Shapes.Checkpoint = 0, true
	b, _ = json.Marshal(d)
	ckptDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(ckptDir, "smollm2.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if msgs, err = serve(t, SmolLM2TrainFull, ckptDir, "run\nquit\n"); err != nil || len(msgs) != 3 {
		t.Fatalf("checkpointing: %v %+v", err, msgs)
	}
	if l, w := msgs[1].Loss, ours[SmolLM2TrainFull].Loss; l != w {
		t.Errorf("first loss with gradient checkpointing %.8f, without %.8f", l, w)
	}
	if os.Getenv("RAGTRAIN_SMOLLM2_PEER") == "" {
		t.Skip("the transformers peer (minutes of imports on a loaded machine): RAGTRAIN_SMOLLM2_PEER=1")
	}
	venv := os.Getenv("VENV")
	if venv == "" {
		venv = "../.venv"
	}
	py := filepath.Join(venv, "bin", "python")
	if _, err := pythonImports(py, "transformers"); err != nil {
		t.Skipf("no transformers: %v", err)
	}
	scripts := t.TempDir()
	script := filepath.Join(scripts, "smollm2_peer.py")
	if err := os.WriteFile(script, smolPeerPy, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scripts, "peer.py"), peerPy, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, o := range ours {
		cmd := exec.Command(py, script, "--workload", name, "--data", path, "--threads", "1")
		cmd.Stdin = strings.NewReader("run\nquit\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var msgs []message
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			var m message
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				msgs = append(msgs, m)
			}
		}
		if len(msgs) != 3 || msgs[0].Error != "" || msgs[1].Error != "" {
			t.Fatalf("%s: peer said %s", name, out)
		}
		p := msgs[1]
		if p.Units != o.Units {
			t.Errorf("%s: peer %d units, ours %d", name, p.Units, o.Units)
		}
		if strings.Contains(name, "train") && math.Abs(p.Loss-o.Loss) > 1e-4 {
			t.Errorf("%s: first-step loss %.7f in transformers, %.7f ours", name, p.Loss, o.Loss)
		}
		if strings.Contains(name, "generate") && p.Digest != o.Digest {
			t.Errorf("%s: transformers generated digest %s, ours %s", name, p.Digest, o.Digest)
		}
		t.Logf("%s: ours loss %.6f digest %s; transformers %.6f %s", name, o.Loss, o.Digest, p.Loss, p.Digest)
	}
}
