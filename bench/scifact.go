package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// ModelShape is the architecture of a pretrained BERT model (its config.json), built here with
// random weights: the bench times the shapes, nothing is downloaded.
type ModelShape struct {
	Name        string `json:"name"`
	Vocab       int    `json:"vocab"`
	Hidden      int    `json:"hidden"`
	Layers      int    `json:"layers"`
	Heads       int    `json:"heads"`
	FFN         int    `json:"ffn"`
	MaxPosition int    `json:"max_position"`
	Pooling     string `json:"pooling"` // of the bi-encoder: "mean" or "cls"
}

// MiniLM is sentence-transformers/all-MiniLM-L6-v2: 6 layers, H 384, 12 heads, FFN 1536,
// V 30522, mean pooling.
func MiniLM() ModelShape {
	return ModelShape{Name: "all-MiniLM-L6-v2", Vocab: 30522, Hidden: 384, Layers: 6, Heads: 12, FFN: 1536, MaxPosition: 512, Pooling: model.PoolingMean}
}

// BGESmall is BAAI/bge-small-en-v1.5: MiniLM's widths with 12 layers and [CLS] pooling.
func BGESmall() ModelShape {
	return ModelShape{Name: "bge-small-en-v1.5", Vocab: 30522, Hidden: 384, Layers: 12, Heads: 12, FFN: 1536, MaxPosition: 512, Pooling: model.PoolingCLS}
}

func (m ModelShape) config(dropout float64, pooling string) model.EncoderConfig {
	return model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: m.Vocab, Hidden: m.Hidden, Layers: m.Layers, Heads: m.Heads,
		FFN: m.FFN, MaxPosition: m.MaxPosition, Dropout: dropout, Pooling: pooling}
}

// fwd is the matrix-product work of the encoder's forward pass on n sequences of l tokens.
func (m ModelShape) fwd(n, l int) float64 { return transformerFwd(m.Layers, m.Hidden, m.FFN, n, l) }

// SciFactShapes are the sizes of the pretrained-shape workloads (minilm-*, bge-small-encode),
// on SciFact texts. The training batches are parameters because a step holds the activations
// its backward pass reads: a MiniLM retriever step of B queries + 2B passages at L 256 peaked at
// 0.9 GB with B 4 and 1.3 GB with B 8 (graphs sharing their buffers, model.ShareBuffers; before,
// 2.3 GB at B 8), so the default is what fits beside the other workers of a run on a 24 GB
// machine; the table names the size used.
type SciFactShapes struct {
	MiniLM      ModelShape `json:"minilm"`
	BGESmall    ModelShape `json:"bge_small"`
	Dropout     float64    `json:"dropout"`
	Temperature float64    `json:"temperature"`
	WD          float64    `json:"weight_decay"`
	Clip        float64    `json:"grad_clip"`
	LR          float64    `json:"lr"`

	QueryL    int `json:"query_l"`    // claims cut to this many tokens
	PassageL  int `json:"passage_l"`  // abstracts (title + text) cut to this many tokens
	BiB       int `json:"bi_b"`       // queries per retriever step, each with a positive and a BM25 hard negative
	BiBatches int `json:"bi_batches"` // distinct retriever batches, used in turn
	NegDepth  int `json:"neg_depth"`  // hard negatives are drawn from BM25's top NegDepth, judged ones left out

	EncodeN int `json:"encode_n"` // passages encoded per timed run (dynamic padding, sorted by length)
	EncodeL int `json:"encode_l"` // their maximum length

	CrossL       int `json:"cross_l"`       // [CLS] claim [SEP] abstract [SEP], cut to this length
	CrossLists   int `json:"cross_lists"`   // lists per cross-encoder step
	CrossK       int `json:"cross_k"`       // pairs per list: one judged abstract, K-1 BM25 negatives
	CrossBatches int `json:"cross_batches"` // distinct cross-encoder batches
	ScoreB       int `json:"score_b"`       // pairs per scoring batch
	ScoreN       int `json:"score_n"`       // pairs scored per timed run
}

// DefaultSciFactShapes are the sizes (issue 15): 32 queries + 32 positives + 32 hard
// negatives per retriever step, 1,024 passages per encoding run, and 2 lists of 8 pairs at L 320
// per cross-encoder step (the issue names no list count).
func DefaultSciFactShapes() SciFactShapes {
	return SciFactShapes{
		MiniLM: MiniLM(), BGESmall: BGESmall(), Dropout: 0.1, Temperature: 0.05, WD: 0.01, Clip: 1, LR: 2e-5,
		QueryL: 32, PassageL: 256, BiB: 32, BiBatches: 2, NegDepth: 30,
		EncodeN: 1024, EncodeL: 256,
		CrossL: 320, CrossLists: 2, CrossK: 8, CrossBatches: 2, ScoreB: 16, ScoreN: 256,
	}
}

