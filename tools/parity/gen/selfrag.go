package main

import (
	"fmt"
	"path/filepath"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/tokenize"
)

// A selfrag run's parity inputs: the reflective reader's sequences (experiment/selfrag/selfrag_data.go),
// so that reflection tokens are both read and predicted, for each of the first n test questions
// whose gardener has a datastore entry:
//
//	"[CLS] <ctx> entry </ctx> question [Relevant] cloze answer [Fully supported] [SEP]"   ([No support] when i%3 = 2)
//	"[CLS] <ctx> another gardener's entry </ctx> question [Irrelevant] [SEP]"
//	"[CLS] <ctx> </ctx> question [Retrieve] cloze answer [SEP]"   ([No Retrieve] for odd i)
//
// then the closed-book prompt and the packed pretraining row of genRAG, written as genRAG writes
// them (reader_*.npy, inputs.json; L = reader.max_length, V the grown vocabulary).
func genSelfRAG(r *export.Run, out string, n int) error {
	rd, tok, meta, refl, _, err := r.SelfRAG()
	if err != nil {
		return err
	}
	if refl == nil {
		return fmt.Errorf("%s: the checkpoint's tokenizer has no reflection tokens (a checkpoint of the plain phase); name the reflective one", r.Checkpoint.Dir)
	}
	world := filepath.Join(r.Dir, "world")
	corpus, err := data.LoadCorpus(filepath.Join(world, "datastore", "entry", "corpus.jsonl"))
	if err != nil {
		return err
	}
	entry := map[string]string{}
	for i, id := range corpus.IDs {
		entry[id] = corpus.Passage(i, false)
	}
	all, err := testQuestions(filepath.Join(world, "questions.jsonl"), 4*n)
	if err != nil {
		return err
	}
	in := inputs{Kind: r.Kind, Run: r.Dir, Checkpoint: r.Checkpoint.Dir, MaxLength: meta.MaxLength}
	add := func(passage, question, target string) {
		in.Passages = append(in.Passages, passage)
		in.Queries = append(in.Queries, question)
		in.Answers = append(in.Answers, target)
	}
	var used int
	for _, q := range all {
		own, ok := entry[q.Gardener]
		if !ok || used == n {
			continue
		}
		other := corpus.Passage((used*7+1)%corpus.Len(), false)
		if other == own {
			other = corpus.Passage((used*7+2)%corpus.Len(), false)
		}
		closed := tokenize.RetrieveToken
		if used%2 == 1 {
			closed = tokenize.NoRetrieveToken
		}
		support := tokenize.FullySupportedToken
		if used%3 == 2 {
			support = tokenize.NoSupportToken
		}
		add(own, q.Question, tokenize.RelevantToken+" "+q.Cloze+" "+q.Answer+" "+support)
		add(other, q.Question, tokenize.IrrelevantToken)
		add("", q.Question, closed+" "+q.Cloze+" "+q.Answer)
		used++
	}
	if used == 0 {
		return fmt.Errorf("%s: no test question whose gardener has a datastore entry", world)
	}
	in.Docs, err = firstLines(filepath.Join(world, "pretrain.txt"), 30)
	if err != nil {
		return err
	}
	return writeReaderOutputs(out, rd, tok, in)
}
