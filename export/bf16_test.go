package export

import (
	"math"
	"testing"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/model"
)

// TestMiniLMBF16Embeddings: all-MiniLM-L6-v2's float32 weights encoding 96 SciFact abstracts
// (title and text, 256 tokens) with bfloat16 products (model.BFloat16) give embeddings at
// cosine >= 0.999 to the float32 ones, every one of them (the bound of the bf16 issue; the same
// check PyTorch's autocast passes with sentence-transformers), and not the float32 ones.
func TestMiniLMBF16Embeddings(t *testing.T) {
	d, err := OpenBiEncoder(pretrainedDir(t, "all-MiniLM-L6-v2"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.NewBiEncoder(d.Encoder, d.Shared, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Init(m); err != nil {
		t.Fatal(err)
	}
	tok, _, err := d.LoadTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := data.LoadCorpus("../datasets/scifact/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, 96)
	for i := range texts {
		texts[i] = corpus.Titles[i*50] + " " + corpus.Texts[i*50]
	}
	encode := func(p model.Precision) []float32 {
		defer model.SetMatmulPrecision(model.SetMatmulPrecision(p))
		v, err := biencoder.EncodeTexts(m.Passage, tok, texts, d.MaxLength, nil)
		if err != nil {
			t.Fatal(err)
		}
		biencoder.NormalizeRows(v, m.Passage.Dim())
		return v
	}
	f32, bf := encode(model.Float32), encode(model.BFloat16)
	dim := m.Passage.Dim()
	lowest, same := 1.0, 0
	for i := range texts {
		var dot float64
		for j := 0; j < dim; j++ {
			dot += float64(f32[i*dim+j]) * float64(bf[i*dim+j])
			if f32[i*dim+j] == bf[i*dim+j] {
				same++
			}
		}
		lowest = math.Min(lowest, dot)
	}
	if lowest < 0.999 {
		t.Fatalf("lowest cosine of a bf16 embedding to its float32 one %.6f, want >= 0.999", lowest)
	}
	if same == len(f32) {
		t.Fatal("the bf16 embeddings are the float32 ones")
	}
	t.Logf("%d abstracts: lowest cosine %.6f (bf16 products on %s)", len(texts), lowest, model.BF16Kernel())
}
