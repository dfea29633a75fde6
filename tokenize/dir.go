package tokenize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/internal/bounded"
)

// The tokenizer files of a Hugging Face model directory.
const (
	JSONFile          = "tokenizer.json"          // the tokenizers library's complete description (Load)
	VocabFile         = "vocab.txt"               // BERT's WordPiece vocabulary, one token per line (LoadVocab)
	ConfigFile        = "tokenizer_config.json"   // transformers' tokenizer arguments
	SpecialTokensFile = "special_tokens_map.json" // the special tokens by role
	AddedTokensFile   = "added_tokens.json"       // tokens added after training (transformers v3/v4)
)

// LoadDir loads the tokenizer of a Hugging Face BERT model directory as transformers'
// AutoTokenizer does: from tokenizer.json when the directory has one (Load), otherwise from
// vocab.txt (LoadVocab) with the settings of tokenizer_config.json and special_tokens_map.json,
// both optional: do_lower_case, strip_accents, tokenize_chinese_chars, the special tokens
// unk/cls/sep/pad/mask_token (a string or an {"content": ...} object; special_tokens_map.json
// wins over tokenizer_config.json, as in transformers), additional_special_tokens or
// extra_special_tokens, and added_tokens_decoder; BertTokenizer's defaults (DefaultVocabOptions)
// fill in what they leave out.
//
// It returns the tokenizer and the files it was read from, in words ("DIR/tokenizer.json", or
// "DIR/vocab.txt with DIR/tokenizer_config.json"). Errors name the file and the field: a
// tokenizer_class other than BertTokenizer or BertTokenizerFast; an added_tokens_decoder entry
// whose id names another token of vocab.txt, whose ids leave a gap after the vocabulary, that is
// not special, or that is normalized, lstrip, rstrip or single_word (only raw-text matching of
// special tokens is implemented); an added_tokens.json (its tokens are matched after
// normalisation); and a directory with neither tokenizer.json nor vocab.txt.
func LoadDir(dir string) (*Tokenizer, string, error) {
	jsonPath := filepath.Join(dir, JSONFile)
	if _, err := os.Stat(jsonPath); err == nil {
		t, err := Load(jsonPath)
		return t, jsonPath, err
	}
	vocabPath := filepath.Join(dir, VocabFile)
	if _, err := os.Stat(vocabPath); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("tokenize: %s has no %s and no %s", dir, JSONFile, VocabFile)
		}
		return nil, "", fmt.Errorf("tokenize: %w", err)
	}
	if p := filepath.Join(dir, AddedTokensFile); fileExists(p) {
		return nil, "", fmt.Errorf("tokenize: %s: added tokens are not read (transformers matches them after normalisation, which this tokenizer does not implement); save the tokenizer with a current transformers to get a tokenizer.json", p)
	}
	o := DefaultVocabOptions()
	used := []string{}
	var added []addedDecoderEntry
	cfgPath := filepath.Join(dir, ConfigFile)
	if fileExists(cfgPath) {
		var c tokenizerConfigJSON
		if err := readOptions(cfgPath, &c, &o); err != nil {
			return nil, "", err
		}
		var err error
		if added, err = c.addedTokens(cfgPath); err != nil {
			return nil, "", err
		}
		used = append(used, cfgPath)
	}
	mapPath := filepath.Join(dir, SpecialTokensFile)
	if fileExists(mapPath) {
		if err := readOptions(mapPath, &specialTokensJSON{}, &o); err != nil {
			return nil, "", err
		}
		used = append(used, mapPath)
	}
	t, err := loadVocabWithAdded(vocabPath, o, added, cfgPath)
	if err != nil {
		return nil, "", err
	}
	what := vocabPath
	if len(used) > 0 {
		what += " with " + strings.Join(used, " and ")
	}
	return t, what, nil
}

