package export

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/ragtrain/ragtrain/model"
)

// maxListed is how many tensors of each kind a MismatchError spells out; the rest are counted.
const maxListed = 20

// sizeFields names the config.json fields a directory's sizes come from, for the errors of
// checkSizes: Hugging Face's in an export or a BERT/bow directory, the checkpoint's in a run.
type sizeFields struct{ vocab, hidden, layers, ffn, maxPos string }

var (
	hfFields  = sizeFields{"vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "max_position_embeddings"}
	runFields = sizeFields{"encoder.Vocab", "encoder.Hidden", "encoder.Layers", "encoder.FFN", "encoder.MaxPosition"}
)

// sizeSlack is how many values more than its weights file holds a directory's config may
// describe before checkSizes refuses it: a few tensors missing is Init's to report (a
// MismatchError), a model gigabytes larger than the file is refused before it is built.
const sizeSlack = 1 << 20

// checkSizes compares the model the directory's config describes (vocabulary V, hidden size H,
// layers, feed-forward width, max_position; model.ParamCount) with the values its weights file
// holds, before a model of that size is built. When the config describes more than sizeSlack
// values beyond the file's, the error names the config file, the field whose size no tensor
// bears out and that tensor: the word embeddings must be [V,H], the position embeddings
// [max_position,H], layer 0's feed-forward input [FFN,H], and the file must hold Layers blocks
// (counted by probing layer.0, layer.1, ... up to the first missing, at most as many probes as
// the file has tensors). The weights were checked against the file's size when read, so a
// model built after checkSizes is no larger than the file plus sizeSlack values.
func (d *BiEncoderDir) checkSizes() error {
	f := hfFields
	if d.Layout == LayoutRun {
		f = runFields
	}
	srcs := []*towerSource{d.query}
	if d.passage != d.query {
		srcs = append(srcs, d.passage)
	}
	c := d.Encoder
	for _, src := range srcs {
		cfgPath := filepath.Join(filepath.Dir(src.set.file), ConfigFile)
		have := 0.0
		for _, t := range src.set.byName {
			have += float64(len(t.Data))
		}
		need := model.ParamCount(c)
		if need <= have+sizeSlack {
			continue
		}
		tooLarge := fmt.Errorf("%s: its sizes describe %.0f parameters, but %s holds %.0f values", cfgPath, need, src.set.file, have)
		expect := func(field string, v int, rest string, want ...int) error {
			name := src.name(rest)
			t, ok := src.set.byName[name]
			if !ok {
				return fmt.Errorf("%s: %s = %d, but %s holds no tensor %s (shape %v)", cfgPath, field, v, src.set.file, name, want)
			}
			if !slices.Equal(t.Shape, want) {
				return fmt.Errorf("%s: %s = %d, but %s's tensor %s is %v, not %v", cfgPath, field, v, src.set.file, name, t.Shape, want)
			}
			return nil
		}
		// The word embeddings carry V and H.
		if err := expect(f.vocab, c.Vocab, "embeddings.word", c.Vocab, c.Hidden); err != nil {
			if t, ok := src.set.byName[src.name("embeddings.word")]; ok && len(t.Shape) == 2 && t.Shape[0] == c.Vocab {
				return expect(f.hidden, c.Hidden, "embeddings.word", c.Vocab, c.Hidden)
			}
			return err
		}
		if c.Encoder != model.EncoderTransformer || c.Arch == model.ArchGPT2 {
			return tooLarge
		}
		if err := expect(f.maxPos, c.MaxPosition, "embeddings.position", c.MaxPosition, c.Hidden); err != nil {
			return err
		}
		if err := expect(f.ffn, c.FFN, "layer.0.ffn.in.weight", c.FFN, c.Hidden); err != nil {
			return err
		}
		n := 0
		for n < len(src.set.order) {
			if _, ok := src.set.byName[src.name(fmt.Sprintf("layer.%d.attn.q.weight", n))]; !ok {
				break
			}
			n++
		}
		if n != c.Layers {
			return fmt.Errorf("%s: %s = %d, but %s holds %d layers", cfgPath, f.layers, c.Layers, src.set.file, n)
		}
		return tooLarge
	}
	return nil
}
