// Package colbert is a late-interaction retriever (ColBERT; Khattab & Zaharia 2020, ColBERTv2;
// Santhanam et al. 2022) over a BERT encoder: every token of a text is encoded, projected to Dim
// values by a linear layer without bias and L2-normalised, and a query scores a passage by
// MaxSim, the sum over the query's tokens of the largest inner product with the passage's
// tokens (losses.MaxSim). Texts are marked and padded as PyLate (pylate.models.ColBERT) does:
// a marker token after [CLS] ([Q] for queries, [D] for passages), queries padded with [MASK] to
// QueryLength tokens (query augmentation; the [MASK] tokens are scored, and attended to only
// with AttendExpansion), passages cut to DocumentLength tokens with the punctuation skiplist
// (Python's string.punctuation) left out of the scored tokens. Training (Task) uses the losses
// colbert_contrastive and colbert_kl_distill; search is exact (Exact) or through a PLAID-style
// compressed index (plaid.go).
package colbert

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Kind is the checkpoints' config.json kind of a ColBERT model.
const Kind = "colbert"

// ProjName is the checkpoint name of the projection weight [Dim,H] (torch.nn.Linear's [out,in]).
const ProjName = "colbert.linear.weight"

// The markers. PyLate adds "[Q] " and "[D] " to a new model's vocabulary (resizing the word
// embeddings with random rows); ColBERTv2's checkpoints, which PyLate loads as they are, use
// BERT's unused tokens. This package uses the latter: the vocabulary and the embedding matrix
// stay the pretrained ones, and the exported directory names them as query_prefix and
// document_prefix.
const (
	QueryPrefix    = "[unused0]"
	DocumentPrefix = "[unused1]"
)

// Punctuation is Python's string.punctuation, PyLate's default skiplist_words.
const Punctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

// Config is a ColBERT model's shape and text handling (the checkpoints' config.json).
type Config struct {
	Kind    string              `json:"kind"` // Kind
	Encoder model.EncoderConfig `json:"encoder"`
	// Dim is the width of a token vector after the projection (PyLate's embedding_size, 128).
	Dim int `json:"dim"`
	// QueryLength and DocumentLength are the tokens of a query (always padded to it) and the
	// most of a passage, markers included (PyLate's query_length 32, document_length 180).
	QueryLength    int `json:"query_length"`
	DocumentLength int `json:"document_length"`
	// AttendExpansion lets the encoder attend to a query's [MASK] padding (PyLate's
	// attend_to_expansion_tokens, default false).
	AttendExpansion bool `json:"attend_to_expansion_tokens"`
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if err := c.Encoder.Validate(); err != nil {
		return err
	}
	if c.Encoder.Encoder != model.EncoderTransformer {
		return fmt.Errorf("colbert: encoder %q, want %q", c.Encoder.Encoder, model.EncoderTransformer)
	}
	if c.Dim < 1 || c.Dim > 4096 {
		return fmt.Errorf("colbert: dim = %d, want 1..4096", c.Dim)
	}
	if c.QueryLength < 4 || c.QueryLength > c.Encoder.MaxPosition {
		return fmt.Errorf("colbert: query_length = %d, want 4..%d (the encoder's positions)", c.QueryLength, c.Encoder.MaxPosition)
	}
	if c.DocumentLength < 4 || c.DocumentLength > c.Encoder.MaxPosition {
		return fmt.Errorf("colbert: document_length = %d, want 4..%d (the encoder's positions)", c.DocumentLength, c.Encoder.MaxPosition)
	}
	return nil
}

// Model is a ColBERT encoder: one BERT tower (Enc, shared by queries and passages) and the
// projection Proj [Dim,H].
type Model struct {
	Cfg  Config
	Enc  *model.BiEncoder
	Proj *model.Param
}

// streamProj seeds the projection's initialisation (XORed into the model's seed).
const streamProj = 0x636f6c70726f6a // "colproj"

// New builds a model of cfg from seed: the encoder as model.NewBiEncoder draws it (shared
// towers), the projection from U(-1/sqrt(H), 1/sqrt(H)), torch.nn.Linear's default
// (kaiming_uniform with a = sqrt(5)), as PyLate's Dense is created.
func New(cfg Config, seed uint64) (*Model, error) {
	return newOf(cfg, seed, tensor.Float32)
}

// NewOf is New with parameters of dtype dt (float64 for gradient tests).
func NewOf(cfg Config, seed uint64, dt tensor.Dtype) (*Model, error) { return newOf(cfg, seed, dt) }

func newOf(cfg Config, seed uint64, dt tensor.Dtype) (*Model, error) {
	cfg.Kind = Kind
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	enc, err := model.NewBiEncoderOf(cfg.Encoder, true, seed, dt)
	if err != nil {
		return nil, err
	}
	h := cfg.Encoder.Hidden
	p := &model.Param{Name: ProjName, Value: tensor.New(tensor.WithShape(cfg.Dim, h), tensor.Of(dt))}
	r := rand.New(rand.NewPCG(seed, streamProj))
	a := 1 / math.Sqrt(float64(h))
	switch d := p.Value.Data().(type) {
	case []float32:
		for i := range d {
			d[i] = float32((2*r.Float64() - 1) * a)
		}
	case []float64:
		for i := range d {
			d[i] = (2*r.Float64() - 1) * a
		}
	}
	return &Model{Cfg: cfg, Enc: enc, Proj: p}, nil
}

