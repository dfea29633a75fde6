package main

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/pipeline"
	"github.com/ragtrain/ragtrain/tokenize"
)

func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	if !testing.Verbose() {
		slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	os.Exit(m.Run())
}

// TestEncodeThenCompare: `pipeline encode` on Prism writes Cranfield's 1400 passages in 3 shards
// and `pipeline compare -out` finds them bit-identical to the in-process encoding with the
// settings they record (exit 0), `pipeline mine` writes the top 3 of each of the 225 queries,
// a compare against another corpus file is refused (exit 1, naming the checksum); after
// one value of a shard is changed (and its checksums re-recorded, so that only the bits
// differ) compare exits 1 naming the row.
func TestEncodeThenCompare(t *testing.T) {
	tok, err := tokenize.Load("../../../testdata/tokenizers/bert-base-uncased/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.NewBiEncoder(model.EncoderConfig{Encoder: "bow", Vocab: tok.VocabSize(), Hidden: 16, Pooling: "mean"}, true, 7)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bow")
	if err := export.WriteBiEncoder(dir, m, tok, export.BiEncoderMeta{Similarity: "dot", MaxLength: 32}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "emb")
	args := []string{"-model", dir, "-corpus", "../../../datasets/cranfield/corpus.jsonl", "-out", out, "-shard-rows", "600"}
	var stdout, stderr bytes.Buffer
	if code := mainArgs(append([]string{"encode"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("encode: exit %d: %s", code, stderr.String())
	}
	if want := "encode: 1400 passages (2 empty) x 16 float32 in 3 shards of 600: 1400 passages encoded, 0 shards reused;"; !strings.HasPrefix(stdout.String(), want) {
		t.Fatalf("encode printed %q, want %q...", stdout.String(), want)
	}
	stdout.Reset()
	if code := mainArgs([]string{"compare", "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("compare: exit %d: %s", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "compare: 1400 rows x 16 of "+out) {
		t.Fatalf("compare printed %q", stdout.String())
	}
	stderr.Reset()
	if code := mainArgs([]string{"compare", "-out", out, "-corpus", "../../../datasets/cisi/corpus.jsonl"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "was encoded from") {
		t.Fatalf("compare against CISI's corpus: exit %d, %q", code, stderr.String())
	}
	stdout.Reset()
	run := filepath.Join(t.TempDir(), "dense.trec")
	margs := []string{"mine", "-model", dir, "-queries", "../../../datasets/cranfield/queries.jsonl", "-embeddings", out, "-out", run, "-k", "3"}
	if code := mainArgs(margs, &stdout, &stderr); code != 0 {
		t.Fatalf("mine: exit %d: %s", code, stderr.String())
	}
	if r, err := eval.ReadTREC(run); err != nil || len(r) != 225 || len(r["1"]) != 3 {
		t.Fatalf("mine wrote %d queries (query 1: %d hits), err %v; want 225 of 3", len(r), len(r["1"]), err)
	}

	// Change row 601 (shard 1, row 1) and commit again, so that only the bits differ.
	man, e, err := pipeline.ReadEncoding(out)
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := man.Meta()
	r, err := shard.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var v []float32
	err = r.ForEach(func(k int, sids []string, vecs []float32) error {
		if k == 1 {
			ids, v = sids, slices.Clone(vecs)
		}
		return nil
	})
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	v[e.Dim] += 1
	if _, err := shard.WriteShard(out, meta, 1, ids, v); err != nil {
		t.Fatal(err)
	}
	if _, err := shard.CommitManifest(out, meta, len(man.Shards)); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := mainArgs([]string{"compare", "-out", out, "-model", dir}, &stdout, &stderr); code != 1 {
		t.Fatalf("compare of a changed shard: exit %d, want 1", code)
	}
	if want := "1 of 1400 rows differ from the in-process encoding (first: row 601"; !strings.Contains(stderr.String(), want) {
		t.Fatalf("compare printed %q, want %q", stderr.String(), want)
	}
}

// TestUsage: no subcommand or an unknown one exits 2 with the usage; help exits 0.
func TestUsage(t *testing.T) {
	for args, want := range map[string]int{"": 2, "bogus": 2, "help": 0, "encode -h": 0} {
		var stdout, stderr bytes.Buffer
		if code := mainArgs(strings.Fields(args), &stdout, &stderr); code != want {
			t.Errorf("pipeline %s: exit %d, want %d", args, code, want)
		}
		if !strings.Contains(stdout.String()+stderr.String(), "pipeline encode -model DIR") {
			t.Errorf("pipeline %s: no usage printed", args)
		}
	}
}
