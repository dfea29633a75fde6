package experiment

import (
	"fmt"
	"io"
	"strings"

	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// model.init_from: a recipe starts from the weights of an export (train export), a Hugging Face
// BERT directory or another run, instead of a random initialisation (export.OpenBiEncoder lists
// the layouts). The vocabulary must be the one those weights were trained with, so unless the
// recipe names tokenizer.file, the run uses the directory's tokenizer.json.

// initFromTokenizer loads the tokenizer.json of the model.init_from directory.
func initFromTokenizer(dir string, out io.Writer) (*tokenize.Tokenizer, error) {
	d, err := export.OpenBiEncoder(dir)
	if err != nil {
		return nil, fmt.Errorf("model.init_from: %w", err)
	}
	if d.Tokenizer == "" {
		return nil, fmt.Errorf("model.init_from: %s has no %s; name the tokenizer its weights were trained with in tokenizer.file", dir, export.TokenizerFile)
	}
	fmt.Fprintf(out, "tokenizer: %s (from model.init_from; tokenizer.train is not used)\n", d.Tokenizer)
	return tokenize.Load(d.Tokenizer)
}

// InitFrom copies the weights of the model.init_from directory into m.
func InitFrom(m *model.BiEncoder, dir string, out io.Writer) error {
	d, err := export.InitBiEncoder(m, dir)
	if err != nil {
		return fmt.Errorf("model.init_from: %w", err)
	}
	fmt.Fprintf(out, "init_from: %d parameters from %s (%s layout)\n", len(m.Params()), dir, d.Layout)
	if len(d.Ignored) > 0 {
		fmt.Fprintf(out, "init_from: skipped %d tensors that are not encoder parameters: %s\n", len(d.Ignored), strings.Join(d.Ignored, ", "))
	}
	return nil
}
