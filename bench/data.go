package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Seqs is a batch of N token sequences of length L, row-major, as both sides read it.
type Seqs struct {
	N, L  int
	IDs   []int `json:"ids"`
	Mask  []int `json:"mask"`            // 1 for real tokens, 0 for padding
	Types []int `json:"types,omitempty"` // segment ids; absent: all 0
}

// BiBatch is one retriever training batch: B queries, N = 2B passages (passage i < B the positive
// of query i, passage B+i its hard negative), and the B x N candidate mask (0 drops a passage
// judged relevant to the query that is not its own positive, as false_negatives = "mask").
type BiBatch struct {
	Q    Seqs  `json:"q"`
	P    Seqs  `json:"p"`
	Keep []int `json:"keep"`
}

// CrossBatch is one cross-encoder batch: Lists lists of K (query, passage) pair sequences, slot 0
// of each list its judged-relevant passage (label 1), the others label 0.
type CrossBatch struct {
	Pairs  Seqs  `json:"pairs"`
	Labels []int `json:"labels"`
}

// Data is everything both sides of the benchmark read: the shapes and the token ids, made once
// from Cranfield by Prepare and written as JSON so that the PyTorch peer gets the same inputs.
type Data struct {
	Shapes Shapes       `json:"shapes"`
	Bi     []BiBatch    `json:"bi"`     // retriever training batches, used in turn
	Encode Seqs         `json:"encode"` // passages to encode
	Cross  []CrossBatch `json:"cross"`  // cross-encoder training batches, used in turn
	Score  Seqs         `json:"score"`  // pairs to score
	Reader Seqs         `json:"reader"` // reader language-model rows (full, no padding)
	// Corpus and Queries are Cranfield's, for BM25: also written as TSV for the Java peer.
	CorpusIDs, CorpusTexts []string `json:"-"`
	QueryIDs, QueryTexts   []string `json:"-"`
}

// Files names what Prepare wrote.
type Files struct {
	Data    string // data.json
	Corpus  string // corpus.tsv: id TAB passage (title + " " + text)
	Queries string // queries.tsv: id TAB text
	SciFact string // scifact.json (PrepareSciFact), when a pretrained-shape workload runs
	SmolLM2 string // smollm2.json (PrepareSmolLM2), when a SmolLM2 workload runs
}

// Prepare builds the benchmark inputs from the BEIR collection in dir (Cranfield) and writes them
// into out. Token ids come from WordPiece vocabularies trained on the corpus as the recipes do
// (V = Shapes.Vocab for the encoders, Shapes.ReaderVocab for the reader); batches pair train
// queries with a relevant passage and a random passage, drawn from a PCG seeded with seed.
func Prepare(dir, out string, s Shapes, seed uint64) (*Data, Files, error) {
	ds, err := data.Load(dir, "train")
	if err != nil {
		return nil, Files{}, err
	}
	c := ds.Corpus
	passages := make([]string, c.Len())
	for i := range passages {
		passages[i] = c.Passage(i, true)
	}
	tok, err := tokenize.Train(passages, tokenize.TrainOptions{VocabSize: s.Vocab, MinFrequency: 2, Lowercase: true})
	if err != nil {
		return nil, Files{}, fmt.Errorf("bench: tokenizer: %w", err)
	}
	readerTok, err := tokenize.Train(passages, tokenize.TrainOptions{VocabSize: s.ReaderVocab, MinFrequency: 2, Lowercase: true})
	if err != nil {
		return nil, Files{}, fmt.Errorf("bench: reader tokenizer: %w", err)
	}
	qrels := ds.Qrels["train"]
	qids := qrels.QueryIDs()
	if len(qids) < s.BiB {
		return nil, Files{}, fmt.Errorf("bench: %s has %d train queries, want at least %d", dir, len(qids), s.BiB)
	}
	r := rand.New(rand.NewPCG(seed, 0x62656e6368)) // "bench"
	d := &Data{Shapes: s, CorpusIDs: c.IDs, CorpusTexts: passages}
	for i := range ds.Queries.Len() {
		d.QueryIDs = append(d.QueryIDs, ds.Queries.IDs[i])
		d.QueryTexts = append(d.QueryTexts, ds.Queries.Texts[i])
	}
	queryText := func(id string) string { t, _ := ds.Queries.Text(id); return t }
	positive := func(qid string) string {
		rel := qrels.Relevant(qid)
		return rel[r.IntN(len(rel))]
	}
	// Retriever batches: B consecutive train queries from a random start.
	for range s.BiBatches {
		start := r.IntN(len(qids) - s.BiB + 1)
		batchQ := qids[start : start+s.BiB]
		qs, ps := make([]string, s.BiB), make([]string, 2*s.BiB)
		pid := make([]string, 2*s.BiB)
		for i, q := range batchQ {
			qs[i] = queryText(q)
			pid[i] = positive(q)
			pid[s.BiB+i] = c.IDs[r.IntN(c.Len())]
		}
		for j, id := range pid {
			k, _ := c.Index(id)
			ps[j] = passages[k]
		}
		keep := keepMask(qrels, batchQ, pid)
		d.Bi = append(d.Bi, BiBatch{Q: seqs(tok.EncodeBatch(qs, s.L), false), P: seqs(tok.EncodeBatch(ps, s.L), false), Keep: keep})
	}
	d.Encode = seqs(tok.EncodeBatch(passages[:s.EncodeN], s.L), false)
	// Cross-encoder lists: a train query, one relevant passage, K-1 random ones.
	pairs := func(lists int) CrossBatch {
		var qs, ps []string
		var labels []int
		for range lists {
			q := qids[r.IntN(len(qids))]
			qs, ps, labels = append(qs, queryText(q)), append(ps, passages[mustIndex(c, positive(q))]), append(labels, 1)
			for range s.CrossK - 1 {
				qs, ps, labels = append(qs, queryText(q)), append(ps, passages[r.IntN(c.Len())]), append(labels, 0)
			}
		}
		return CrossBatch{Pairs: seqs(tok.EncodePairBatch(qs, ps, s.CrossL), true), Labels: labels}
	}
	for range s.CrossBatches {
		d.Cross = append(d.Cross, pairs(s.CrossLists))
	}
	d.Score = pairs(s.ScoreN / s.CrossK).Pairs
	// Reader rows: the corpus tokenized and packed into full rows of ReaderL tokens.
	var stream []int
	for _, p := range passages {
		if len(stream) >= s.ReaderB*s.ReaderL {
			break
		}
		stream = append(stream, readerTok.Encode(p)...)
		stream = append(stream, readerTok.SEPID())
	}
	rows := s.ReaderB * s.ReaderL
	if len(stream) < rows {
		return nil, Files{}, fmt.Errorf("bench: corpus too small for %d reader rows", s.ReaderB)
	}
	d.Reader = Seqs{N: s.ReaderB, L: s.ReaderL, IDs: stream[:rows], Mask: ones(rows)}

	f := Files{Data: filepath.Join(out, "data.json"), Corpus: filepath.Join(out, "corpus.tsv"), Queries: filepath.Join(out, "queries.tsv")}
	js, err := json.Marshal(d)
	if err != nil {
		return nil, Files{}, err
	}
	if err := atomicfile.WriteFile(f.Data, js); err != nil {
		return nil, Files{}, err
	}
	if err := writeTSV(f.Corpus, d.CorpusIDs, d.CorpusTexts); err != nil {
		return nil, Files{}, err
	}
	if err := writeTSV(f.Queries, d.QueryIDs, d.QueryTexts); err != nil {
		return nil, Files{}, err
	}
	return d, f, nil
}