// Params returns the encoder's parameters, then the projection.
func (m *Model) Params() []*model.Param { return append(m.Enc.Params(), m.Proj) }

// BuildTokens adds the model to b's graph for the batch in and returns the projected token
// vectors [B,L,Dim], not normalised (the losses normalise with Similarity = Cosine; Encoder does for
// search). With train, dropout is active.
func (m *Model) BuildTokens(b *model.Binder, in *model.Inputs, train bool) (*gorgonia.Node, error) {
	x, err := m.Enc.Query.BuildTokens(b, in, train) // [B*L,H]
	if err != nil {
		return nil, err
	}
	y, err := model.MatMul(x, b.Node(m.Proj), false, true) // [B*L,Dim]
	if err != nil {
		return nil, fmt.Errorf("colbert: projection: %w", err)
	}
	return gorgonia.Reshape(y, tensor.Shape{in.B, in.L, m.Cfg.Dim})
}

// Markers are the token ids a tokenizer gives the text handling: the two markers, [MASK] (the
// query padding) and the skiplist.
type Markers struct {
	Query, Document, Mask int
	Skip                  map[int]bool
}

// MarkersOf looks the markers, [MASK] and the punctuation skiplist up in tok (a BERT WordPiece
// vocabulary, as PyLate's convert_tokens_to_ids; a punctuation character the vocabulary lacks is
// left out).
func MarkersOf(tok *tokenize.Tokenizer) (Markers, error) {
	mk := Markers{Mask: tok.MaskID(), Skip: map[int]bool{}}
	var ok bool
	if mk.Query, ok = tok.ID(QueryPrefix); !ok {
		return mk, fmt.Errorf("colbert: the tokenizer has no %s token (the query marker)", QueryPrefix)
	}
	if mk.Document, ok = tok.ID(DocumentPrefix); !ok {
		return mk, fmt.Errorf("colbert: the tokenizer has no %s token (the document marker)", DocumentPrefix)
	}
	if mk.Mask < 0 {
		return mk, fmt.Errorf("colbert: the tokenizer has no [MASK] token (query augmentation)")
	}
	for _, c := range Punctuation {
		if id, ok := tok.ID(string(c)); ok {
			mk.Skip[id] = true
		}
	}
	return mk, nil
}

// Encoded is a batch of marked texts: Batch (ids, attention mask) of L tokens per row, and
// Score, B*L, 1 where a token is scored by MaxSim (every query token; a passage's tokens but
// padding and the skiplist).
type Encoded struct {
	tokenize.Batch
	Score []float32
}

// EncodeQueries tokenizes queries as PyLate does: [CLS] [Q] text [SEP], cut to QueryLength,
// padded with [MASK] to QueryLength; the [MASK] padding is attended to only with
// AttendExpansion and every token is scored.
func (m *Model) EncodeQueries(tok *tokenize.Tokenizer, mk Markers, texts []string) Encoded {
	e := mark(tok.EncodeBatch(texts, m.Cfg.QueryLength-1), mk.Query)
	e.Score = make([]float32, len(e.IDs))
	for i := range e.IDs {
		e.Score[i] = 1
		if e.Mask[i] == 0 {
			e.IDs[i] = mk.Mask
			if m.Cfg.AttendExpansion {
				e.Mask[i] = 1
			}
		}
	}
	return e
}

// EncodeDocuments tokenizes passages as PyLate does: [CLS] [D] text [SEP], cut to
// DocumentLength tokens and padded with [PAD] to DocumentLength; punctuation tokens are encoded
// (attended to) but not scored.
func (m *Model) EncodeDocuments(tok *tokenize.Tokenizer, mk Markers, texts []string) Encoded {
	return m.markDocuments(tok.EncodeBatch(texts, m.Cfg.DocumentLength-1), mk)
}

// markDocuments marks a batch of passages cut to L-1 tokens and sets their scored tokens.
func (m *Model) markDocuments(b tokenize.Batch, mk Markers) Encoded {
	e := mark(b, mk.Document)
	e.Score = make([]float32, len(e.IDs))
	for i, id := range e.IDs {
		if e.Mask[i] != 0 && !mk.Skip[id] {
			e.Score[i] = 1
		}
	}
	return e
}

// mark inserts the marker id after the first token of every row (PyLate's insert_prefix_token),
// attended to, segment 0: rows of L-1 tokens become rows of L.
func mark(b tokenize.Batch, marker int) Encoded {
	l := b.L + 1
	out := tokenize.Batch{B: b.B, L: l, IDs: make([]int, b.B*l), Mask: make([]float32, b.B*l), Types: make([]int, b.B*l),
		Truncated: b.Truncated, Tokens: b.Tokens, Dropped: b.Dropped}
	for r := range b.B {
		src, dst := r*b.L, r*l
		out.IDs[dst], out.Mask[dst] = b.IDs[src], b.Mask[src]
		out.IDs[dst+1], out.Mask[dst+1] = marker, 1
		copy(out.IDs[dst+2:dst+l], b.IDs[src+1:src+b.L])
		copy(out.Mask[dst+2:dst+l], b.Mask[src+1:src+b.L])
		copy(out.Types[dst+2:dst+l], b.Types[src+1:src+b.L])
	}
	return Encoded{Batch: out}
}
