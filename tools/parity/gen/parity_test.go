package main

import (
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

// python returns /usr/bin/python3 when it imports torch; the test is skipped otherwise.
func python(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s with torch: %v", py, err)
	}
	return py
}

// parity runs parity.py on an export and Go outputs and returns its output and exit status.
func parity(t *testing.T, py, exp, goOut string) (string, bool) {
	t.Helper()
	out, err := exec.Command(py, "../parity.py", exp, goOut).CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return string(out), err == nil
}

// roughen replaces every parameter by N(0, 0.3²) draws (1 + that for LayerNorm weights), so that
// the networks are far from their near-uniform initial outputs and every part of the forward
// pass shows in the compared numbers.
func roughen(ps []*model.Param, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	for _, p := range ps {
		ln := strings.Contains(p.Name, "ln_") || strings.Contains(p.Name, "norm")
		for i, d := 0, p.Value.Data().([]float32); i < len(d); i++ {
			d[i] = float32(0.3 * r.NormFloat64())
			if ln && strings.HasSuffix(p.Name, ".weight") {
				d[i]++
			}
		}
	}
}

func parityTokenizer(t *testing.T) *tokenize.Tokenizer {
	t.Helper()
	tok, err := tokenize.Train([]string{"ines ronus lives in larkhill .", "where does ines ronus live ?",
		"milo ligi grows poppy .", "what does milo ligi grow ?"}, tokenize.TrainOptions{VocabSize: 80, MinFrequency: 1, Lowercase: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.AddSpecialTokens([]string{"<ctx>", "</ctx>"}); err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestParityReader: parity.py's GPT2LMHeadModel reproduces the Go reader's next-token
// log-probabilities on a hand-built GPT-2 export (PASS), and fails on an export whose final
// LayerNorm differs from the Go model's.
func TestParityReader(t *testing.T) {
	py := python(t)
	tok := parityTokenizer(t)
	rd, err := model.NewReader(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 16,
		Layers: 2, Heads: 4, FFN: 24, MaxPosition: 20}, 1)
	if err != nil {
		t.Fatal(err)
	}
	roughen(rd.Params(), 2)
	dir := t.TempDir()
	exp, goOut := filepath.Join(dir, "export"), filepath.Join(dir, "go")
	if err := export.WriteReader(exp, rd, tok, export.ReaderMeta{MaxLength: 20, MaxAnswerTokens: 3}); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(goOut, 0o755)
	in := inputs{Kind: export.KindRAG, MaxLength: 20, Queries: []string{"where does ines ronus live ? ines ronus lives in", "what does milo ligi grow ?"},
		Passages: []string{"ines ronus lives in larkhill .", strings.Repeat("milo ligi grows poppy . ", 5)},
		Answers:  []string{"larkhill", "poppy"}, Docs: []string{"ines ronus lives in larkhill .", "milo ligi grows poppy ."}}
	if err := writeReaderOutputs(goOut, rd, tok, in); err != nil {
		t.Fatal(err)
	}
	out, ok := parity(t, py, exp, goOut)
	if !ok || !strings.Contains(out, "PASS") || !strings.Contains(out, "reader next-token log-probs (LMLogProb)") {
		t.Fatalf("parity failed:\n%s", out)
	}
	t.Log(out)

	w := rd.Param("reader.ln_f.bias").Value.Data().([]float32)
	w[3] += 0.01
	bad := filepath.Join(dir, "bad")
	if err := export.WriteReader(bad, rd, tok, export.ReaderMeta{MaxLength: 20, MaxAnswerTokens: 3}); err != nil {
		t.Fatal(err)
	}
	if out, ok := parity(t, py, bad, goOut); ok || !strings.Contains(out, "FAIL") {
		t.Errorf("a changed ln_f.bias passed:\n%s", out)
	}
}

// TestParityCrossEncoder: parity.py's BertForSequenceClassification reproduces the Go
// cross-encoder's scores on a hand-built export.
func TestParityCrossEncoder(t *testing.T) {
	py := python(t)
	tok := parityTokenizer(t)
	m, err := model.NewCrossEncoder(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 16,
		Layers: 2, Heads: 4, FFN: 24, MaxPosition: 20, Pooling: model.PoolingCLS}, 1)
	if err != nil {
		t.Fatal(err)
	}
	roughen(m.Params(), 3)
	dir := t.TempDir()
	exp, goOut := filepath.Join(dir, "export"), filepath.Join(dir, "go")
	if err := export.WriteCrossEncoder(exp, m, tok, export.CrossEncoderMeta{MaxLength: 20, Loss: "listwise", FirstStage: "bm25"}); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(goOut, 0o755)
	in := inputs{Kind: export.KindCrossEncoder, MaxLength: 20,
		Queries:  []string{"where does ines ronus live ?", "what does milo ligi grow ?", "", "ines"},
		Passages: []string{"ines ronus lives in larkhill .", "ines ronus lives in larkhill .", "milo", strings.Repeat("milo ligi grows poppy . ", 5)}}
	if err := writeCrossEncoderOutputs(goOut, m, tok, in); err != nil {
		t.Fatal(err)
	}
	out, ok := parity(t, py, exp, goOut)
	if !ok || !strings.Contains(out, "PASS") || !strings.Contains(out, "cross-encoder scores") {
		t.Fatalf("parity failed:\n%s", out)
	}
	t.Log(out)
}

// TestParitySelfRAG: on a hand-built reader grown by the reflection tokens (model.GrowVocab),
// parity.py reproduces the Go log-probs on the reflection-token columns and at the positions
// that predict a reflection token (PASS), and fails on an export whose [Irrelevant] row alone
// differs from the Go model's.
func TestParitySelfRAG(t *testing.T) {
	py := python(t)
	tok := parityTokenizer(t)
	plain, err := model.NewReader(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 16,
		Layers: 2, Heads: 4, FFN: 24, MaxPosition: 20}, 1)
	if err != nil {
		t.Fatal(err)
	}
	roughen(plain.Params(), 4)
	if _, err := tok.AddSpecialTokens(tokenize.ReflectionTokens()); err != nil {
		t.Fatal(err)
	}
	rd, err := model.GrowVocab(plain, tok.VocabSize(), 2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	exp, goOut := filepath.Join(dir, "export"), filepath.Join(dir, "go")
	meta, dec := export.ReaderMeta{MaxLength: 20, MaxAnswerTokens: 3}, export.SelfRAGDecoding{RowLength: 20, TopK: 1}
	if err := export.WriteSelfRAGReader(exp, rd, tok, meta, dec); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(goOut, 0o755)
	in := inputs{Kind: export.KindSelfRAG, MaxLength: 20,
		Queries:  []string{"where does ines ronus live ?", "what does milo ligi grow ?", "what does milo ligi grow ?"},
		Passages: []string{"larkhill .", "ines ronus lives in larkhill .", ""},
		Answers: []string{"[Relevant] larkhill [Fully supported]", "[Irrelevant]",
			"[No Retrieve] milo ligi grows poppy"}, Docs: []string{"milo ligi grows poppy ."}}
	if err := writeReaderOutputs(goOut, rd, tok, in); err != nil {
		t.Fatal(err)
	}
	out, ok := parity(t, py, exp, goOut)
	if !ok || !strings.Contains(out, "PASS") || !strings.Contains(out, "reflection-token columns (7)") ||
		!strings.Contains(out, "next = reflection token (4 pos)") {
		t.Fatalf("parity failed:\n%s", out)
	}
	t.Log(out)

	id, _ := tok.ID(tokenize.IrrelevantToken)
	w := rd.Param("reader.embeddings.word").Value.Data().([]float32)
	w[id*16+3] += 0.05
	bad := filepath.Join(dir, "bad")
	if err := export.WriteSelfRAGReader(bad, rd, tok, meta, dec); err != nil {
		t.Fatal(err)
	}
	if out, ok := parity(t, py, bad, goOut); ok || !strings.Contains(out, "FAIL") {
		t.Errorf("a changed [Irrelevant] row passed:\n%s", out)
	}
}
