package pipeline

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/index"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// TestReencoderServesPipelineVectors: a sync Refresher whose Reencode is the pipeline's serves,
// at step 0 and after a refresh at step 5 (the tower's weights changed in between), exactly the
// hits of an in-process encoding of Cranfield with that step's weights (the same passages and
// score bits), labelled with the hash of those weights.
func TestReencoderServesPipelineVectors(t *testing.T) {
	tok, err := tokenize.Load("../testdata/tokenizers/bert-base-uncased/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.EncoderConfig{Encoder: "bow", Vocab: tok.VocabSize(), Hidden: 16, Pooling: "mean"}
	trained, err := model.NewBiEncoder(cfg, true, 5) // the model training updates
	if err != nil {
		t.Fatal(err)
	}
	private, err := model.NewBiEncoder(cfg, true, 6) // the Reencoder's copy
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := data.LoadCorpus(cranfield)
	if err != nil {
		t.Fatal(err)
	}
	passages := make([]string, corpus.Len())
	for i := range passages {
		passages[i] = corpus.Passage(i, true)
	}
	re := &Reencoder{
		Config: EncodeConfig{Corpus: cranfield, Out: filepath.Join(t.TempDir(), "emb"), ShardRows: 500, MaxLength: 32, Similarity: "cosine", TitleField: true},
		Model:  private, Tokenizer: tok, IDs: corpus.IDs,
	}
	params := trained.Passage.Params()
	ctx := context.Background()
	r, err := indexrefresh.NewEncoded(ctx, corpus.IDs, 16, params, 0, indexrefresh.Options{Mode: indexrefresh.ModeSync, Every: 5, Reencode: re.Reencode})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	queries := passages[:20] // passages as queries: each finds itself and its neighbours
	check := func(step int) {
		t.Helper()
		enc, err := biencoder.NewEncoder(trained.Passage, tok, 32, false)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		pv, err := enc.Encode(passages, nil)
		if err != nil {
			t.Fatal(err)
		}
		biencoder.NormalizeRows(pv, 16)
		flat, err := index.NewFlat(corpus.IDs, pv, 16)
		if err != nil {
			t.Fatal(err)
		}
		qv, err := enc.Encode(queries, nil)
		if err != nil {
			t.Fatal(err)
		}
		biencoder.NormalizeRows(qv, 16)
		want := flat.SearchBatch(qv, 10)
		got, v := r.SearchBatch(qv, 10)
		hash, _ := indexrefresh.HashParams(params)
		if v.Step != step || v.ParamHash != hash {
			t.Fatalf("serving %v, want step %d hash %s", v, step, hash)
		}
		for i := range want {
			for j := range want[i] {
				if got[i][j].DocID != want[i][j].DocID || math.Float64bits(got[i][j].Score) != math.Float64bits(want[i][j].Score) {
					t.Fatalf("step %d, query %d, rank %d: %v, in process %v", step, i, j+1, got[i][j], want[i][j])
				}
			}
		}
	}
	check(0)
	for _, p := range params { // "training"
		v := p.Value.Data().([]float32)
		for i := range v {
			v[i] += 0.01 * float32(i%7)
		}
	}
	if swapped, err := r.MaybeRefresh(ctx, 5, params); err != nil || !swapped {
		t.Fatalf("refresh at step 5: swapped %v, error %v", swapped, err)
	}
	check(5)
}
