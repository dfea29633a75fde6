package reranker

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/export"
)

// model.init_from of a reranker: the directory (export.OpenCrossEncoder) fixes the architecture
// of the cross-encoder it initialises. A [model] size the recipe leaves unset is taken from it;
// one the recipe sets must agree with it.

// archKey is one [model] size: its recipe key, its field in the recipe and in the directory's
// architecture, and the name of that field in a Hugging Face config.json and in a run
// checkpoint's config.json (model.EncoderConfig).
type archKey struct {
	key      string
	recipe   func(*configs.Model) *int
	dir      func(*export.CrossEncoderDir) int
	hf, ours string
}

var archKeys = []archKey{
	{"model.hidden", func(m *configs.Model) *int { return &m.Hidden }, func(d *export.CrossEncoderDir) int { return d.Encoder.Hidden }, "hidden_size", "Encoder.Hidden"},
	{"model.layers", func(m *configs.Model) *int { return &m.Layers }, func(d *export.CrossEncoderDir) int { return d.Encoder.Layers }, "num_hidden_layers", "Encoder.Layers"},
	{"model.heads", func(m *configs.Model) *int { return &m.Heads }, func(d *export.CrossEncoderDir) int { return d.Encoder.Heads }, "num_attention_heads", "Encoder.Heads"},
	{"model.ffn", func(m *configs.Model) *int { return &m.FFN }, func(d *export.CrossEncoderDir) int { return d.Encoder.FFN }, "intermediate_size", "Encoder.FFN"},
	{"model.max_position", func(m *configs.Model) *int { return &m.MaxPosition }, func(d *export.CrossEncoderDir) int { return d.Encoder.MaxPosition }, "max_position_embeddings", "Encoder.MaxPosition"},
}

// recipeKeys says which keys the recipe sets and where: the keys its file defines
// (configs.Recipe.Lines, from Load; none for a recipe built in code) and, in initArchitecture,
// every [model] size away from its default, so that a recipe built in code that sets a size is
// held to it too.
type recipeKeys struct {
	path  string         // the recipe file, "" when unknown
	lines map[string]int // key -> line in path
}

func keysOf(rec *configs.Recipe) recipeKeys { return recipeKeys{path: rec.Path, lines: rec.Lines} }

// where returns "path:line: " for a key the file defines, "path: " for another key of a known
// file, and "" otherwise.
func (k recipeKeys) where(key string) string {
	if n, ok := k.lines[key]; ok {
		return fmt.Sprintf("%s:%d: ", k.path, n)
	}
	if k.path != "" {
		return k.path + ": "
	}
	return ""
}

// initArchitecture sets the [model] sizes of m (hidden, layers, heads, ffn, max_position) that
// the recipe does not set (neither in its file nor away from Defaults) to those of the
// model.init_from directory d, and checks that the others equal d's. All differing sizes are
// one error, each named with its recipe line, the recipe's value and the directory's. It
// returns the keys it took from d, with their values, as "model.hidden = 384".
func initArchitecture(m *configs.Model, d *export.CrossEncoderDir, keys recipeKeys) ([]string, error) {
	def := configs.Defaults().Model
	var taken, bad []string
	for _, a := range archKeys {
		v, want := a.recipe(m), a.dir(d)
		_, inFile := keys.lines[a.key]
		set := inFile || *v != *a.recipe(&def)
		switch {
		case !set:
			*v = want
			taken = append(taken, fmt.Sprintf("%s = %d", a.key, want))
		case set && *v != want:
			field := a.hf
			if d.Layout == export.LayoutRun {
				field = a.ours
			}
			bad = append(bad, fmt.Sprintf("%s%s = %d, but model.init_from has %s = %d", keys.where(a.key), a.key, *v, field, want))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("model.init_from: %s is a %s, and the recipe's [model] sizes differ from it (leave them out to take the directory's):\n  %s",
			d.Dir, describeArch(d), strings.Join(bad, "\n  "))
	}
	return taken, nil
}

// describeArch names the directory's architecture: "transformer of 6 layers, hidden 384, 12
// heads, FFN 1536, 512 positions (config.json)".
func describeArch(d *export.CrossEncoderDir) string {
	src := export.ConfigFile
	if d.Layout == export.LayoutRun {
		src = "the checkpoint's " + export.ConfigFile
	}
	e := d.Encoder
	return fmt.Sprintf("transformer of %d layers, hidden %d, %d heads, FFN %d, %d positions (%s)", e.Layers, e.Hidden, e.Heads, e.FFN, e.MaxPosition, src)
}

// refuseMatchInit refuses the term-matching prior (rerank.match_init, rerank.match_word_scale)
// on a pretrained body: it rescales the word embeddings and adds gain·I to the first layer's
// query and key projections, which would overwrite what the body learned.
func refuseMatchInit(rr *Config, d *export.CrossEncoderDir, keys recipeKeys) error {
	if !d.Body {
		return nil
	}
	switch {
	case rr.MatchInit != 0:
		return fmt.Errorf("%srerank.match_init = %g: the term-matching prior is for a randomly initialised cross-encoder and would overwrite the first layer of the pretrained body model.init_from = %s; remove rerank.match_init",
			keys.where("rerank.match_init"), rr.MatchInit, d.Dir)
	case rr.MatchWordScale != 1:
		return fmt.Errorf("%srerank.match_word_scale = %g: the term-matching prior is for a randomly initialised cross-encoder and would rescale the word embeddings of the pretrained body model.init_from = %s; remove rerank.match_word_scale",
			keys.where("rerank.match_word_scale"), rr.MatchWordScale, d.Dir)
	}
	return nil
}

// reportInit prints what model.init_from loaded into the n parameters of the model, what it
// left as the seed drew it (a body's head) and what it skipped.
func reportInit(out io.Writer, d *export.CrossEncoderDir, n int, seed int64, shapes map[string][]int) {
	if !d.Body {
		fmt.Fprintf(out, "init_from: %d parameters from %s (%s layout)\n", n, d.Dir, d.Layout)
	} else {
		what := "the encoder and BERT's pooler"
		for _, f := range d.Fresh {
			if f == "pooler.weight" {
				what = "the encoder (the directory has no pooler.dense.*)"
			}
		}
		fresh := make([]string, len(d.Fresh))
		for i, f := range d.Fresh {
			fresh[i] = fmt.Sprintf("%s %v", f, shapes[f])
		}
		fmt.Fprintf(out, "init_from: encoder body %s (%s layout): %d of %d parameters loaded, %s; initialised fresh from seed %d: %s\n",
			d.Dir, d.Layout, n-len(d.Fresh), n, what, seed, strings.Join(fresh, ", "))
	}
	if len(d.Ignored) > 0 {
		names := make([]string, len(d.Ignored))
		for i, ig := range d.Ignored {
			file, name, _ := strings.Cut(ig, ": ")
			names[i] = name + " (" + filepath.Base(file) + ")"
		}
		fmt.Fprintf(out, "init_from: skipped %d tensors that are not cross-encoder parameters: %s\n", len(names), strings.Join(names, ", "))
	}
}