// loadVocabWithAdded is LoadVocab plus the added_tokens_decoder entries of cfgPath: those inside
// the vocabulary must name its token there, those after it must follow it densely, in id order.
func loadVocabWithAdded(vocabPath string, o VocabOptions, added []addedDecoderEntry, cfgPath string) (*Tokenizer, error) {
	tokens, err := readVocab(vocabPath)
	if err != nil {
		return nil, err
	}
	n := len(tokens)
	var after []addedDecoderEntry
	var special []string
	for _, a := range added {
		if a.id >= n {
			after = append(after, a)
			continue
		}
		if tokens[a.id] != a.content {
			return nil, fmt.Errorf("tokenize: %s: added_tokens_decoder[\"%d\"] is %q, but %s gives id %d to %q", cfgPath, a.id, a.content, vocabPath, a.id, tokens[a.id])
		}
		special = append(special, a.content)
	}
	slices.SortFunc(after, func(a, b addedDecoderEntry) int { return a.id - b.id })
	inVocab := make(map[string]bool, len(tokens))
	if len(after) > 0 {
		for _, t := range tokens {
			inVocab[t] = true
		}
	}
	for i, a := range after {
		if a.id != n+i {
			return nil, fmt.Errorf("tokenize: %s: added_tokens_decoder[\"%d\"] %q: the ids after the %d tokens of %s must follow on without gaps (want id %d)", cfgPath, a.id, a.content, n, vocabPath, n+i)
		}
		if inVocab[a.content] {
			return nil, fmt.Errorf("tokenize: %s: added_tokens_decoder[\"%d\"] %q: already in %s", cfgPath, a.id, a.content, vocabPath)
		}
	}
	// The tokens after the vocabulary take their ids first, in id order; then the other special
	// tokens not in it.
	var extra []string
	for _, a := range after {
		extra = append(extra, a.content)
	}
	o.Special = append(append(extra, o.Special...), special...)
	return fromVocabFile(vocabPath, tokens, o)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// optionsFile is a JSON file of a vocab.txt directory that sets VocabOptions
// (tokenizer_config.json, special_tokens_map.json).
type optionsFile interface {
	apply(path string, o *VocabOptions) error
}

// readOptions decodes the JSON file at path into f and applies it to o.
func readOptions(path string, f optionsFile, o *VocabOptions) error {
	if err := readConfigJSON(path, f); err != nil {
		return err
	}
	return f.apply(path, o)
}

// readConfigJSON decodes the JSON file at path into v; errors name the file and the line.
func readConfigJSON(path string, v any) error {
	data, err := bounded.ReadFile(path, bounded.ConfigJSON)
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("tokenize: %s%s: %w", path, jsonLine(data, err), err)
	}
	return nil
}

// specialTokensJSON is special_tokens_map.json, and the special-token fields of
// tokenizer_config.json. Each value is a string, an AddedToken object {"content": ...}, or null.
type specialTokensJSON struct {
	Unk        json.RawMessage `json:"unk_token"`
	CLS        json.RawMessage `json:"cls_token"`
	SEP        json.RawMessage `json:"sep_token"`
	Pad        json.RawMessage `json:"pad_token"`
	Mask       json.RawMessage `json:"mask_token"`
	Additional json.RawMessage `json:"additional_special_tokens"`
	Extra      json.RawMessage `json:"extra_special_tokens"`
}

// tokenizerConfigJSON is the part of tokenizer_config.json a BERT tokenizer uses.
type tokenizerConfigJSON struct {
	TokenizerClass       *string                    `json:"tokenizer_class"`
	DoLowerCase          *bool                      `json:"do_lower_case"`
	StripAccents         *bool                      `json:"strip_accents"`
	TokenizeChineseChars *bool                      `json:"tokenize_chinese_chars"`
	AddedTokensDecoder   map[string]json.RawMessage `json:"added_tokens_decoder"`
	specialTokensJSON
}

type addedDecoderEntry struct {
	id      int
	content string
}

func (c *tokenizerConfigJSON) apply(path string, o *VocabOptions) error {
	if c.TokenizerClass != nil {
		switch *c.TokenizerClass {
		case "BertTokenizer", "BertTokenizerFast":
		default:
			return fmt.Errorf("tokenize: %s: tokenizer_class = %q; this toolkit implements BERT's WordPiece tokenizer (BertTokenizer, BertTokenizerFast)", path, *c.TokenizerClass)
		}
	}
	if c.DoLowerCase != nil {
		o.Lowercase = *c.DoLowerCase
	}
	if c.StripAccents != nil {
		v := *c.StripAccents
		o.StripAccents = &v
	}
	if c.TokenizeChineseChars != nil {
		o.ChineseChars = *c.TokenizeChineseChars
	}
	return c.specialTokensJSON.apply(path, o)
}

