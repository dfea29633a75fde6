package export

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/model"
)

// pythonWithST returns the Python interpreter of the repository's virtual environment
// (tools/pyenv/setup.sh): $RAGTRAIN_PYTHON, else <repo>/.venv/bin/python. The test is skipped
// with -short, when neither exists, and when it cannot import sentence_transformers.
func pythonWithST(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the sentence-transformers check runs Python")
	}
	py := os.Getenv("RAGTRAIN_PYTHON")
	if py == "" {
		py = filepath.Join("..", ".venv", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no Python environment at %s (bash tools/pyenv/setup.sh, or set RAGTRAIN_PYTHON)", py)
	}
	if out, err := exec.Command(py, "-c", "import sentence_transformers, transformers, torch").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import sentence_transformers: %v %s", py, err, lastLine(string(out)))
	}
	return py
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// stExpected is the expected.json of testdata/st_tiny.py.
type stExpected struct {
	Versions     map[string]string `json:"versions"`
	Texts        []string          `json:"texts"`
	MaxSeqLength int               `json:"max_seq_length"`
	Dirs         map[string]struct {
		IDs     [][]int     `json:"ids"`
		Vectors [][]float64 `json:"vectors"`
	} `json:"dirs"`
}

// TestSentenceTransformersPython: a tiny random BertModel saved by transformers and
// sentence-transformers (Transformer + Pooling mean + Normalize) as st_safe/ (model.safetensors,
// tokenizer.json), st_bin/ (pytorch_model.bin, zip format; vocab.txt + tokenizer_config.json)
// and st_legacy/ (pytorch_model.bin, legacy format) opens here as sentence-transformers reads
// it: the same token ids, and embeddings within 1e-5 of SentenceTransformer.encode (after
// L2-normalisation, since Normalize is set). A missing tensor and a wrongly shaped one are then
// errors naming the tensor.
func TestSentenceTransformersPython(t *testing.T) {
	py := pythonWithST(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/st_tiny.py", "../tokenize/testdata/handvocab/vocab.txt", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("st_tiny.py: %v\n%s", err, b)
	}
	var want stExpected
	b, err := os.ReadFile(filepath.Join(out, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	t.Logf("versions %v", want.Versions)
	for _, name := range []string{"st_safe", "st_bin", "st_legacy"} {
		dir := filepath.Join(out, name)
		exp, ok := want.Dirs[name]
		if !ok {
			t.Fatalf("expected.json has no %s", name)
		}
		d, err := OpenBiEncoder(dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		weights := filepath.Join(dir, ModelFile)
		tokFile := TokenizerFile
		if name != "st_safe" {
			weights, tokFile = filepath.Join(dir, PyTorchFile), "vocab.txt"
		}
		if d.query.set.file != weights || !d.Normalize || d.Similarity != "cosine" || d.MaxLength != want.MaxSeqLength ||
			d.Encoder.Pooling != model.PoolingMean || d.Encoder.Hidden != 32 || d.Encoder.Layers != 2 || d.Encoder.Heads != 4 {
			t.Errorf("%s: opened as %+v (weights from %s)", name, d, d.query.set.file)
		}
		tok, what, err := d.LoadTokenizer()
		if err != nil || !strings.HasPrefix(what, filepath.Join(dir, tokFile)) {
			t.Fatalf("%s: tokenizer %q, %v", name, what, err)
		}
		m, err := model.NewBiEncoder(d.Encoder, true, 7)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Init(m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		L := d.MaxLength
		batch := tok.EncodeBatch(want.Texts, L)
		for i, ids := range exp.IDs {
			row := batch.Row(i)[:len(ids)]
			if !slices.Equal(row, ids) || (len(ids) < L && batch.Mask[i*L+len(ids)] != 0) {
				t.Errorf("%s: %q: ids %v, sentence-transformers %v", name, want.Texts[i], batch.Row(i), ids)
			}
		}
		run, err := model.NewEncoderRunner(m.Query, len(want.Texts), L)
		if err != nil {
			t.Fatal(err)
		}
		vecs, err := run.Encode(batch.IDs, batch.Mask, batch.Types, len(want.Texts))
		run.Close()
		if err != nil {
			t.Fatal(err)
		}
		H := d.Encoder.Hidden
		worst := 0.0
		for i, ref := range exp.Vectors {
			v := vecs[i*H : (i+1)*H]
			norm := 1.0
			if d.Normalize {
				var s float64
				for _, x := range v {
					s += float64(x) * float64(x)
				}
				norm = math.Sqrt(s)
			}
			if len(ref) != H {
				t.Fatalf("%s: sentence-transformers vector of %d values, want %d", name, len(ref), H)
			}
			for j, r := range ref {
				worst = max(worst, math.Abs(float64(v[j])/norm-r))
			}
		}
		t.Logf("%s: max |Go - sentence-transformers| = %.3g over %d texts", name, worst, len(exp.Vectors))
		if worst > 1e-5 {
			t.Errorf("%s: embeddings differ from sentence-transformers' by up to %g (want <= 1e-5)", name, worst)
		}
	}

	// A copy of st_safe with a tensor removed and one of the wrong shape.
	dir := filepath.Join(t.TempDir(), "edited")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(out, "st_safe"))); err != nil {
		t.Fatal(err)
	}
	const gone, bad = "encoder.layer.1.output.dense.bias", "encoder.layer.0.attention.self.query.weight"
	rewriteModel(t, dir, func(raw []checkpoints.RawTensor) []checkpoints.RawTensor {
		var keep []checkpoints.RawTensor
		for _, r := range raw {
			switch r.Name {
			case gone:
				continue
			case bad:
				r.Shape = []int{16, 64}
			}
			keep = append(keep, r)
		}
		return keep
	})
	d, err := OpenBiEncoder(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := model.NewBiEncoder(d.Encoder, true, 7)
	err = d.Init(m)
	var mm *MismatchError
	file := filepath.Join(dir, ModelFile)
	if !errors.As(err, &mm) || len(mm.Missing) != 1 || mm.Missing[0].Name != gone || mm.Missing[0].File != file ||
		len(mm.WrongShape) != 1 || mm.WrongShape[0].Name != bad || !slices.Equal(mm.WrongShape[0].Have, []int{16, 64}) ||
		!slices.Equal(mm.WrongShape[0].Want, []int{32, 32}) || len(mm.Unexpected) != 0 {
		t.Fatalf("edited: %v", err)
	}
	for _, s := range []string{"missing: " + gone, "wrong shape: " + bad + " in " + file + " is [16 64]"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("edited: %v, want %q", err, s)
		}
	}
}
