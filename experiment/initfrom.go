package experiment

import (
	"fmt"
	"io"
	"strings"

	"github.com/ragtrain/ragtrain/configs"

	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// model.init_from: a recipe starts from the weights of an export (train export), a Hugging Face
// BERT directory or another run, instead of a random initialisation (export.OpenBiEncoder lists
// the layouts). The vocabulary must be the one those weights were trained with, so unless the
// recipe names tokenizer.file, the run uses the directory's tokenizer.json.

// initFromTokenizer loads the tokenizer of the model.init_from directory: its tokenizer.json,
// else a BERT WordPiece vocabulary (vocab.txt with tokenizer_config.json and
// special_tokens_map.json), as export.BiEncoderDir.LoadTokenizer reads them.
func initFromTokenizer(dir string, out io.Writer) (*tokenize.Tokenizer, error) {
	d, err := export.OpenBiEncoder(dir)
	if err != nil {
		return nil, fmt.Errorf("model.init_from: %w", err)
	}
	tok, src, err := d.LoadTokenizer()
	if err != nil {
		return nil, fmt.Errorf("model.init_from: %w; name the tokenizer its weights were trained with in tokenizer.file", err)
	}
	fmt.Fprintf(out, "tokenizer: %s (from model.init_from; tokenizer.train is not used)\n", src)
	return tok, nil
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

// ResolveInitFrom takes what the recipe leaves unset from the model.init_from directory
// (export.OpenBiEncoder: an export, a Hugging Face / sentence-transformers BERT directory, or a
// run): the architecture ([model] encoder, hidden, layers, heads, ffn, max_position,
// shared_towers), the pooling and dropout, loss.similarity and tokenizer.max_length
// (sentence-transformers' max_seq_length), and prints what it took. A recipe may override the
// pooling, dropout, similarity and max_length; an architecture key the recipe sets to another
// value than the checkpoint's is an error naming the key, its line and the checkpoint's value,
// since those weights cannot compute it. It does nothing without model.init_from.
func ResolveInitFrom(rec *configs.Recipe, out io.Writer) error {
	if rec.Model.InitFrom == "" {
		return nil
	}
	d, err := export.OpenBiEncoder(rec.Model.InitFrom)
	if err != nil {
		return fmt.Errorf("model.init_from: %w", err)
	}
	c := d.Encoder
	var took []string
	// arch sets an architecture key: the checkpoint's value unless the recipe sets the same.
	arch := func(key string, dst *int, v int) error {
		if rec.IsSet(key) && *dst != v {
			return rec.KeyError(key, "%d, but model.init_from %s has %d (the checkpoint's weights cannot compute another shape; drop the key)", *dst, d.Dir, v)
		}
		if *dst != v {
			took = append(took, fmt.Sprintf("%s = %d", strings.TrimPrefix(key, "model."), v))
		}
		*dst = v
		return nil
	}
	if rec.IsSet("model.encoder") && rec.Model.Encoder != c.Encoder {
		return rec.KeyError("model.encoder", "%q, but model.init_from %s holds a %q encoder", rec.Model.Encoder, d.Dir, c.Encoder)
	}
	rec.Model.Encoder = c.Encoder
	if err := arch("model.hidden", &rec.Model.Hidden, c.Hidden); err != nil {
		return err
	}
	if c.Encoder == model.EncoderTransformer {
		for _, k := range []struct {
			key string
			dst *int
			v   int
		}{{"model.layers", &rec.Model.Layers, c.Layers}, {"model.heads", &rec.Model.Heads, c.Heads},
			{"model.ffn", &rec.Model.FFN, c.FFN}, {"model.max_position", &rec.Model.MaxPosition, c.MaxPosition}} {
			if err := arch(k.key, k.dst, k.v); err != nil {
				return err
			}
		}
	}
	if rec.IsSet("model.shared_towers") && rec.Model.SharedTowers != d.Shared {
		return rec.KeyError("model.shared_towers", "%v, but model.init_from %s has shared towers = %v", rec.Model.SharedTowers, d.Dir, d.Shared)
	}
	rec.Model.SharedTowers = d.Shared
	if !rec.IsSet("model.pooling") && c.Pooling != "" && rec.Model.Pooling != c.Pooling {
		rec.Model.Pooling = c.Pooling
		took = append(took, fmt.Sprintf("pooling = %q", c.Pooling))
	}
	if !rec.IsSet("model.dropout") && rec.Model.Dropout != c.Dropout {
		rec.Model.Dropout = c.Dropout
		took = append(took, fmt.Sprintf("dropout = %g", c.Dropout))
	}
	sim := d.Similarity
	if d.Normalize { // unit vectors: dot product is cosine
		sim = "cosine"
	}
	if !rec.IsSet("loss.similarity") && sim != "" && rec.Loss.Similarity != sim {
		rec.Loss.Similarity = sim
		took = append(took, fmt.Sprintf("similarity = %q", sim))
	}
	if !rec.IsSet("tokenizer.max_length") && d.MaxLength > 0 && rec.Tokenizer.MaxLength != d.MaxLength {
		rec.Tokenizer.MaxLength = d.MaxLength
		took = append(took, fmt.Sprintf("max_length = %d", d.MaxLength))
	}
	if c.Encoder == model.EncoderTransformer && rec.Tokenizer.MaxLength > rec.Model.MaxPosition {
		return rec.KeyError("tokenizer.max_length", "%d exceeds the %d positions of model.init_from %s", rec.Tokenizer.MaxLength, rec.Model.MaxPosition, d.Dir)
	}
	if q := rec.Tokenizer.QueryMaxLength; q > rec.Tokenizer.MaxLength {
		return rec.KeyError("tokenizer.query_max_length", "%d exceeds tokenizer.max_length = %d", q, rec.Tokenizer.MaxLength)
	}
	if len(took) > 0 {
		fmt.Fprintf(out, "init_from: from %s (%s layout): %s\n", d.Dir, d.Layout, strings.Join(took, ", "))
	}
	return nil
}
