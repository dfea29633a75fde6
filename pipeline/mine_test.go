package pipeline

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/index/shard"
)

// TestMineMatchesInProcess: mining Cranfield's 225 queries in blocks of 50 against the shards
// of a committed encoding writes, for every query, the top 10 of an exact in-process search
// (index.Flat over the same vectors, the queries encoded by the same tower): the same passages
// in the same order with the same scores, bit for bit.
func TestMineMatchesInProcess(t *testing.T) {
	model := writeModel(t, "transformer", 3)
	enc := EncodeConfig{Model: model, Corpus: cranfield, Out: t.TempDir(), ShardRows: 300, TitleField: true}
	if _, err := Encode(context.Background(), enc, ""); err != nil {
		t.Fatal(err)
	}
	cfg := MineConfig{Model: model, Queries: "../datasets/cranfield/queries.jsonl", Embeddings: enc.Out,
		Out: filepath.Join(t.TempDir(), "dense.trec"), K: 10, Block: 50}
	plan, err := Mine(context.Background(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Blocks) != 5 {
		t.Fatalf("%d blocks of queries, want 5", len(plan.Blocks))
	}
	got, err := eval.ReadTREC(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}

	ids, vecs, e, err := ReadEmbeddings(enc.Out)
	if err != nil {
		t.Fatal(err)
	}
	flat, err := index.NewFlat(ids, vecs, e.Dim)
	if err != nil {
		t.Fatal(err)
	}
	q, err := data.LoadQueries(cfg.Queries)
	if err != nil {
		t.Fatal(err)
	}
	qe, err := OpenQueryEncoder(model, 0, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer qe.Close()
	qv, err := qe.Encode(q.Texts)
	if err != nil {
		t.Fatal(err)
	}
	want := flat.SearchBatch(qv, 10)
	if len(got) != q.Len() || q.Len() != 225 {
		t.Fatalf("%d queries in the run, want %d (225)", len(got), q.Len())
	}
	for i, qid := range q.IDs {
		g := got[qid]
		if len(g) != 10 {
			t.Fatalf("query %s: %d hits, want 10", qid, len(g))
		}
		for j, h := range want[i] {
			if g[j].DocID != h.DocID || math.Float64bits(g[j].Score) != math.Float64bits(h.Score) {
				t.Fatalf("query %s rank %d: %v, in process %v", qid, j+1, g[j], h)
			}
		}
	}
}

// TestPlanMineWrongModel: mining with a model whose passage tower did not encode the
// embeddings stops before any worker starts, naming both hashes.
func TestPlanMineWrongModel(t *testing.T) {
	enc := EncodeConfig{Model: writeModel(t, "bow", 1), Corpus: cranfield, Out: t.TempDir(), ShardRows: 700}
	if _, err := Encode(context.Background(), enc, ""); err != nil {
		t.Fatal(err)
	}
	_, err := PlanMine(MineConfig{Model: writeModel(t, "bow", 2), Queries: "../datasets/cranfield/queries.jsonl", Embeddings: enc.Out, Out: filepath.Join(t.TempDir(), "x.trec"), K: 5})
	if err == nil || !strings.Contains(err.Error(), "was encoded by") {
		t.Fatalf("error %v, want the hash mismatch", err)
	}
}

// TestPlanMineCorruptShard: issue 37's committed shard with one vector overwritten was mined
// from (exit 0, 17,534 of 22,500 run lines changed) while compare detected it; mine now checks
// every shard's sha256 before any worker starts and names the shard that differs.
func TestPlanMineCorruptShard(t *testing.T) {
	model := writeModel(t, "bow", 1)
	enc := EncodeConfig{Model: model, Corpus: cranfield, Out: t.TempDir(), ShardRows: 700}
	if _, err := Encode(context.Background(), enc, ""); err != nil {
		t.Fatal(err)
	}
	m, err := shard.ReadManifest(enc.Out)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(enc.Out, m.Shards[1].File)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b) - 64; i < len(b)-32; i++ { // a vector near the end, not the header
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = PlanMine(MineConfig{Model: model, Queries: "../datasets/cranfield/queries.jsonl", Embeddings: enc.Out, Out: filepath.Join(t.TempDir(), "x.trec"), K: 5})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("mining a corrupted shard: %v, want an error naming %s", err, path)
	}
}
