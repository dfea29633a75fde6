// Command gen writes the inputs and the Go model's outputs that tools/parity/parity.py compares
// with its PyTorch re-implementation of an exported model:
//
//	go run ./tools/parity/gen -run RUN_DIR -out DIR [-n 16]
//
// It reads the run's latest checkpoint (the model as trained, not the export), tokenizes texts
// of the run's data set with the run's tokenizer, runs the Go encoder and writes into DIR, for a
// bi-encoder:
//
//	inputs.json                              kind, run, checkpoint, max_length, the texts and corpus ids
//	query_ids.npy, query_mask.npy            int64 [B, L] token ids and attention mask (1 real, 0 padding)
//	query_types.npy                          int64 [B, L] token type ids (all 0)
//	query_go.npy                             float32 [B, H] pooled query vectors (before any normalisation)
//	passage_ids.npy, passage_mask.npy, passage_types.npy, passage_go.npy   the same for passages
//
// The queries are the first n of queries.jsonl plus three edge cases (an empty text, a text
// longer than max_length, characters outside the vocabulary); the passages are the first n of
// corpus.jsonl, so that their vectors are rows 0..n-1 of the export's embeddings.npy.
//
// For a reranker run (cross-encoder) it writes pair_*.npy, the Go scores of (query, passage)
// pairs (crossencoder.go); for a rag run, reader_*.npy, the Go reader's next-token
// log-probabilities at every position of sequences of the run's world (reader.go); for a
// selfrag run the same for the reflective reader on sequences that read and predict the
// reflection tokens (selfrag.go).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/data"
	// The recipe kinds, registered so that export.OpenRun reads the run's recipe.resolved.toml.
	_ "github.com/ragtrain/ragtrain/experiment/kinds"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
)

func main() {
	cli.Check("parity gen", run(os.Args[1:]))
}

// generators by model kind (crossencoder.go, reader.go).
var generators = map[string]func(r *export.Run, out string, n int) error{
	export.KindBiEncoder:    genBiEncoder,
	export.KindCrossEncoder: genCrossEncoder,
	export.KindRAG:          genRAG,
	export.KindSelfRAG:      genSelfRAG,
}

func run(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	runDir := fs.String("run", "", "run directory (latest checkpoint) or checkpoint directory")
	out := fs.String("out", "", "directory to write the inputs and Go outputs into (created)")
	n := fs.Int("n", 16, "queries and passages taken from the data set")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *runDir == "" || *out == "" || *n < 1 {
		fs.Usage()
		return errors.New("-run and -out are required, -n >= 1")
	}
	r, err := export.OpenRun(*runDir)
	if err != nil {
		return err
	}
	gen, ok := generators[r.Kind]
	if !ok {
		return fmt.Errorf("%s: no parity inputs for model kind %q", *runDir, r.Kind)
	}
	if r.Recipe == nil {
		return fmt.Errorf("%s: the texts come from the run's data set: %w", *runDir, r.RecipeErr)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := gen(r, *out, *n); err != nil {
		return err
	}
	fmt.Println(*out)
	return nil
}

// inputs is inputs.json.
type inputs struct {
	Kind       string   `json:"kind"`
	Run        string   `json:"run"`
	Checkpoint string   `json:"checkpoint"`
	MaxLength  int      `json:"max_length"`
	Similarity string   `json:"similarity"`
	Queries    []string `json:"queries"`
	Passages   []string `json:"passages"`
	PassageIDs []string `json:"passage_ids,omitempty"` // corpus ids of the passages, in order
	Answers    []string `json:"answers,omitempty"`     // reader: the answer after each question
	Docs       []string `json:"docs,omitempty"`        // reader: the pretraining lines packed into the last row
}

// runData is the run's tokenizer and the queries and passages of its data.dir.
func runData(r *export.Run) (*tokenize.Tokenizer, *data.Queries, *data.Corpus, error) {
	tok, err := r.Tokenizer()
	if err != nil {
		return nil, nil, nil, err
	}
	ds := r.Recipe.Data
	queries, err := data.LoadQueries(filepath.Join(ds.Dir, "queries.jsonl"))
	if err != nil {
		return nil, nil, nil, err
	}
	corpus, err := data.LoadCorpus(filepath.Join(ds.Dir, "corpus.jsonl"))
	if err != nil {
		return nil, nil, nil, err
	}
	return tok, queries, corpus, nil
}

func genBiEncoder(r *export.Run, out string, n int) error {
	m, meta, err := r.BiEncoder()
	if err != nil {
		return err
	}
	tok, queries, corpus, err := runData(r)
	if err != nil {
		return err
	}
	in := inputs{Kind: r.Kind, Run: r.Dir, Checkpoint: r.Checkpoint.Dir, MaxLength: meta.MaxLength, Similarity: meta.Similarity}
	for i := 0; i < min(n, queries.Len()); i++ {
		text, _ := queries.Text(queries.IDs[i])
		in.Queries = append(in.Queries, text)
	}
	in.Queries = append(in.Queries, "", strings.Repeat("supersonic boundary layer transition ", 40),
		"ÆØÅ ☃ 漢字 ∮ E⋅da = Q")
	for i := 0; i < min(n, corpus.Len()); i++ {
		in.Passages = append(in.Passages, corpus.Passage(i, r.Recipe.Data.TitleField))
		in.PassageIDs = append(in.PassageIDs, corpus.IDs[i])
	}
	if err := encode(filepath.Join(out, "query"), m.Query, tok, in.Queries, meta.MaxLength); err != nil {
		return err
	}
	if err := encode(filepath.Join(out, "passage"), m.Passage, tok, in.Passages, meta.MaxLength); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(out, "inputs.json"), in)
}

// encode writes prefix_ids.npy, prefix_mask.npy, prefix_types.npy and prefix_go.npy.
func encode(prefix string, t *model.Tower, tok *tokenize.Tokenizer, texts []string, L int) error {
	b := tok.EncodeBatch(texts, L)
	runner, err := model.NewEncoderRunner(t, len(texts), L)
	if err != nil {
		return err
	}
	vecs, err := runner.Encode(b.IDs, b.Mask, b.Types, len(texts))
	if err != nil {
		return err
	}
	B := len(texts)
	if err := writeBatch(prefix, b.IDs, b.Mask, b.Types, B, L); err != nil {
		return err
	}
	return export.WriteNPYFloat32(prefix+"_go.npy", vecs, B, t.Dim())
}
