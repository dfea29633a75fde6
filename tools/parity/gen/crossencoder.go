package main

import (
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// A cross-encoder's parity inputs: n (query, passage) pairs of the run's data set (query i with
// passage i, and query i with passage i+1) plus three edge cases (an empty query, a passage far
// longer than max_length, characters outside the vocabulary), written as
//
//	pair_ids.npy, pair_mask.npy, pair_types.npy   int64 [B, L] "[CLS] query [SEP] passage [SEP]", types 0 | 1
//	pair_go.npy                                   float32 [B] the Go scores (logits)
//	inputs.json                                   kind, run, max_length, the queries and passages

func genCrossEncoder(r *export.Run, out string, n int) error {
	m, meta, err := r.CrossEncoder()
	if err != nil {
		return err
	}
	tok, queries, corpus, err := runData(r)
	if err != nil {
		return err
	}
	in := inputs{Kind: r.Kind, Run: r.Dir, Checkpoint: r.Checkpoint.Dir, MaxLength: meta.MaxLength}
	np := min(n, queries.Len(), corpus.Len())
	for i := 0; i < np; i++ {
		q, _ := queries.Text(queries.IDs[i])
		for _, j := range []int{i, (i + 1) % corpus.Len()} {
			in.Queries = append(in.Queries, q)
			in.Passages = append(in.Passages, corpus.Passage(j, r.Recipe.Data.TitleField))
		}
	}
	p0 := corpus.Passage(0, r.Recipe.Data.TitleField)
	in.Queries = append(in.Queries, "", "supersonic flow", "ÆØÅ ☃ 漢字 ∮ E⋅da = Q")
	in.Passages = append(in.Passages, p0, strings.Repeat("supersonic boundary layer transition ", 40), p0)
	return writeCrossEncoderOutputs(out, m, tok, in)
}

// writeCrossEncoderOutputs scores the pairs of in with m and writes the pair files and
// inputs.json into out.
func writeCrossEncoderOutputs(out string, m *model.CrossEncoder, tok *tokenize.Tokenizer, in inputs) error {
	L := in.MaxLength
	b := tok.EncodePairBatch(in.Queries, in.Passages, L)
	B := len(in.Queries)
	runner, err := model.NewScoreRunner(m, B, L)
	if err != nil {
		return err
	}
	defer runner.Close()
	scores, err := runner.Score(b.IDs, b.Mask, b.Types, B)
	if err != nil {
		return err
	}
	if err := writeBatch(filepath.Join(out, "pair"), b.IDs, b.Mask, b.Types, B, L); err != nil {
		return err
	}
	if err := export.WriteNPYFloat32(filepath.Join(out, "pair_go.npy"), scores, B); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(out, "inputs.json"), in)
}

// writeBatch writes prefix_ids.npy, prefix_mask.npy and prefix_types.npy (int64 [B, L]; types
// nil: all 0).
func writeBatch(prefix string, ids []int, mask []float32, types []int, B, L int) error {
	i64, m64, t64 := make([]int64, B*L), make([]int64, B*L), make([]int64, B*L)
	for i := range i64 {
		i64[i], m64[i] = int64(ids[i]), int64(mask[i])
		if types != nil {
			t64[i] = int64(types[i])
		}
	}
	if err := export.WriteNPYInt64(prefix+"_ids.npy", i64, B, L); err != nil {
		return err
	}
	if err := export.WriteNPYInt64(prefix+"_mask.npy", m64, B, L); err != nil {
		return err
	}
	return export.WriteNPYInt64(prefix+"_types.npy", t64, B, L)
}