// addedTokens reads added_tokens_decoder: id -> AddedToken. Every entry must be a special token
// matched on the raw text (normalized, lstrip, rstrip and single_word false).
func (c *tokenizerConfigJSON) addedTokens(path string) ([]addedDecoderEntry, error) {
	var out []addedDecoderEntry
	for _, key := range slices.Sorted(maps.Keys(c.AddedTokensDecoder)) {
		field := fmt.Sprintf("added_tokens_decoder[%q]", key)
		id, err := strconv.Atoi(key)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("tokenize: %s: %s: the key is not an id (a number >= 0)", path, field)
		}
		var a struct {
			Content    *string `json:"content"`
			Special    bool    `json:"special"`
			Normalized bool    `json:"normalized"`
			LStrip     bool    `json:"lstrip"`
			RStrip     bool    `json:"rstrip"`
			SingleWord bool    `json:"single_word"`
		}
		if err := json.Unmarshal(c.AddedTokensDecoder[key], &a); err != nil {
			return nil, fmt.Errorf("tokenize: %s: %s: %w", path, field, err)
		}
		switch {
		case a.Content == nil || *a.Content == "":
			return nil, fmt.Errorf("tokenize: %s: %s: content missing or empty", path, field)
		case !a.Special:
			return nil, fmt.Errorf("tokenize: %s: %s %q: special = false; only special added tokens are implemented (transformers matches other added tokens after normalisation)", path, field, *a.Content)
		case a.Normalized || a.LStrip || a.RStrip || a.SingleWord:
			return nil, fmt.Errorf("tokenize: %s: %s %q: normalized, lstrip, rstrip and single_word must be false (only raw-text matching is implemented)", path, field, *a.Content)
		}
		out = append(out, addedDecoderEntry{id: id, content: *a.Content})
	}
	return out, nil
}

// apply sets the special tokens the file names.
func (s *specialTokensJSON) apply(path string, o *VocabOptions) error {
	for _, f := range []struct {
		raw   json.RawMessage
		field string
		dst   *string
	}{{s.Unk, "unk_token", &o.Unk}, {s.CLS, "cls_token", &o.CLS}, {s.SEP, "sep_token", &o.SEP},
		{s.Pad, "pad_token", &o.Pad}, {s.Mask, "mask_token", &o.Mask}} {
		tok, ok, err := tokenValue(f.raw)
		if err != nil {
			return fmt.Errorf("tokenize: %s: %s: %w", path, f.field, err)
		}
		if !ok {
			continue
		}
		if tok == "" {
			return fmt.Errorf("tokenize: %s: %s is empty", path, f.field)
		}
		*f.dst = tok
	}
	for _, f := range []struct {
		raw   json.RawMessage
		field string
	}{{s.Additional, "additional_special_tokens"}, {s.Extra, "extra_special_tokens"}} {
		toks, err := tokenList(f.raw)
		if err != nil {
			return fmt.Errorf("tokenize: %s: %s: %w", path, f.field, err)
		}
		for i, tok := range toks {
			if tok == "" {
				return fmt.Errorf("tokenize: %s: %s[%d] is empty", path, f.field, i)
			}
			o.Special = append(o.Special, tok)
		}
	}
	return nil
}

// tokenValue decodes a special token: a string or an AddedToken object {"content": ...}; false
// when absent or null.
func tokenValue(raw json.RawMessage) (string, bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", false, errors.New(`want a token: a string or {"content": "..."}`)
	}
	return *obj.Content, true, nil
}

// tokenList decodes a list of special tokens (strings or AddedToken objects), or the values of
// an object of named tokens (transformers v5's extra_special_tokens), in key order.
func tokenList(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		var named map[string]json.RawMessage
		if json.Unmarshal(raw, &named) != nil {
			return nil, errors.New("want a list of tokens")
		}
		for _, k := range slices.Sorted(maps.Keys(named)) {
			items = append(items, named[k])
		}
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		tok, ok, err := tokenValue(it)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		if !ok {
			return nil, fmt.Errorf("[%d]: null", i)
		}
		out = append(out, tok)
	}
	return out, nil
}
