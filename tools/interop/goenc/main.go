// Command goenc is the Go side of the interoperability checks (tools/interop): it opens a
// bi-encoder directory as model.init_from does (a sentence-transformers / Hugging Face BERT
// directory, an export of `train export`, or a run), tokenizes texts with the directory's
// tokenizer and encodes them with the query or passage tower:
//
//	go run ./tools/interop/goenc -model DIR -texts texts.jsonl -out OUT [-tower passage] [-max-length 256]
//
// texts.jsonl holds one JSON string per line. It writes OUT/ids.jsonl (each text's token ids
// before truncation, [CLS] and [SEP] included) and OUT/vectors.npy (float32 [N, H], the pooled
// vectors, L2-normalised when the directory's similarity is cosine or it has a Normalize
// module, as sentence-transformers' encode() returns them).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
	"github.com/ragtrain/ragtrain/tools/interop/internal/jsonl"
)

func main() {
	dir := flag.String("model", "", "bi-encoder directory")
	textsPath := flag.String("texts", "", "JSONL file, one JSON string per line")
	out := flag.String("out", "", "output directory")
	tower := flag.String("tower", "passage", "query or passage")
	maxLen := flag.Int("max-length", 0, "L, tokens per text ([CLS]/[SEP] included); 0: the directory's max_seq_length")
	idsOnly := flag.Bool("ids-only", false, "write ids.jsonl only (no encoding)")
	flag.Parse()
	cli.Need(*dir != "" && *textsPath != "" && *out != "")
	cli.Check("goenc", run(*dir, *textsPath, *out, *tower, *maxLen, *idsOnly))
}

func run(dir, textsPath, out, tower string, L int, idsOnly bool) error {
	texts, err := jsonl.Strings(textsPath)
	if err != nil {
		return err
	}
	d, err := export.OpenBiEncoder(dir)
	if err != nil {
		return err
	}
	m, err := model.NewBiEncoder(d.Encoder, d.Shared, 1)
	if err != nil {
		return err
	}
	if err := d.Init(m); err != nil {
		return err
	}
	tok, _, err := d.LoadTokenizer()
	if err != nil {
		return err
	}
	if L == 0 {
		L = d.MaxLength
	}
	if L == 0 {
		return fmt.Errorf("%s does not say its max_seq_length; give -max-length", dir)
	}
	t := m.Passage
	if tower == "query" {
		t = m.Query
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := jsonl.Write(filepath.Join(out, "ids.jsonl"), len(texts), func(i int) any {
		return append(append([]int{tok.CLSID()}, tok.Encode(texts[i])...), tok.SEPID())
	}); err != nil {
		return err
	}
	if idsOnly {
		return nil
	}
	vecs, err := biencoder.EncodeTexts(t, tok, texts, L, nil)
	if err != nil {
		return err
	}
	if d.Similarity == "cosine" || d.Normalize {
		biencoder.NormalizeRows(vecs, t.Dim())
	}
	fmt.Fprintf(os.Stderr, "goenc: %d texts, L %d, %s tower of %s (%s layout, similarity %q, normalize %v)\n", len(texts), L, tower, dir, d.Layout, d.Similarity, d.Normalize)
	return export.WriteNPYFloat32(filepath.Join(out, "vectors.npy"), vecs, len(texts), t.Dim())
}
