package export

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/model"
)

// carriedTensors returns the tensors of the run's model.init_from directory that the toolkit
// does not train (BiEncoderDir.Ignored: BertModel's pooler, pre-training heads, the position_ids
// buffer), unchanged (dtype, shape, bytes), under their BertModel names (a "bert." prefix
// removed), so that the export holds every tensor the imported checkpoint held. None when the
// run has no recipe or no init_from, or init_from is not a Hugging Face BERT directory (an
// export or a run holds trained tensors only). An init_from directory that is gone or no longer
// has the run's sizes is reported to log and carries nothing.
func (r *Run) carriedTensors(cfg model.EncoderConfig, log io.Writer) []checkpoints.RawTensor {
	if r.Recipe == nil {
		return nil
	}
	return CarriedTensors(r.Recipe.Model.InitFrom, cfg, log)
}

// CarriedTensors returns the tensors of the BERT directory dir (a model's init_from) that the
// toolkit does not train, as Run.carriedTensors does for a run's model.init_from: none when dir
// is "", cfg is not a transformer, or dir is not a Hugging Face BERT directory of cfg's sizes
// (then said to log). Writers of a model built from dir outside a run (tools/interop) pass them
// on, so that the export holds every tensor dir held (BertModel's pooler).
func CarriedTensors(dir string, cfg model.EncoderConfig, log io.Writer) []checkpoints.RawTensor {
	if dir == "" || cfg.Encoder != model.EncoderTransformer {
		return nil
	}
	d, err := OpenBiEncoder(dir)
	if err != nil {
		fmt.Fprintf(log, "export: warning: model.init_from %s: %v; its tensors that training does not touch (a pooler) are not carried\n", dir, err)
		return nil
	}
	if d.Layout != LayoutHuggingFace || len(d.Ignored) == 0 {
		return nil
	}
	e := d.Encoder
	if e.Vocab != cfg.Vocab || e.Hidden != cfg.Hidden || e.Layers != cfg.Layers || e.FFN != cfg.FFN || e.MaxPosition != cfg.MaxPosition {
		fmt.Fprintf(log, "export: warning: model.init_from %s no longer has the run's sizes; its untrained tensors are not carried\n", dir)
		return nil
	}
	path, raw, err := readRawWeights(d.tokDir)
	if err != nil {
		fmt.Fprintf(log, "export: warning: %v; untrained tensors not carried\n", err)
		return nil
	}
	var out []checkpoints.RawTensor
	var names []string
	for _, t := range raw {
		if !slices.Contains(d.Ignored, path+": "+t.Name) {
			continue
		}
		if strings.HasPrefix(t.Name, "bert.") && !strings.HasPrefix(t.Name, "bert.cls.") {
			t.Name = strings.TrimPrefix(t.Name, "bert.")
		}
		out = append(out, t)
		names = append(names, t.Name)
	}
	fmt.Fprintf(log, "export: carried %d tensors of %s that training does not touch, unchanged: %s\n", len(out), path, strings.Join(names, ", "))
	return out
}
