package tokenize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/internal/jsonerr"
)

// The tokenizer.json layout, as written by Hugging Face tokenizers 0.13+.
// Only the parts a BERT WordPiece tokenizer uses are decoded.
type fileJSON struct {
	Version       string           `json:"version"`
	Truncation    json.RawMessage  `json:"truncation"`
	Padding       *paddingJSON     `json:"padding"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    *normalizerJSON  `json:"normalizer"`
	PreTokenizer  *typedJSON       `json:"pre_tokenizer"`
	PostProcessor *postJSON        `json:"post_processor"`
	Decoder       *decoderJSON     `json:"decoder"`
	Model         *modelJSON       `json:"model"`
}

type typedJSON struct {
	Type string `json:"type"`
}

type paddingJSON struct {
	PadToken string `json:"pad_token"`
	PadID    *int   `json:"pad_id"`
}

// savePadding is the padding section Save writes when the pad token is not [PAD]: Hugging Face
// tokenizers' PaddingParams with its defaults (pad to the longest row, on the right).
type savePadding struct {
	Strategy        string `json:"strategy"`
	Direction       string `json:"direction"`
	PadToMultipleOf *int   `json:"pad_to_multiple_of"`
	PadID           int    `json:"pad_id"`
	PadTypeID       int    `json:"pad_type_id"`
	PadToken        string `json:"pad_token"`
}

type addedTokenJSON struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type normalizerJSON struct {
	Type         string `json:"type"`
	CleanText    *bool  `json:"clean_text"`
	ChineseChars *bool  `json:"handle_chinese_chars"`
	StripAccents *bool  `json:"strip_accents"`
	Lowercase    *bool  `json:"lowercase"`
}

type decoderJSON struct {
	Type    string `json:"type"`
	Prefix  string `json:"prefix"`
	Cleanup *bool  `json:"cleanup"`
}

type modelJSON struct {
	Type          string         `json:"type"`
	UnkToken      string         `json:"unk_token"`
	Prefix        *string        `json:"continuing_subword_prefix"`
	MaxInputChars *int           `json:"max_input_chars_per_word"`
	Vocab         map[string]int `json:"vocab"`
}

type pieceJSON struct {
	SpecialToken *pieceRef `json:"SpecialToken,omitempty"`
	Sequence     *pieceRef `json:"Sequence,omitempty"`
}

type pieceRef struct {
	ID     string `json:"id"`
	TypeID int    `json:"type_id"`
}

type specialJSON struct {
	ID     string   `json:"id"`
	IDs    []int    `json:"ids"`
	Tokens []string `json:"tokens"`
}

type postJSON struct {
	Type          string                 `json:"type"`
	Sep           []json.RawMessage      `json:"sep"` // BertProcessing: ["[SEP]", 102]
	Cls           []json.RawMessage      `json:"cls"`
	Single        []pieceJSON            `json:"single"` // TemplateProcessing
	Pair          []pieceJSON            `json:"pair"`
	SpecialTokens map[string]specialJSON `json:"special_tokens"`
}

// Load reads a Hugging Face tokenizer.json holding a BERT WordPiece
// tokenizer: BertNormalizer, BertPreTokenizer, WordPiece model, and a
// BertProcessing or TemplateProcessing post-processor with the layout
// [CLS] $A [SEP] / [CLS] $A [SEP] $B:1 [SEP]:1. Ids of model.vocab and
// added_tokens must be dense: each below the number of entries, which bounds
// what Load allocates by the file's size. padding.pad_token names the pad
// token ([PAD] when absent; padding.pad_id must agree); the rest of the
// truncation and padding settings is not used: EncodeBatch fixes both per
// call. Every error names the file, and the line for malformed JSON.
func Load(path string) (*Tokenizer, error) {
	data, err := bounded.ReadFile(path, bounded.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	return parse(path, data)
}

// parse is Load on the bytes of the file at path.
func parse(path string, data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenize: %s%s: %w", path, jsonLine(data, err), err)
	}
	t, err := fromFile(&f)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: %w", path, err)
	}
	return t, nil
}

// jsonLine returns ":LINE" for a JSON error that carries an offset.
func jsonLine(data []byte, err error) string {
	off, ok := jsonerr.Offset(err)
	if !ok || off < 0 || off > int64(len(data)) {
		return ""
	}
	return ":" + strconv.Itoa(1+bytes.Count(data[:off], []byte("\n")))
}

func fromFile(f *fileJSON) (*Tokenizer, error) {
	m := f.Model
	if m == nil {
		return nil, errors.New("model: missing")
	}
	if m.Type != "" && m.Type != "WordPiece" {
		return nil, fmt.Errorf("model.type: %q is not supported (want WordPiece)", m.Type)
	}
	if len(m.Vocab) == 0 {
		return nil, errors.New("model.vocab: empty or missing")
	}
	t := &Tokenizer{prefix: "##", maxChars: 100, unk: m.UnkToken, cleanup: true}
	if m.Prefix != nil {
		t.prefix = *m.Prefix
	}
	if m.MaxInputChars != nil {
		if *m.MaxInputChars <= 0 {
			return nil, fmt.Errorf("model.max_input_chars_per_word: %d must be positive", *m.MaxInputChars)
		}
		t.maxChars = *m.MaxInputChars
	}

	// Ids: the model vocabulary plus added tokens, together dense from 0. Dense ids are all
	// below the number of entries, so an id at or above it is refused before anything is
	// allocated from it (a file of a few bytes could otherwise ask for terabytes).
	entries := len(m.Vocab) + len(f.AddedTokens)
	size := 0
	for _, tok := range slices.Sorted(maps.Keys(m.Vocab)) {
		id := m.Vocab[tok]
		if id < 0 {
			return nil, fmt.Errorf("model.vocab: token %q has negative id %d", tok, id)
		}
		if id >= entries {
			return nil, fmt.Errorf("model.vocab: id %d of %q is out of range (ids must be dense: %d entries, so ids 0 to %d)", id, tok, entries, entries-1)
		}
		size = max(size, id+1)
	}
	for i, a := range f.AddedTokens {
		if a.Content == "" {
			return nil, fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		if a.ID < 0 {
			return nil, fmt.Errorf("added_tokens[%d] %q: negative id %d", i, a.Content, a.ID)
		}
		if a.ID >= entries {
			return nil, fmt.Errorf("added_tokens[%d] %q: id %d is out of range (ids must be dense: %d entries, so ids 0 to %d)", i, a.Content, a.ID, entries, entries-1)
		}
		if a.Normalized || a.LStrip || a.RStrip || a.SingleWord {
			return nil, fmt.Errorf("added_tokens[%d] %q: normalized, lstrip, rstrip and single_word must be false (only raw-text matching is supported)", i, a.Content)
		}
		size = max(size, a.ID+1)
	}
	t.tokens = make([]string, size)
	filled := make([]bool, size)
	for tok, id := range m.Vocab {
		if filled[id] {
			return nil, fmt.Errorf("model.vocab: id %d is given to both %q and %q", id, t.tokens[id], tok)
		}
		t.tokens[id], filled[id] = tok, true
	}
	for i, a := range f.AddedTokens {
		if vid, ok := m.Vocab[a.Content]; ok && vid != a.ID {
			return nil, fmt.Errorf("added_tokens[%d] %q: id %d but model.vocab gives %d", i, a.Content, a.ID, vid)
		}
		if filled[a.ID] && t.tokens[a.ID] != a.Content {
			return nil, fmt.Errorf("added_tokens[%d] %q: id %d already names %q", i, a.Content, a.ID, t.tokens[a.ID])
		}
		t.tokens[a.ID], filled[a.ID] = a.Content, true
		t.added = append(t.added, addedToken{content: a.Content, id: a.ID, special: a.Special})
	}
	for id, ok := range filled {
		if !ok {
			return nil, fmt.Errorf("model.vocab: ids are not contiguous: no token has id %d (of %d)", id, size)
		}
	}
	t.buildIndex()
	for id, tok := range t.tokens {
		if other := t.vocab[tok]; other != id {
			return nil, fmt.Errorf("added_tokens: %q has two ids, %d and %d", tok, id, other)
		}
	}
	sort.Slice(t.added, func(i, j int) bool { return t.added[i].id < t.added[j].id })
	for i := 1; i < len(t.added); i++ {
		if t.added[i].id == t.added[i-1].id {
			return nil, fmt.Errorf("added_tokens: %q is listed twice", t.added[i].content)
		}
	}
	t.indexAdded()

	var err error
	if t.unk == "" {
		return nil, errors.New("model.unk_token: missing")
	}
	if t.unkID, err = t.need(t.unk, "model.unk_token"); err != nil {
		return nil, err
	}
	padTok := padToken
	if f.Padding != nil && f.Padding.PadToken != "" {
		padTok = f.Padding.PadToken
	}
	if t.padID, err = t.need(padTok, "padding.pad_token"); err != nil {
		return nil, err
	}
	if f.Padding != nil && f.Padding.PadID != nil && *f.Padding.PadID != t.padID {
		return nil, fmt.Errorf("padding.pad_id: %d, but pad_token %q has id %d", *f.Padding.PadID, padTok, t.padID)
	}
	if t.maskID, err = t.need(maskToken, "mask token"); err != nil {
		return nil, err
	}
	if t.clsID, t.sepID, err = t.postProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	if t.norm, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if f.PreTokenizer == nil || f.PreTokenizer.Type != "BertPreTokenizer" {
		got := "null"
		if f.PreTokenizer != nil {
			got = strconv.Quote(f.PreTokenizer.Type)
		}
		return nil, fmt.Errorf("pre_tokenizer: %s is not supported (want BertPreTokenizer)", got)
	}
	if d := f.Decoder; d != nil {
		if d.Type != "WordPiece" {
			return nil, fmt.Errorf("decoder.type: %q is not supported (want WordPiece)", d.Type)
		}
		if d.Prefix != "" && d.Prefix != t.prefix {
			return nil, fmt.Errorf("decoder.prefix: %q differs from model.continuing_subword_prefix %q", d.Prefix, t.prefix)
		}
		if d.Cleanup != nil {
			t.cleanup = *d.Cleanup
		}
	}
	return t, nil
}

// need returns the id of a token the tokenizer cannot work without.
func (t *Tokenizer) need(tok, what string) (int, error) {
	id, ok := t.vocab[tok]
	if !ok {
		return 0, fmt.Errorf("%s %q is not in the vocabulary", what, tok)
	}
	return id, nil
}

func parseNormalizer(n *normalizerJSON) (bertNormalizer, error) {
	if n == nil || n.Type != "BertNormalizer" {
		got := "null"
		if n != nil {
			got = strconv.Quote(n.Type)
		}
		return bertNormalizer{}, fmt.Errorf("normalizer: %s is not supported (want BertNormalizer)", got)
	}
	orTrue := func(b *bool) bool { return b == nil || *b } // Hugging Face's serde defaults
	bn := bertNormalizer{
		cleanText:    orTrue(n.CleanText),
		chineseChars: orTrue(n.ChineseChars),
		lowercase:    orTrue(n.Lowercase),
	}
	if n.StripAccents != nil {
		v := *n.StripAccents
		bn.stripAccents = &v
	}
	return bn, nil
}

// postProcessor checks the BERT layout and returns the [CLS] and [SEP] ids.
func (t *Tokenizer) postProcessor(p *postJSON) (cls, sep int, err error) {
	if p == nil {
		return 0, 0, errors.New("post_processor: null (want BertProcessing or TemplateProcessing adding [CLS] and [SEP])")
	}
	switch p.Type {
	case "BertProcessing":
		cls, err = t.bertPair(p.Cls, "post_processor.cls")
		if err != nil {
			return 0, 0, err
		}
		sep, err = t.bertPair(p.Sep, "post_processor.sep")
		return cls, sep, err
	case "TemplateProcessing":
		return t.template(p)
	default:
		return 0, 0, fmt.Errorf("post_processor.type: %q is not supported (want BertProcessing or TemplateProcessing)", p.Type)
	}
}

// bertPair reads BertProcessing's ["[CLS]", 101].
func (t *Tokenizer) bertPair(raw []json.RawMessage, field string) (int, error) {
	var tok string
	var id int
	if len(raw) != 2 || json.Unmarshal(raw[0], &tok) != nil || json.Unmarshal(raw[1], &id) != nil {
		return 0, fmt.Errorf("%s: want [token, id]", field)
	}
	if vid, ok := t.vocab[tok]; !ok || vid != id {
		return 0, fmt.Errorf("%s: token %q with id %d does not match the vocabulary", field, tok, id)
	}
	return id, nil
}

// template checks that the TemplateProcessing is BERT's and returns the ids
// of its two special tokens.
func (t *Tokenizer) template(p *postJSON) (cls, sep int, err error) {
	shape := func(ps []pieceJSON) string {
		var b bytes.Buffer
		for i, pc := range ps {
			if i > 0 {
				b.WriteByte(' ')
			}
			switch {
			case pc.SpecialToken != nil:
				fmt.Fprintf(&b, "%s:%d", pc.SpecialToken.ID, pc.SpecialToken.TypeID)
			case pc.Sequence != nil:
				fmt.Fprintf(&b, "$%s:%d", pc.Sequence.ID, pc.Sequence.TypeID)
			default:
				b.WriteString("?")
			}
		}
		return b.String()
	}
	single, pair := shape(p.Single), shape(p.Pair)
	if len(p.Single) != 3 || p.Single[0].SpecialToken == nil || p.Single[2].SpecialToken == nil {
		return 0, 0, fmt.Errorf("post_processor.single: %q is not the BERT layout [CLS]:0 $A:0 [SEP]:0", single)
	}
	c, s := p.Single[0].SpecialToken.ID, p.Single[2].SpecialToken.ID
	if want := fmt.Sprintf("%s:0 $A:0 %s:0", c, s); single != want {
		return 0, 0, fmt.Errorf("post_processor.single: %q, want %q", single, want)
	}
	if want := fmt.Sprintf("%s:0 $A:0 %s:0 $B:1 %s:1", c, s, s); pair != want {
		return 0, 0, fmt.Errorf("post_processor.pair: %q, want %q", pair, want)
	}
	lookup := func(name string) (int, error) {
		st, ok := p.SpecialTokens[name]
		if !ok || len(st.IDs) != 1 || len(st.Tokens) != 1 {
			return 0, fmt.Errorf("post_processor.special_tokens[%q]: want one id and one token", name)
		}
		if vid, ok := t.vocab[st.Tokens[0]]; !ok || vid != st.IDs[0] {
			return 0, fmt.Errorf("post_processor.special_tokens[%q]: token %q with id %d does not match the vocabulary", name, st.Tokens[0], st.IDs[0])
		}
		return st.IDs[0], nil
	}
	if cls, err = lookup(c); err != nil {
		return 0, 0, err
	}
	sep, err = lookup(s)
	return cls, sep, err
}

// Save writes the tokenizer as a Hugging Face tokenizer.json (format
// "1.0": truncation null; padding null when the pad token is [PAD], else
// Hugging Face's default padding naming the pad token, so that Load gives it
// back; added_tokens, BertNormalizer,
// BertPreTokenizer, TemplateProcessing [CLS] $A [SEP] / [CLS] $A [SEP]
// $B:1 [SEP]:1, WordPiece decoder, WordPiece model whose vocab lists every
// id in order, added tokens included). strip_accents is written as an
// explicit boolean so that readers which treat null as false (sugarme) agree
// with Hugging Face. The file is written to a temporary file in the same
// directory, synced and renamed over path, so a reader never sees half a
// file. The output is byte-for-byte deterministic.
func (t *Tokenizer) Save(path string) error {
	data, err := t.marshal()
	if err != nil {
		return fmt.Errorf("tokenize: save %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data); err != nil {
		return fmt.Errorf("tokenize: save %s: %w", path, err)
	}
	return nil
}

type saveJSON struct {
	Version       string           `json:"version"`
	Truncation    *struct{}        `json:"truncation"`
	Padding       *savePadding     `json:"padding"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    saveNormalizer   `json:"normalizer"`
	PreTokenizer  typedJSON        `json:"pre_tokenizer"`
	PostProcessor savePost         `json:"post_processor"`
	Decoder       saveDecoder      `json:"decoder"`
	Model         saveModel        `json:"model"`
}

