package biencoder

import (
	"io"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/tokenize/tokstore"
)

// TestEncodeStore streams 300 Cranfield passages into a token store, encodes it into shards of
// 128 passages and checks, against Encode of the texts: the vectors (normalised) bit for bit
// with fixed padding, the truncation counts, and the sharded search's hits equal Flat's.
func TestEncodeStore(t *testing.T) {
	tok := bertTokenizer(t)
	store, ids, texts, m := cranfieldStore(t, tok, 300)
	enc, err := NewEncoder(m.Passage, tok, 128, false)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var cText, cStore tokenize.TruncCount
	want, err := enc.Encode(texts, &cText)
	if err != nil {
		t.Fatal(err)
	}
	NormalizeRows(want, 32)
	dir := t.TempDir()
	man, err := EncodeStore(enc, store, dir, shard.Meta{ModelHash: "test", Version: "1", Dim: 32, DType: shard.Float32}, 128, true, &cStore)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Shards) != 3 || man.Count != 300 || cStore != cText {
		t.Fatalf("%d shards, %d passages, truncation %v (from texts %v)", len(man.Shards), man.Count, cStore, cText)
	}
	sr, err := shard.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	var gotIDs []string
	var got []float32
	err = sr.ForEach(func(_ int, ids []string, v []float32) error {
		gotIDs, got = append(gotIDs, ids...), append(got, v...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gotIDs, ids) || !slices.EqualFunc(got, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
		t.Fatal("vectors from the store's shards differ from Encode of the texts")
	}
	flat, err := index.NewFlat(ids, want, 32)
	if err != nil {
		t.Fatal(err)
	}
	qs := want[:20*32]
	hits, err := sr.SearchBatch(qs, 10)
	if err != nil {
		t.Fatal(err)
	}
	for b, h := range flat.SearchBatch(qs, 10) {
		if !slices.Equal(hits[b], h) {
			t.Fatalf("query %d: sharded hits differ from Flat's", b)
		}
	}
}

// cranfieldStore streams the first n Cranfield passages (title and text) into a token store in
// a temporary directory, and returns it open with the passages' ids and texts, and the random
// 1-layer Transformer bi-encoder (H 32, seed 5) the shard tests encode them with.
func cranfieldStore(t *testing.T, tok *tokenize.Tokenizer, n int) (*tokstore.Store, []string, []string, *model.BiEncoder) {
	t.Helper()
	cr, err := data.OpenCorpus("../datasets/cranfield/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	storePath := filepath.Join(t.TempDir(), "passages.tok")
	w, err := tokstore.Create(storePath, tok.VocabSize())
	if err != nil {
		t.Fatal(err)
	}
	var ids, texts []string
	for len(ids) < n {
		d, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(d.ID, tok.Encode(d.Passage(true))); err != nil {
			t.Fatal(err)
		}
		ids, texts = append(ids, d.ID), append(texts, d.Passage(true))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := tokstore.Open(storePath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 32, Layers: 1,
		Heads: 4, FFN: 64, MaxPosition: 128}
	m, err := model.NewBiEncoder(cfg, true, 5)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 0.3, 5)
	return store, ids, texts, m
}