// Ragged is a set of texts tokenized without padding, with the dynamic-padding plan of the
// project's encoder (biencoder.DynamicBatches) that every side runs.
type Ragged struct {
	IDs     [][]int                  `json:"ids"`   // [CLS] ... [SEP], at most EncodeL tokens
	Texts   []string                 `json:"texts"` // the passages, for encoders that tokenize themselves
	Batches []biencoder.DynamicBatch `json:"batches"`
}

// SciFactData is what every side reads for the pretrained-shape workloads (scifact.json).
type SciFactData struct {
	Shapes SciFactShapes `json:"shapes"`
	// Tokenizer says where the token ids come from; TokenizerFile is that tokenizer as
	// tokenizer.json, for the sentence-transformers peer.
	Tokenizer     string       `json:"tokenizer"`
	TokenizerFile string       `json:"tokenizer_file"`
	Bi            []BiBatch    `json:"bi"`
	Encode        Ragged       `json:"encode"`
	Cross         []CrossBatch `json:"cross"`
	Score         Seqs         `json:"score"`
}

// sciFactTokenizer is the pretrained model's own tokenizer when dir holds it (LoadDir), else a
// WordPiece vocabulary of at most 30522 tokens trained on the corpus (tokenize.Train,
// lowercased): real SciFact texts either way, the second with lengths near, not equal to, the
// pretrained tokenizer's.
func sciFactTokenizer(dir string, passages []string, vocab int) (*tokenize.Tokenizer, string, error) {
	if dir != "" {
		tok, from, err := tokenize.LoadDir(dir)
		switch {
		case err == nil:
			if tok.VocabSize() > vocab {
				return nil, "", fmt.Errorf("bench: %s: %d tokens, more than the model's V = %d", from, tok.VocabSize(), vocab)
			}
			return tok, from, nil
		case !errors.Is(err, fs.ErrNotExist) && dirExists(dir):
			return nil, "", err
		}
	}
	tok, err := tokenize.Train(passages, tokenize.TrainOptions{VocabSize: vocab, MinFrequency: 2, Lowercase: true})
	if err != nil {
		return nil, "", fmt.Errorf("bench: tokenizer: %w", err)
	}
	why := "no pretrained directory given"
	if dir != "" {
		why = dir + " not found"
	}
	return tok, fmt.Sprintf("WordPiece trained on the SciFact corpus (%d tokens; %s)", tok.VocabSize(), why), nil
}

func dirExists(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir()
}