type saveNormalizer struct {
	Type         string `json:"type"`
	CleanText    bool   `json:"clean_text"`
	ChineseChars bool   `json:"handle_chinese_chars"`
	StripAccents bool   `json:"strip_accents"`
	Lowercase    bool   `json:"lowercase"`
}

type savePost struct {
	Type          string                 `json:"type"`
	Single        []pieceJSON            `json:"single"`
	Pair          []pieceJSON            `json:"pair"`
	SpecialTokens map[string]specialJSON `json:"special_tokens"`
}

type saveDecoder struct {
	Type    string `json:"type"`
	Prefix  string `json:"prefix"`
	Cleanup bool   `json:"cleanup"`
}

type saveModel struct {
	Type          string          `json:"type"`
	UnkToken      string          `json:"unk_token"`
	Prefix        string          `json:"continuing_subword_prefix"`
	MaxInputChars int             `json:"max_input_chars_per_word"`
	Vocab         json.RawMessage `json:"vocab"`
}

func (t *Tokenizer) marshal() ([]byte, error) {
	vocab, err := idOrderVocab(t.tokens, func(tok string) string { return tok })
	if err != nil {
		return nil, err
	}

	cls, sep := t.tokens[t.clsID], t.tokens[t.sepID]
	special := func(tok string, typ int) pieceJSON { return pieceJSON{SpecialToken: &pieceRef{ID: tok, TypeID: typ}} }
	seq := func(name string, typ int) pieceJSON { return pieceJSON{Sequence: &pieceRef{ID: name, TypeID: typ}} }
	out := saveJSON{
		Version:     "1.0",
		AddedTokens: make([]addedTokenJSON, 0, len(t.added)),
		Normalizer: saveNormalizer{
			Type:         "BertNormalizer",
			CleanText:    t.norm.cleanText,
			ChineseChars: t.norm.chineseChars,
			StripAccents: t.norm.strips(),
			Lowercase:    t.norm.lowercase,
		},
		PreTokenizer: typedJSON{Type: "BertPreTokenizer"},
		PostProcessor: savePost{
			Type:   "TemplateProcessing",
			Single: []pieceJSON{special(cls, 0), seq("A", 0), special(sep, 0)},
			Pair:   []pieceJSON{special(cls, 0), seq("A", 0), special(sep, 0), seq("B", 1), special(sep, 1)},
			SpecialTokens: map[string]specialJSON{
				cls: {ID: cls, IDs: []int{t.clsID}, Tokens: []string{cls}},
				sep: {ID: sep, IDs: []int{t.sepID}, Tokens: []string{sep}},
			},
		},
		Decoder: saveDecoder{Type: "WordPiece", Prefix: t.prefix, Cleanup: t.cleanup},
		Model: saveModel{
			Type:          "WordPiece",
			UnkToken:      t.unk,
			Prefix:        t.prefix,
			MaxInputChars: t.maxChars,
			Vocab:         vocab,
		},
	}
	if pad := t.tokens[t.padID]; pad != padToken {
		out.Padding = &savePadding{Strategy: "BatchLongest", Direction: "Right", PadID: t.padID, PadToken: pad}
	}
	for _, a := range t.added {
		out.AddedTokens = append(out.AddedTokens, addedTokenJSON{ID: a.id, Content: a.content, Special: a.special})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func marshalNoEscape(s string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
