package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"gorgonia.org/gorgonia"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// A rag run's parity inputs: sequences of the run's world as the reader reads them,
//
//	n × "[CLS] <ctx> passage </ctx> question cloze answer [SEP]"   (datastore entry i, test question i)
//	"[CLS] <ctx> </ctx> question cloze"                            (closed-book prompt)
//	"[CLS] doc [SEP] doc [SEP] ..."                                 (pretraining text, L tokens)
//
// each cut to the reader's L tokens and right-padded, written as
//
//	reader_ids.npy, reader_mask.npy   int64 [B, L] token ids and attention mask
//	reader_logprobs_go.npy            float32 [B, L, V] log softmax(h_t · Eᵀ): the Go reader's next-token
//	                                  log-probabilities at every position (h from the Go graph)
//	reader_next_go.npy                float32 [B, L] the training op's (model.LMLogProb) log p(ids[t+1] | ids[<=t])
//	                                  where t+1 is a real token, 0 elsewhere
//	inputs.json                       kind, run, max_length, the texts

func genRAG(r *export.Run, out string, n int) error {
	rd, _, meta, _, err := r.RAG()
	if err != nil {
		return err
	}
	tok, err := r.Tokenizer()
	if err != nil {
		return err
	}
	world := filepath.Join(r.Dir, "world")
	corpus, err := data.LoadCorpus(filepath.Join(world, "datastore", "entry", "corpus.jsonl"))
	if err != nil {
		return err
	}
	qs, err := testQuestions(filepath.Join(world, "questions.jsonl"), n)
	if err != nil {
		return err
	}
	doc, err := firstLines(filepath.Join(world, "pretrain.txt"), 30)
	if err != nil {
		return err
	}
	in := inputs{Kind: r.Kind, Run: r.Dir, Checkpoint: r.Checkpoint.Dir, MaxLength: meta.MaxLength}
	for i, q := range qs {
		in.Queries = append(in.Queries, q.Question+" "+q.Cloze)
		in.Passages = append(in.Passages, corpus.Passage(i%corpus.Len(), false))
		in.Answers = append(in.Answers, q.Answer)
	}
	in.Docs = doc
	return writeReaderOutputs(out, rd, tok, in)
}

// worldQuestion is the part of a line of the world's questions.jsonl read here.
type worldQuestion struct {
	Question string `json:"question"`
	Cloze    string `json:"cloze"`
	Answer   string `json:"answer"`
	Split    string `json:"split"`
	Gardener string `json:"gardener"`
}

// testQuestions reads the first n test questions of a world's questions.jsonl.
func testQuestions(path string, n int) ([]worldQuestion, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var qs []worldQuestion
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan() && len(qs) < n; line++ {
		var q worldQuestion
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if q.Split == "test" {
			qs = append(qs, q)
		}
	}
	return qs, sc.Err()
}

func firstLines(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(lines) < n {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// readerSequences lays out the sequences of in (see the comment at the top of the file) as
// B × L ids and mask.
func readerSequences(tok *tokenize.Tokenizer, in inputs) (ids []int, mask []float32, B int, err error) {
	L := in.MaxLength
	open, ok1 := tok.ID("<ctx>")
	closeID, ok2 := tok.ID("</ctx>")
	if !ok1 || !ok2 {
		return nil, nil, 0, fmt.Errorf("the tokenizer lacks <ctx> and </ctx>")
	}
	var seqs [][]int
	for i, q := range in.Queries {
		s := []int{tok.CLSID(), open}
		s = append(s, tok.Encode(in.Passages[i])...)
		s = append(s, closeID)
		s = append(s, tok.Encode(q)...)
		s = append(s, tok.Encode(in.Answers[i])...)
		seqs = append(seqs, append(s, tok.SEPID()))
	}
	if len(in.Queries) > 0 {
		seqs = append(seqs, append([]int{tok.CLSID(), open, closeID}, tok.Encode(in.Queries[0])...))
	}
	packed := []int{tok.CLSID()}
	for _, d := range in.Docs {
		packed = append(append(packed, tok.Encode(d)...), tok.SEPID())
	}
	seqs = append(seqs, packed)
	B = len(seqs)
	ids, mask = make([]int, B*L), make([]float32, B*L)
	for b, s := range seqs {
		for t := 0; t < min(len(s), L); t++ {
			ids[b*L+t], mask[b*L+t] = s[t], 1
		}
	}
	return ids, mask, B, nil
}

// writeReaderOutputs runs rd on the sequences of in and writes the reader files and
// inputs.json into out.
func writeReaderOutputs(out string, rd *model.Reader, tok *tokenize.Tokenizer, in inputs) error {
	ids, mask, B, err := readerSequences(tok, in)
	if err != nil {
		return err
	}
	L, H, V := in.MaxLength, rd.Cfg.Hidden, rd.Vocab()
	// The next-token targets: row b*L+t predicts ids[b*L+t+1] where that is a real token.
	pos, tgt := make([]int, B*L), make([]int, B*L)
	for i := range pos {
		pos[i] = -1
		if i%L < L-1 && mask[i+1] == 1 {
			pos[i], tgt[i] = i, ids[i+1]
		}
	}
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	inp := model.NewInputs(g, B, L, "parity")
	tg := model.NewTargets(g, B*L, "parity.next")
	x, err := rd.Tower.BuildTokens(b, inp, false)
	if err != nil {
		return err
	}
	var xv gorgonia.Value
	gorgonia.Read(x, &xv)
	lp, err := model.LMLogProb(x, b.Node(rd.Param(model.PrefixReader+".embeddings.word")), tg.Pos, tg.Tgt)
	if err != nil {
		return err
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	if err := inp.Let(ids, mask, nil); err != nil {
		return err
	}
	if err := tg.Let(pos, tgt); err != nil {
		return err
	}
	if err := vm.RunAll(); err != nil {
		return err
	}
	states := xv.Data().([]float32)
	next := append([]float32(nil), lp.Value().Data().([]float32)...)
	emb := rd.Param(model.PrefixReader + ".embeddings.word").Value.Data().([]float32)
	logp := make([]float32, B*L*V)
	z := make([]float64, V)
	for row := 0; row < B*L; row++ {
		h := states[row*H : (row+1)*H]
		mx := math.Inf(-1)
		for v := range z {
			var s float64
			for j, e := range emb[v*H : (v+1)*H] {
				s += float64(h[j]) * float64(e)
			}
			z[v], mx = s, math.Max(mx, s)
		}
		var sum float64
		for _, s := range z {
			sum += math.Exp(s - mx)
		}
		lse := mx + math.Log(sum)
		for v, s := range z {
			logp[row*V+v] = float32(s - lse)
		}
	}
	if err := writeBatch(filepath.Join(out, "reader"), ids, mask, nil, B, L); err != nil {
		return err
	}
	if err := export.WriteNPYFloat32(filepath.Join(out, "reader_logprobs_go.npy"), logp, B, L, V); err != nil {
		return err
	}
	if err := export.WriteNPYFloat32(filepath.Join(out, "reader_next_go.npy"), next, B, L); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(out, "inputs.json"), in)
}