// PrepareSciFact builds the pretrained-shape workloads' inputs from the BEIR SciFact directory
// dir, tokenized with the tokenizer of the pretrained directory (sciFactTokenizer), and writes
// scifact.json (and the tokenizer, when it is not already a tokenizer.json) into out.
// Retriever batches: BiB consecutive train claims from a random start, each with a judged
// abstract and a hard negative drawn from BM25's top NegDepth (judged ones left out), and the
// candidate mask of false_negatives = "mask". Encoding: the first EncodeN abstracts of the
// corpus. Cross-encoder lists: a random train claim, a judged abstract, K-1 BM25 negatives.
// Draws come from a PCG seeded with seed.
func PrepareSciFact(dir, pretrained, out string, s SciFactShapes, seed uint64) (*SciFactData, string, error) {
	ds, err := data.Load(dir, "train")
	if err != nil {
		return nil, "", err
	}
	c := ds.Corpus
	passages := make([]string, c.Len())
	for i := range passages {
		passages[i] = c.Passage(i, true)
	}
	tok, from, err := sciFactTokenizer(pretrained, passages, s.MiniLM.Vocab)
	if err != nil {
		return nil, "", err
	}
	d := &SciFactData{Shapes: s, Tokenizer: from}
	if strings.HasSuffix(from, tokenize.JSONFile) {
		d.TokenizerFile = from
	} else {
		d.TokenizerFile = filepath.Join(out, "scifact-"+tokenize.JSONFile)
		if err := tok.Save(d.TokenizerFile); err != nil {
			return nil, "", err
		}
	}
	if d.TokenizerFile, err = filepath.Abs(d.TokenizerFile); err != nil {
		return nil, "", err
	}
	qrels := ds.Qrels["train"]
	qids := qrels.QueryIDs()
	if len(qids) < s.BiB {
		return nil, "", fmt.Errorf("bench: %s has %d train claims, want at least %d", dir, len(qids), s.BiB)
	}
	if s.EncodeN > c.Len() {
		return nil, "", fmt.Errorf("bench: %s has %d abstracts, want at least %d", dir, c.Len(), s.EncodeN)
	}
	r := rand.New(rand.NewPCG(seed, 0x736369666163)) // "scifac"
	bm25 := index.NewBM25(c.IDs, passages, index.DefaultBM25Params())
	queryText := func(id string) string { t, _ := ds.Queries.Text(id); return t }
	positive := func(qid string) string {
		rel := qrels.Relevant(qid)
		return rel[r.IntN(len(rel))]
	}
	negatives := func(qid string, n int) []string {
		var pool []string
		for _, h := range bm25.Search(queryText(qid), s.NegDepth) {
			if !qrels.IsRelevant(qid, h.DocID) {
				pool = append(pool, h.DocID)
			}
		}
		neg := make([]string, n)
		for i := range neg {
			if len(pool) == 0 { // BM25 found too little: a random abstract
				neg[i] = c.IDs[r.IntN(c.Len())]
				continue
			}
			neg[i] = pool[r.IntN(len(pool))]
		}
		return neg
	}
	text := func(id string) string { return passages[mustIndex(c, id)] }

	for range s.BiBatches {
		start := r.IntN(len(qids) - s.BiB + 1)
		batchQ := qids[start : start+s.BiB]
		qs, pid := make([]string, s.BiB), make([]string, 2*s.BiB)
		for i, q := range batchQ {
			qs[i] = queryText(q)
			pid[i], pid[s.BiB+i] = positive(q), negatives(q, 1)[0]
		}
		ps := make([]string, len(pid))
		for j, id := range pid {
			ps[j] = text(id)
		}
		keep := keepMask(qrels, batchQ, pid)
		d.Bi = append(d.Bi, BiBatch{Q: seqs(tok.EncodeBatch(qs, s.QueryL), false), P: seqs(tok.EncodeBatch(ps, s.PassageL), false), Keep: keep})
	}

	d.Encode.Texts = passages[:s.EncodeN]
	lengths := make([]int, s.EncodeN)
	for i, p := range d.Encode.Texts {
		b := tok.EncodeBatch([]string{p}, s.EncodeL)
		for lengths[i] < b.L && b.Mask[lengths[i]] != 0 {
			lengths[i]++
		}
		d.Encode.IDs = append(d.Encode.IDs, b.IDs[:lengths[i]])
	}
	d.Encode.Batches = biencoder.DynamicBatches(lengths, s.EncodeL)

	pairs := func(lists int) CrossBatch {
		var qs, ps []string
		var labels []int
		for range lists {
			q := qids[r.IntN(len(qids))]
			qs, ps, labels = append(qs, queryText(q)), append(ps, text(positive(q))), append(labels, 1)
			for _, id := range negatives(q, s.CrossK-1) {
				qs, ps, labels = append(qs, queryText(q)), append(ps, text(id)), append(labels, 0)
			}
		}
		return CrossBatch{Pairs: seqs(tok.EncodePairBatch(qs, ps, s.CrossL), true), Labels: labels}
	}
	for range s.CrossBatches {
		d.Cross = append(d.Cross, pairs(s.CrossLists))
	}
	d.Score = pairs((s.ScoreN + s.CrossK - 1) / s.CrossK).Pairs
	d.Score = Seqs{N: s.ScoreN, L: d.Score.L, IDs: d.Score.IDs[:s.ScoreN*d.Score.L], Mask: d.Score.Mask[:s.ScoreN*d.Score.L],
		Types: d.Score.Types[:s.ScoreN*d.Score.L]}

	path := filepath.Join(out, "scifact.json")
	js, err := json.Marshal(d)
	if err != nil {
		return nil, "", err
	}
	if err := atomicfile.WriteFile(path, js); err != nil {
		return nil, "", err
	}
	return d, path, nil
}

// LoadSciFact reads a scifact.json written by PrepareSciFact.
func LoadSciFact(path string) (*SciFactData, error) { return readJSON[SciFactData](path) }

// realTokens counts the mask's ones: the tokens of a batch that are not padding.
func realTokens(s Seqs) int {
	n := 0
	for _, m := range s.Mask {
		n += m
	}
	return n
}

// size says what one timed run of workload w holds: the batch sizes, lengths and real
// (non-padding) tokens, and where the token ids come from.
func (d *SciFactData) size(w Workload) string {
	s := d.Shapes
	var what string
	switch {
	case strings.HasSuffix(w.Name, "-train") && strings.Contains(w.Name, "cross"):
		b := d.Cross[0].Pairs
		what = fmt.Sprintf("%d lists x %d pairs at L %d (%d real tokens of %d)", s.CrossLists, s.CrossK, b.L, realTokens(b), b.N*b.L)
	case strings.HasSuffix(w.Name, "-train"):
		q, p := d.Bi[0].Q, d.Bi[0].P
		what = fmt.Sprintf("%d claims (L %d, %d real tokens) + %d positives + %d BM25 hard negatives (L %d, %d real tokens of %d)",
			q.N, q.L, realTokens(q), q.N, p.N-q.N, p.L, realTokens(p), p.N*p.L)
	case strings.HasSuffix(w.Name, "-score"):
		what = fmt.Sprintf("%d pairs at L %d in batches of %d (%d real tokens of %d)", d.Score.N, d.Score.L, s.ScoreB, realTokens(d.Score), d.Score.N*d.Score.L)
	default:
		n, padded := 0, 0
		for _, b := range d.Encode.Batches {
			padded += len(b.Rows) * b.L
		}
		for _, ids := range d.Encode.IDs {
			n += len(ids)
		}
		what = fmt.Sprintf("%d abstracts up to L %d in %d length-sorted batches (%d real tokens, %d padded)", len(d.Encode.IDs), s.EncodeL, len(d.Encode.Batches), n, padded)
	}
	return what + "; token ids: " + d.Tokenizer
}
