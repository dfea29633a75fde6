package experiment

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data/garden"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Development harness (removed before commit).
func devSetup(t *testing.T) (*configs.Recipe, *garden.World, *tokenize.Tokenizer, *readerFormat, *model.Reader) {
	rec, err := configs.Load("../recipes/rag-garden.toml")
	if err != nil {
		t.Fatal(err)
	}
	w, err := garden.Generate(rec.World)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.Load("/tmp/ragruns/rag-dev-20261129-180945/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := newReaderFormat(tok, rec.Reader.MaxLength)
	rd := rec.Reader
	r, err := model.NewReader(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: rd.Hidden, Layers: rd.Layers, Heads: rd.Heads,
		FFN: rd.FFN, MaxPosition: rd.MaxLength, Dropout: rd.Dropout}, 42)
	if err != nil {
		t.Fatal(err)
	}
	return rec, w, tok, f, r
}

func saveReader(t *testing.T, r *model.Reader, path string) {
	if err := checkpoints.WriteSafetensors(path, paramTensorsOf(r.Params()), nil); err != nil {
		t.Fatal(err)
	}
}

func loadReader(t *testing.T, r *model.Reader, path string) {
	ts, _, err := checkpoints.ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		copy(r.Param(x.Name).Value.Data().([]float32), x.Data)
	}
}

// clozeEval: "[CLS] cloze" -> greedy next tokens; prints accuracy by bucket per split.
func clozeEval(t *testing.T, w *garden.World, tok *tokenize.Tokenizer, f *readerFormat, r *model.Reader, form string, ctxOf func(q *garden.Question) string) {
	rr, _ := model.NewReaderRunner(r, 64, f.L)
	defer rr.Close()
	var prompts [][]int
	for i := range w.Questions {
		q := &w.Questions[i]
		switch form {
		case "cloze":
			prompts = append(prompts, append([]int{tok.CLSID()}, tok.Encode(q.Cloze)...))
		default:
			p, _, _ := f.prompt(ctxOf(q), q.Trained, 11)
			prompts = append(prompts, p)
		}
	}
	gens, err := rr.Greedy(prompts, 10, tok.SEPID())
	if err != nil {
		t.Fatal(err)
	}
	hit := map[string]int{}
	n := map[string]int{}
	for i, g := range gens {
		q := &w.Questions[i]
		a := tok.Encode(q.Answer)
		ok := len(g.Tokens) >= len(a) && slices.Equal(g.Tokens[:len(a)], a)
		if form != "cloze" {
			st := tok.Encode(q.Answer + " .")
			ok = g.Stopped && len(g.Tokens) >= len(st) && slices.Equal(g.Tokens[len(g.Tokens)-len(st):], st)
			if !ok && q.Split == "test" && q.Bucket == ">=30" && os.Getenv("RAG_DEV_SHOW") != "" {
				fmt.Printf("%s: %q -> %q\n", form, q.Trained, tok.Decode(g.Tokens))
			}
		}
		k := q.Split + " " + q.Bucket
		n[k]++
		if ok {
			hit[k]++
		}
	}
	s := form + ":"
	for _, sp := range []string{"train", "test"} {
		s += " | " + sp
		for _, b := range garden.Buckets {
			k := sp + " " + b
			s += fmt.Sprintf(" %s=%.2f", b, float64(hit[k])/float64(max(1, n[k])))
		}
	}
	fmt.Println(s)
}