func mustIndex(c *data.Corpus, id string) int {
	i, ok := c.Index(id)
	if !ok {
		panic(fmt.Sprintf("bench: qrels name passage %q, not in the corpus", id))
	}
	return i
}

func seqs(b tokenize.Batch, withTypes bool) Seqs {
	s := Seqs{N: b.B, L: b.L, IDs: b.IDs, Mask: make([]int, len(b.Mask))}
	for i, m := range b.Mask {
		s.Mask[i] = int(m)
	}
	if withTypes {
		s.Types = b.Types
	}
	return s
}

func ones(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// writeTSV writes one "id TAB text" line per entry; tabs and line breaks inside a text become
// spaces (the analyzers of both sides treat them alike).
func writeTSV(path string, ids, texts []string) error {
	var b strings.Builder
	clean := strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")
	for i, id := range ids {
		b.WriteString(id)
		b.WriteByte('\t')
		b.WriteString(clean.Replace(texts[i]))
		b.WriteByte('\n')
	}
	return atomicfile.WriteFile(path, []byte(b.String()))
}

// readTSV reads the lines writeTSV writes.
func readTSV(path string) (ids, texts []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		id, text, ok := strings.Cut(line, "\t")
		if !ok || id == "" {
			return nil, nil, fmt.Errorf("%s:%d: want id TAB text", path, i+1)
		}
		ids, texts = append(ids, id), append(texts, text)
	}
	return ids, texts, nil
}

// keepMask is the mask of a bi-encoder batch's in-batch negatives, row-major [len(qids),
// len(pids)]: 0 where passage j is judged relevant to query i without being its own positive
// (j == i), 1 elsewhere.
func keepMask(qrels data.Qrels, qids, pids []string) []int {
	keep := make([]int, len(qids)*len(pids))
	for i, q := range qids {
		for j, id := range pids {
			keep[i*len(pids)+j] = 1
			if j != i && qrels.IsRelevant(q, id) {
				keep[i*len(pids)+j] = 0
			}
		}
	}
	return keep
}

// LoadData reads a data.json written by Prepare.
func LoadData(path string) (*Data, error) { return readJSON[Data](path) }

// readJSON reads a JSON file that Prepare, PrepareSciFact or PrepareSmolLM2 wrote; a file that
// does not decode as T is an error naming it.
func readJSON[T any](path string) (*T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d T
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}
