package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/ragtrain/ragtrain/export"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Reencoder hands index_refresh's re-encodings to the encoding pipeline, so that a refresh can
// run on a cluster's workers while training goes on: set Options.Reencode to its Reencode.
// Each refresh copies the snapshot into Model, writes it as a model directory
// (<Config.Out>/models/step-<step>, export.WriteBiEncoder), encodes Config.Corpus with it as
// version "step-<step>" (Encode), checks that the committed shards carry the snapshot's
// parameter hash and the refresher's ids, and returns their vectors.
type Reencoder struct {
	// Config is the encoding job of every refresh (Corpus, Out, ShardRows, MaxLength and
	// Similarity, which the written model directory records, Dynamic, TitleField); its Model
	// and IndexVersion are set per refresh.
	Config EncodeConfig
	// Model is a private bi-encoder of the trained architecture; the snapshot's values are
	// copied into its passage tower (indexrefresh.Snapshot.CopyTo), so the snapshot must hold
	// every parameter of Model.Passage (the refresher snapshots that tower's Params()).
	Model     *model.BiEncoder
	Tokenizer *tokenize.Tokenizer
	Runner    string   // "" is Prism
	IDs       []string // the refresher's corpus ids, in its row order
}

// Reencode is an indexrefresh Options.Reencode: the n x dim vectors of the corpus encoded with
// snap's weights by the pipeline.
func (r *Reencoder) Reencode(ctx context.Context, snap indexrefresh.Snapshot, n, dim int) ([]float32, error) {
	v := snap.Version()
	if err := snap.CopyTo(r.Model.Passage.Params()); err != nil {
		return nil, err
	}
	label := fmt.Sprintf("step-%d", v.Step)
	dir := filepath.Join(r.Config.Out, "models", label)
	if err := os.RemoveAll(dir); err != nil { // a directory left by a failed attempt
		return nil, err
	}
	meta := export.BiEncoderMeta{Similarity: r.Config.Similarity, MaxLength: r.Config.MaxLength}
	if err := export.WriteBiEncoder(dir, r.Model, r.Tokenizer, meta); err != nil {
		return nil, err
	}
	cfg := r.Config
	cfg.Model, cfg.IndexVersion = dir, label
	res, err := Encode(ctx, cfg, r.Runner)
	if err != nil {
		return nil, err
	}
	if res.Manifest.ModelHash != v.ParamHash {
		return nil, fmt.Errorf("pipeline: refresh %s: the shards were encoded by parameters hashing to %s", v, res.Manifest.ModelHash)
	}
	ids, vecs, e, err := ReadEmbeddings(cfg.Out)
	if err != nil {
		return nil, err
	}
	if e.Dim != dim || !slices.Equal(ids, r.IDs) || len(ids) != n {
		return nil, fmt.Errorf("pipeline: refresh %s: %s holds %d rows of dim %d, the refresher %d of dim %d (or other ids)", v, cfg.Out, len(ids), e.Dim, n, dim)
	}
	return vecs, nil
}