func TestDevLM(t *testing.T) {
	passes, _ := strconv.Atoi(os.Getenv("RAG_DEV_LM"))
	if passes == 0 {
		t.Skip()
	}
	rec, w, tok, f, r := devSetup(t)
	docs := make([]string, len(w.Pretrain))
	for i, d := range w.Pretrain {
		docs[i] = d.Text
	}
	rows, _ := f.packDocuments(docs)
	run := &ragRun{rec: rec, o: Options{Out: os.Stdout, Progress: os.Stderr}, dir: t.TempDir(), seed: 42, world: w, tok: tok, f: f, reader: r, metrics: map[string]float64{}}
	run.enc, _ = model.NewBiEncoder(model.EncoderConfig{Encoder: "bow", Vocab: tok.VocabSize(), Hidden: 8}, false, 1)
	rec.Reader.PretrainPasses = passes
	if err := run.pretrainReader(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	saveReader(t, r, "/tmp/lm48.safetensors")
	clozeEval(t, w, tok, f, r, "cloze", nil)
}

func TestDevFT(t *testing.T) {
	src := os.Getenv("RAG_DEV_FT")
	if src == "" {
		t.Skip()
	}
	rec, w, tok, f, r := devSetup(t)
	loadReader(t, r, src)
	if v := os.Getenv("RAG_DEV_STEPS"); v != "" {
		rec.Reader.FinetuneSteps, _ = strconv.Atoi(v)
	}
	if v := os.Getenv("RAG_DEV_CB"); v != "" {
		rec.Reader.ClosedBookFraction, _ = strconv.ParseFloat(v, 64)
	}
	if v := os.Getenv("RAG_DEV_CF"); v != "" {
		rec.Reader.CounterfactualFraction, _ = strconv.ParseFloat(v, 64)
	}
	if v := os.Getenv("RAG_DEV_LR"); v != "" {
		rec.Reader.FinetuneLR, _ = strconv.ParseFloat(v, 64)
	}
	docs := make([]string, len(w.Pretrain))
	for i, d := range w.Pretrain {
		docs[i] = d.Text
	}
	rows, _ := f.packDocuments(docs)
	chunks, _ := w.Chunks("entry")
	rel := w.Relevant(chunks)
	byID := map[string]string{}
	for _, c := range chunks {
		byID[c.ID] = c.Text
	}
	gold := make([]string, len(w.Questions))
	var trainQ []int
	for i, rr := range rel {
		if len(rr) > 0 {
			gold[i] = byID[rr[0]]
		}
		if w.Questions[i].Split == "train" && (os.Getenv("RAG_DEV_ALL") != "" || (w.Questions[i].Gardener/4)%2 == 0) {
			trainQ = append(trainQ, i)
		}
	}
	run := &ragRun{rec: rec, o: Options{Out: os.Stdout, Progress: os.Stderr}, dir: t.TempDir(), seed: 42, world: w, tok: tok, f: f, reader: r, metrics: map[string]float64{}}
	run.enc, _ = model.NewBiEncoder(model.EncoderConfig{Encoder: "bow", Vocab: tok.VocabSize(), Hidden: 8}, false, 1)
	if err := run.finetuneReader(context.Background(), rows, trainQ, gold); err != nil {
		t.Fatal(err)
	}
	saveReader(t, r, "/tmp/ft"+os.Getenv("RAG_DEV_TAG")+".safetensors")
	clozeEval(t, w, tok, f, r, "cloze", nil)
	clozeEval(t, w, tok, f, r, "closed", func(q *garden.Question) string { return "" })
	gi := map[*garden.Question]string{}
	for i := range w.Questions {
		gi[&w.Questions[i]] = gold[i]
	}
	clozeEval(t, w, tok, f, r, "gold", func(q *garden.Question) string { return gi[q] })
}

func TestDevFail(t *testing.T) {
	src := os.Getenv("RAG_DEV_FAIL")
	if src == "" {
		t.Skip()
	}
	_, w, tok, f, r := devSetup(t)
	loadReader(t, r, src)
	chunks, _ := w.Chunks("entry")
	rel := w.Relevant(chunks)
	byID := map[string]string{}
	for _, c := range chunks {
		byID[c.ID] = c.Text
	}
	rr, _ := model.NewReaderRunner(r, 64, f.L)
	var prompts [][]int
	var qs []*garden.Question
	for i := range w.Questions {
		q := &w.Questions[i]
		if q.Split != "test" || len(rel[i]) == 0 {
			continue
		}
		p, _, _ := f.prompt(byID[rel[i][0]], q.Trained, 5)
		prompts = append(prompts, p)
		qs = append(qs, q)
	}
	gens, _ := rr.Greedy(prompts, 3, tok.SEPID())
	byRel := map[garden.Relation][2]int{}
	shown := 0
	for i, g := range gens {
		ok := g.Stopped && slices.Equal(g.Tokens, tok.Encode(qs[i].Answer))
		c := byRel[qs[i].Relation]
		c[1]++
		if ok {
			c[0]++
		} else if shown < 25 {
			shown++
			fmt.Printf("%q -> %q (want %s)\n", tok.Decode(prompts[i]), tok.Decode(g.Tokens), qs[i].Answer)
		}
		byRel[qs[i].Relation] = c
	}
	fmt.Println(byRel)
}
