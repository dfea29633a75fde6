package export_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// A shared transformer bi-encoder exports as one Hugging Face BERT + sentence-transformers
// directory, and a new model starts from it bit for bit.
func ExampleWriteBiEncoder() {
	tok, _ := tokenize.Train([]string{"supersonic flow over a flat plate"}, tokenize.TrainOptions{VocabSize: 60, Lowercase: true})
	cfg := model.EncoderConfig{Encoder: "transformer", Vocab: tok.VocabSize(), Hidden: 8, Layers: 1, Heads: 2, FFN: 16, MaxPosition: 16}
	m, _ := model.NewBiEncoder(cfg, true, 1)
	out, _ := os.MkdirTemp("", "export-example-")
	defer os.RemoveAll(out)
	dir := filepath.Join(out, "bert")
	if err := export.WriteBiEncoder(dir, m, tok, export.BiEncoderMeta{Similarity: "cosine", MaxLength: 16}); err != nil {
		fmt.Println(err)
		return
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			fmt.Println(rel)
		}
		return nil
	})
	fresh, _ := model.NewBiEncoder(cfg, true, 2)
	d, err := export.InitBiEncoder(fresh, dir)
	fmt.Println(d.Layout, err, fresh.Params()[0].Value.Data().([]float32)[0] == m.Params()[0].Value.Data().([]float32)[0])
	// Output:
	// 1_Pooling/config.json
	// config.json
	// config_sentence_transformers.json
	// model.safetensors
	// modules.json
	// ragtrain.json
	// sentence_bert_config.json
	// special_tokens_map.json
	// tokenizer.json
	// tokenizer_config.json
	// export <nil> true
}
