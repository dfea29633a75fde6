package main

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// python returns $RAGTRAIN_PYTHON, else <repo>/.venv/bin/python (tools/pyenv/setup.sh), when it
// imports sentence_transformers; the test is skipped otherwise.
func python(t *testing.T) string {
	t.Helper()
	py := os.Getenv("RAGTRAIN_PYTHON")
	if py == "" {
		py = filepath.Join("..", "..", "..", ".venv", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no Python for the interop check (set RAGTRAIN_PYTHON or run tools/pyenv/setup.sh): %v", err)
	}
	if out, err := exec.Command(py, "-c", "import sentence_transformers").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import sentence_transformers: %v\n%s", py, err, out)
	}
	return py
}

var interopTexts = []string{
	"The boundary layer on a flat plate in supersonic flow.",
	"Heat transfer to a cone at high Mach number.",
	"Flutter of swept wings; an experimental study.",
	"Buckling of thin cylindrical shells under axial compression.",
	"what is the heat transfer at high mach number?",
}

// TestCrossEncoderInterop exports a small cross-encoder with rough random weights (so that
// every part of the network shows in the scores), writes pairs with WritePairs and runs
// crossencoder.py: sentence-transformers' CrossEncoder scores them as Go does within 1e-4 and
// tokenizes them to Go's ids; a copy whose classifier bias is moved by 0.01 fails.
func TestCrossEncoderInterop(t *testing.T) {
	py := python(t)
	tok, err := tokenize.Train(interopTexts, tokenize.TrainOptions{VocabSize: 120, MinFrequency: 1, Lowercase: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.NewCrossEncoder(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 32,
		Layers: 2, Heads: 4, FFN: 48, MaxPosition: 48, Dropout: 0.1, Pooling: model.PoolingCLS}, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 1))
	for _, p := range m.Params() {
		for i, d := 0, p.Value.Data().([]float32); i < len(d); i++ {
			d[i] = float32(0.3 * r.NormFloat64())
			if strings.Contains(p.Name, "norm") && strings.HasSuffix(p.Name, ".weight") {
				d[i]++
			}
		}
	}
	dir := t.TempDir()
	exp := filepath.Join(dir, "export")
	if err := export.WriteCrossEncoder(exp, m, tok, export.CrossEncoderMeta{MaxLength: 40, Loss: "listwise", FirstStage: "bm25", TrainDepth: 30, ListSize: 8}); err != nil {
		t.Fatal(err)
	}
	// Queries shorter than half of max_length, as SciFact's claims are: Go keeps the query whole
	// and cuts the passage, as Hugging Face's "longest_first" truncation then does.
	var qs, ps []string
	for i, q := range []string{"boundary layer", "heat transfer at high mach number", "flutter of swept wings", "buckling of shells", "what is the heat transfer?"} {
		for _, p := range []string{interopTexts[(i+1)%len(interopTexts)], strings.Repeat(interopTexts[i]+" ", 4)} {
			qs, ps = append(qs, q), append(ps, p)
		}
	}
	qs, ps = append(qs, "", "flutter"), append(ps, interopTexts[0], "ÆØÅ ☃ 漢字 flutter")
	pairs := filepath.Join(dir, "pairs.jsonl")
	if err := WritePairs(exp, qs, ps, pairs); err != nil {
		t.Fatal(err)
	}
	lines := readPairs(t, pairs)
	if len(lines) != len(qs) || len(lines[0].IDs) == 0 || lines[0].Score == lines[1].Score {
		t.Fatalf("pairs file: %+v", lines)
	}
	if n := len(lines[1].IDs); n != 40 {
		t.Errorf("a long pair has %d ids, want max_length 40", n)
	}
	out, err := exec.Command(py, "../crossencoder.py", exp, pairs).CombinedOutput()
	t.Logf("crossencoder.py:\n%s", out)
	if err != nil || !strings.Contains(string(out), "PASS") || !strings.Contains(string(out), "tokenization: 12 of 12 pairs encode to Go's ids") {
		t.Fatalf("crossencoder.py: %v", err)
	}

	// Scores moved by 0.01 are caught.
	moved := filepath.Join(dir, "moved.jsonl")
	var b strings.Builder
	for _, l := range lines {
		l.Score += 0.01
		s, _ := json.Marshal(l)
		b.Write(append(s, '\n'))
	}
	if err := os.WriteFile(moved, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(py, "../crossencoder.py", exp, moved).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "FAIL") {
		t.Errorf("moved scores passed: %v\n%s", err, out)
	}
}

func readPairs(t *testing.T, path string) []pairLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []pairLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l pairLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}
