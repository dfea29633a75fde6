package export

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
)

// TestRunKindCheckedFirst: Run.Splade of a ColBERT checkpoint and Run.ColBERT of a SPLADE one
// name the kinds (config.json's "kind"), not a strict-decoding error on the other kind's
// fields ("json: unknown field \"dim\"" once, from `train search` with meta.run a ColBERT run).
func TestRunKindCheckedFirst(t *testing.T) {
	colbertRun := &Run{Dir: "c", Kind: "colbert", Checkpoint: &checkpoints.Checkpoint{Dir: "c/checkpoint-train-6",
		Config: json.RawMessage(`{"kind": "colbert", "dim": 8}`)}}
	if _, _, err := colbertRun.Splade(); err == nil || !strings.Contains(err.Error(), `kind "colbert", want "splade"`) {
		t.Errorf("Splade of a colbert run: %v", err)
	}
	spladeRun := &Run{Dir: "s", Kind: KindSplade, Checkpoint: &checkpoints.Checkpoint{Dir: "s/checkpoint-train-8",
		Config: json.RawMessage(`{"kind": "splade", "decoder_bias_init": -0.2}`)}}
	if _, err := spladeRun.ColBERT(); err == nil || !strings.Contains(err.Error(), `kind "splade", want "colbert"`) {
		t.Errorf("ColBERT of a splade run: %v", err)
	}
}
