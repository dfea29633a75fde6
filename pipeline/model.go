package pipeline

import (
	"fmt"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/export"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// PassageEncoder is one tower of a model directory with its tokenizer, ready to encode texts
// as the retriever's evaluation does (biencoder.NewSearcher): a biencoder.Encoder cutting each text to
// MaxLength tokens, rows L2-normalised when the similarity is cosine. Hash is always the
// passage tower's (the one the corpus embeddings carry), also for a query encoder.
type PassageEncoder struct {
	Enc        *biencoder.Encoder
	Hash       string // indexrefresh.HashParams of the passage tower's parameters
	Dim        int    // H
	Similarity string // "cosine" or "dot"
	MaxLength  int
}

// OpenPassageEncoder loads the passage tower of dir, in any layout export.OpenBiEncoder reads
// (a run or checkpoint directory, an export, a Hugging Face / sentence-transformers BERT or a
// bow tower directory). maxLength and similarity, when set (> 0, non-empty), override what the
// directory says; a directory that says neither needs them. dynamic turns on dynamic padding
// (tokenizer.dynamic_padding).
func OpenPassageEncoder(dir string, maxLength int, similarity string, dynamic bool) (*PassageEncoder, error) {
	return openTower(dir, false, maxLength, similarity, dynamic)
}

// OpenQueryEncoder is OpenPassageEncoder for the query tower (the same tower when shared).
func OpenQueryEncoder(dir string, maxLength int, similarity string, dynamic bool) (*PassageEncoder, error) {
	return openTower(dir, true, maxLength, similarity, dynamic)
}

func openTower(dir string, query bool, maxLength int, similarity string, dynamic bool) (*PassageEncoder, error) {
	d, err := export.OpenBiEncoder(dir)
	if err != nil {
		return nil, err
	}
	if maxLength <= 0 {
		maxLength = d.MaxLength
	}
	if maxLength <= 0 {
		return nil, fmt.Errorf("%s: the model directory gives no maximum length; give one (-max-length)", dir)
	}
	if similarity == "" {
		similarity = d.Similarity
	}
	if similarity != "cosine" && similarity != "dot" {
		return nil, fmt.Errorf("%s: similarity %q, want \"cosine\" or \"dot\" (-similarity)", dir, similarity)
	}
	cfg := d.Encoder
	if cfg.Pooling == "" {
		return nil, fmt.Errorf("%s: the model directory does not say its pooling (no Pooling module config)", dir)
	}
	m, err := model.NewBiEncoder(cfg, d.Shared, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if err := d.Init(m); err != nil {
		return nil, err
	}
	tok, _, err := d.LoadTokenizer()
	if err != nil {
		return nil, err
	}
	hash, err := indexrefresh.HashParams(m.Passage.Params())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	tower := m.Passage
	if query {
		tower = m.Query
	}
	enc, err := biencoder.NewEncoder(tower, tok, maxLength, dynamic)
	if err != nil {
		return nil, err
	}
	return &PassageEncoder{Enc: enc, Hash: hash, Dim: tower.Dim(), Similarity: similarity, MaxLength: maxLength}, nil
}

// Encode returns the len(passages) x Dim vectors of passages, normalised for cosine.
func (p *PassageEncoder) Encode(passages []string) ([]float32, error) {
	return p.EncodeCounting(passages, nil)
}

// EncodeCounting is Encode that adds what truncation to MaxLength cut to c (when not nil).
func (p *PassageEncoder) EncodeCounting(passages []string, c *tokenize.TruncCount) ([]float32, error) {
	v, err := p.Enc.Encode(passages, c)
	if err != nil {
		return nil, err
	}
	if p.Similarity == "cosine" {
		biencoder.NormalizeRows(v, p.Dim)
	}
	return v, nil
}

// EncodeInProcess encodes the corpus of cfg in this process, all of it through one encoder,
// as the retriever's evaluation does (data.LoadCorpus, then PassageEncoder.Encode of every
// passage): the reference the pipeline's shards are compared with, bit for bit.
func EncodeInProcess(cfg EncodeConfig) ([]string, []float32, error) {
	c, err := data.LoadCorpus(cfg.Corpus)
	if err != nil {
		return nil, nil, err
	}
	enc, err := OpenPassageEncoder(cfg.Model, cfg.MaxLength, cfg.Similarity, cfg.Dynamic)
	if err != nil {
		return nil, nil, err
	}
	defer enc.Close()
	passages := make([]string, c.Len())
	for i := range passages {
		passages[i] = c.Passage(i, cfg.TitleField)
	}
	v, err := enc.Encode(passages)
	return c.IDs, v, err
}

// Close releases the encoder's graphs.
func (p *PassageEncoder) Close() error { return p.Enc.Close() }
