package dense

import (
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// EncoderConfig is the encoder configuration of the recipe's [model] for a vocabulary of vocab
// tokens.
func EncoderConfig(rec *configs.Recipe, vocab int) model.EncoderConfig {
	return model.EncoderConfig{
		Encoder: rec.Model.Encoder, Vocab: vocab, Hidden: rec.Model.Hidden, Layers: rec.Model.Layers,
		Heads: rec.Model.Heads, FFN: rec.Model.FFN, MaxPosition: rec.Model.MaxPosition,
		Dropout: rec.Model.Dropout, Pooling: rec.Model.Pooling,
	}
}

// Dropout streams per phase (XORed into the seed) so the phases draw independent masks.
const (
	StreamPretrain = 0x70726574 // "pret"
	StreamTrain    = 0x74726169 // "trai"
)

// Searcher ranks a corpus for queries with a bi-encoder: the passages are encoded once
// into an exact inner-product index (index.Flat); with cosine similarity both sides are
// L2-normalised.
type Searcher struct {
	m      *model.BiEncoder
	tok    *tokenize.Tokenizer
	L      int
	cosine bool
	flat   *index.Flat
	// pCut counts what truncation to L cut of the corpus, qCut of the queries searched.
	PassageCut, QueryCut experiment.TruncCount
}

// NewSearcher encodes passages (ids their ids) to L tokens with the passage tower of m into a
// Searcher.
func NewSearcher(m *model.BiEncoder, tok *tokenize.Tokenizer, L int, cosine bool, ids, passages []string) (*Searcher, error) {
	var pCut experiment.TruncCount
	pv, err := EncodeTexts(m.Passage, tok, passages, L, &pCut)
	if err != nil {
		return nil, err
	}
	if cosine {
		NormalizeRows(pv, m.Passage.Dim())
	}
	flat, err := index.NewFlat(ids, pv, m.Passage.Dim())
	if err != nil {
		return nil, err
	}
	return &Searcher{m: m, tok: tok, L: L, cosine: cosine, flat: flat, PassageCut: pCut}, nil
}

// Search returns the depth best passages of each query text.
func (d *Searcher) Search(texts []string, depth int) ([][]index.Hit, error) {
	qv, err := EncodeTexts(d.m.Query, d.tok, texts, d.L, &d.QueryCut)
	if err != nil {
		return nil, err
	}
	if d.cosine {
		NormalizeRows(qv, d.m.Query.Dim())
	}
	return d.flat.SearchBatch(qv, depth), nil
}

// NormalizeRows is index.NormalizeRows (cosine similarity as inner product).
var NormalizeRows = index.NormalizeRows
