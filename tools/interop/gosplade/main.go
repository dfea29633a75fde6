// Command gosplade is the Go side of the SPLADE interoperability check (tools/interop/splade.py):
// it exports a SPLADE encoder as a sentence-transformers SparseEncoder directory and writes the
// pruned sparse vectors of texts as this toolkit computes them.
//
//	go run ./tools/interop/gosplade -run RUN -texts texts.jsonl -out OUT [-top-k 256]
//	go run ./tools/interop/gosplade -init pretrained/all-MiniLM-L6-v2 -texts texts.jsonl -out OUT
//
// With -run, the run's SPLADE checkpoint; with -init, a BERT directory with model.Splade's head
// initialised (decoder bias -5) and then perturbed with seeded N(0, 0.05²) noise on every head
// parameter, so that the check exercises the transform, LayerNorm and bias as a trained model
// would. texts.jsonl holds one JSON string per line; every text is encoded at the export's
// max_seq_length (what SparseEncoder.encode does). It writes OUT/model (the export) and
// OUT/vectors.jsonl: per text {"ids": [...], "values": [...]}, the top-k terms (index.Prune)
// sorted by id.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/ragtrain/ragtrain/experiment/splade"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
	"github.com/ragtrain/ragtrain/tools/interop/internal/jsonl"
)

func main() {
	run := flag.String("run", "", "a SPLADE run (or checkpoint) directory")
	init := flag.String("init", "", "a BERT directory (the head initialised and perturbed)")
	textsPath := flag.String("texts", "", "JSONL file, one JSON string per line")
	out := flag.String("out", "", "output directory")
	topK := flag.Int("top-k", 256, "terms kept per text (0: every non-zero)")
	maxLen := flag.Int("max-length", 128, "with -init: L, tokens per text")
	flag.Parse()
	cli.Need((*run == "") != (*init == "") && *textsPath != "" && *out != "")
	cli.Check("gosplade", do(*run, *init, *textsPath, *out, *topK, *maxLen))
}

func open(run, init string, L int) (*model.Splade, *tokenize.Tokenizer, export.SpladeConfig, error) {
	if run != "" {
		r, err := export.OpenRun(run)
		if err != nil {
			return nil, nil, export.SpladeConfig{}, err
		}
		s, c, err := r.Splade()
		if err != nil {
			return nil, nil, c, err
		}
		tok, err := r.Tokenizer()
		return s, tok, c, err
	}
	d, err := export.OpenBiEncoder(init)
	if err != nil {
		return nil, nil, export.SpladeConfig{}, err
	}
	m, err := model.NewBiEncoder(d.Encoder, true, 1)
	if err != nil {
		return nil, nil, export.SpladeConfig{}, err
	}
	if err := d.Init(m); err != nil {
		return nil, nil, export.SpladeConfig{}, err
	}
	tok, _, err := d.LoadTokenizer()
	if err != nil {
		return nil, nil, export.SpladeConfig{}, err
	}
	s, err := model.NewSplade(m.Query, -5)
	if err != nil {
		return nil, nil, export.SpladeConfig{}, err
	}
	r := rand.New(rand.NewPCG(40, 3))
	for _, p := range s.HeadParams() {
		d := p.Value.Data().([]float32)
		for i := range d {
			d[i] += float32(0.05 * r.NormFloat64())
		}
	}
	return s, tok, export.SpladeConfig{Kind: export.KindSplade, Encoder: d.Encoder, MaxLength: L, QueryMaxLength: L, DecoderBiasInit: -5}, nil
}

func do(run, init, textsPath, out string, k, L int) error {
	texts, err := jsonl.Strings(textsPath)
	if err != nil {
		return err
	}
	s, tok, c, err := open(run, init, L)
	if err != nil {
		return err
	}
	if err := export.WriteSparseEncoder(filepath.Join(out, "model"), s, tok, c); err != nil {
		return err
	}
	vecs, _, err := splade.EncodeTerms(s, tok, texts, c.MaxLength, 8, k)
	if err != nil {
		return err
	}
	if err := jsonl.Write(filepath.Join(out, "vectors.jsonl"), len(vecs), func(i int) any {
		row := struct {
			IDs    []int32   `json:"ids"`
			Values []float32 `json:"values"`
		}{IDs: []int32{}, Values: []float32{}}
		for _, t := range vecs[i] {
			row.IDs, row.Values = append(row.IDs, t.ID), append(row.Values, t.Weight)
		}
		return row
	}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gosplade: %d texts at L %d, top %d terms, export in %s\n", len(texts), c.MaxLength, k, filepath.Join(out, "model"))
	return nil
}
