package tokenize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/internal/bounded"
)

// newByteLevelBPE builds the vocabulary, the special tokens and the merges of a byte-level
// BPE tokenizer from its tokens (id order, as stored), their llama.cpp types (nil: all normal)
// and its merges ("a b", rank order); mergesKey names the merges in errors. digitMerge reports
// a merge holding a digit. The caller sets bos/eos/pad/unk, the template and the pre-tokenizer.
func newByteLevelBPE(toks []string, types []int64, merges []string, mergesKey string) (t *GGUFTokenizer, digitMerge bool, err error) {
	t = &GGUFTokenizer{tokens: toks, vocab: make(map[string]int, len(toks))}
	t.special = make([]bool, len(toks))
	t.control = make([]bool, len(toks))
	for id, tok := range toks {
		t.vocab[hfSpelling(tok)] = id
		if types == nil {
			continue
		}
		switch types[id] {
		case tokenControl:
			// A control token outside the byte alphabet is a llama.cpp
			// mislabel transformers skips; so do we.
			if inAlphabet(tok) {
				t.special[id], t.control[id] = true, true
			}
		case tokenUserDefined:
			// transformers adds it only when it is a vocabulary key, i.e.
			// spelled in the byte alphabet.
			t.special[id] = inAlphabet(tok)
		}
	}
	for id, sp := range t.special {
		if sp && toks[id] != "" {
			t.added = append(t.added, id)
		}
	}
	// Longest content first, so the first hit at a position is the longest.
	sortByLenDesc(t.added, toks)
	for b := range t.model.char {
		t.model.char[b] = -1
		if id, ok := t.vocab[string(byteEnc[b])]; ok {
			t.model.char[b] = id
		}
	}
	t.model.merges = make(map[uint64]merge, len(merges))
	for rank, m := range merges {
		a, b, ok := strings.Cut(m, " ")
		if !ok || strings.Contains(b, " ") {
			return nil, false, fmt.Errorf("%s[%d] %q: want two tokens separated by one space", mergesKey, rank, m)
		}
		ia, oka := t.vocab[a]
		ib, okb := t.vocab[b]
		ic, okc := t.vocab[a+b]
		if !oka || !okb || !okc {
			return nil, false, fmt.Errorf("%s[%d] %q: a token or the merged token is not in the vocabulary", mergesKey, rank, m)
		}
		if _, dup := t.model.merges[pairKey(ia, ib)]; !dup {
			t.model.merges[pairKey(ia, ib)] = merge{rank: rank, id: ic}
		}
		digitMerge = digitMerge || strings.ContainsAny(m, "0123456789")
	}
	return t, digitMerge, nil
}

// hfTokenizerJSON is what LoadHFByteLevel reads of tokenizer.json.
type hfTokenizerJSON struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         struct {
		Type                    string          `json:"type"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		Dropout                 *float64        `json:"dropout"`
	} `json:"model"`
}

// hfStep is one pre-tokenizer or post-processor object of tokenizer.json.
type hfStep struct {
	Type            string   `json:"type"`
	AddPrefixSpace  bool     `json:"add_prefix_space"`
	UseRegex        *bool    `json:"use_regex"`
	IndividualDigit bool     `json:"individual_digits"`
	Steps           []hfStep `json:"pretokenizers"`
}

// LoadHFByteLevel loads the byte-level BPE tokenizer of a Hugging Face directory of the LLaMA
// family (SmolLM2's, or the one WriteHF writes) into a GGUFTokenizer: tokenizer.json with a
// BPE model (vocab ids 0..n-1 dense, added tokens at their ids; merges as "a b" strings or
// [a, b] pairs; no byte fallback, no subword prefix or suffix, no dropout), no normalizer, the
// pre-tokenizer ByteLevel (use_regex true, no prefix space) alone or after Digits with
// individual_digits (SmolLM2's), no post-processor or a ByteLevel one; the added tokens marked
// special are control tokens (skipped by Decode with skipSpecial), the others user-defined.
// tokenizer_config.json (optional): bos_token, eos_token, pad_token (default eos), unk_token
// (a string or {"content": ...}, each a token of the vocabulary), add_bos_token and
// add_eos_token (must be false or absent), chat_template (a ChatML template, as
// LoadGGUFTokenizer). Anything else is one error naming the file and the field.
func LoadHFByteLevel(dir string) (*GGUFTokenizer, error) {
	path := filepath.Join(dir, JSONFile)
	b, err := bounded.ReadFile(path, bounded.Tokenizer)
	if err != nil {
		return nil, err
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("tokenize: %s: %s", path, fmt.Sprintf(format, a...))
	}
	var j hfTokenizerJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fail("%v", err)
	}
	m := j.Model
	switch {
	case m.Type != "BPE":
		return nil, fail("model.type %q: only \"BPE\" (byte-level) is supported", m.Type)
	case m.ByteFallback || m.IgnoreMerges || m.Dropout != nil && *m.Dropout != 0:
		return nil, fail("model: byte_fallback, ignore_merges and dropout are not supported")
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" || m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fail("model: continuing_subword_prefix and end_of_word_suffix must be empty")
	case !isNull(j.Normalizer):
		return nil, fail("normalizer %s: only null is supported", j.Normalizer)
	}
	n := len(m.Vocab)
	for _, a := range j.AddedTokens {
		n = max(n, a.ID+1)
	}
	if n == 0 || n > 1<<22 {
		return nil, fail("model.vocab: %d ids, want 1 to %d", n, 1<<22)
	}
	toks := make([]string, n)
	seen := make([]bool, n)
	for tok, id := range m.Vocab {
		if id < 0 || id >= n || seen[id] {
			return nil, fail("model.vocab[%q] = %d: ids must be distinct and in [0, %d)", tok, id, n)
		}
		toks[id], seen[id] = tok, true
	}
	types := make([]int64, n)
	for id := range types {
		types[id] = tokenNormal
	}
	for _, a := range j.AddedTokens {
		if a.ID < 0 || seen[a.ID] && toks[a.ID] != a.Content {
			return nil, fail("added_tokens: id %d is %q, the vocabulary says %q", a.ID, a.Content, toks[a.ID])
		}
		toks[a.ID], seen[a.ID] = a.Content, true
		types[a.ID] = tokenUserDefined
		if a.Special {
			types[a.ID] = tokenControl
		}
	}
	for id, ok := range seen {
		if !ok {
			return nil, fail("model.vocab: no token has id %d (ids must be dense)", id)
		}
	}
	merges, err := hfMerges(m.Merges)
	if err != nil {
		return nil, fail("model.merges: %v", err)
	}
	digits, err := hfPreTokenizer(j.PreTokenizer)
	if err != nil {
		return nil, fail("pre_tokenizer: %v", err)
	}
	if !isNull(j.PostProcessor) {
		var s hfStep
		if err := json.Unmarshal(j.PostProcessor, &s); err != nil || s.Type != "ByteLevel" {
			return nil, fail("post_processor %s: only null or ByteLevel is supported (no added BOS/EOS)", j.PostProcessor)
		}
	}
	t, _, err := newByteLevelBPE(toks, types, merges, "model.merges")
	if err != nil {
		return nil, fail("%v", err)
	}
	t.digits = digits
	if err := t.readHFConfig(filepath.Join(dir, ConfigFile)); err != nil {
		return nil, err
	}
	return t, nil
}

func isNull(r json.RawMessage) bool { return len(r) == 0 || string(bytes.TrimSpace(r)) == "null" }

// hfMerges reads model.merges: "a b" strings (tokenizers before 0.20) or [a, b] pairs.
func hfMerges(r json.RawMessage) ([]string, error) {
	if isNull(r) {
		return nil, nil
	}
	var strs []string
	if err := json.Unmarshal(r, &strs); err == nil {
		return strs, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(r, &pairs); err != nil {
		return nil, fmt.Errorf("want an array of \"a b\" strings or of [a, b] pairs")
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 || strings.Contains(p[0], " ") || strings.Contains(p[1], " ") {
			return nil, fmt.Errorf("[%d] %q: want two tokens without spaces", i, p)
		}
		out[i] = p[0] + " " + p[1]
	}
	return out, nil
}

// hfPreTokenizer accepts ByteLevel (use_regex, no prefix space) alone or as a Sequence after
// Digits{individual_digits: true}; digits reports the latter.
func hfPreTokenizer(r json.RawMessage) (digits bool, err error) {
	var s hfStep
	if err := json.Unmarshal(r, &s); err != nil {
		return false, err
	}
	steps := []hfStep{s}
	if s.Type == "Sequence" {
		steps = s.Steps
	}
	if len(steps) == 2 && steps[0].Type == "Digits" && steps[0].IndividualDigit {
		digits, steps = true, steps[1:]
	}
	if len(steps) != 1 || steps[0].Type != "ByteLevel" || steps[0].AddPrefixSpace || steps[0].UseRegex != nil && !*steps[0].UseRegex {
		return false, fmt.Errorf("%s: only ByteLevel (use_regex, no prefix space), alone or after Digits with individual_digits, is supported", r)
	}
	return digits, nil
}

// readHFConfig reads tokenizer_config.json's special tokens and chat template (a missing file:
// no bos/eos/unk, no template).
func (t *GGUFTokenizer) readHFConfig(path string) error {
	t.bos, t.eos, t.pad, t.unk = -1, -1, -1, -1
	b, err := bounded.ReadFile(path, bounded.ConfigJSON)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("tokenize: %s: %w", path, err)
	}
	for _, k := range []string{"add_bos_token", "add_eos_token"} {
		var v bool
		if r, ok := c[k]; ok && json.Unmarshal(r, &v) == nil && v {
			return fmt.Errorf("tokenize: %s: %s is true: adding BOS/EOS is not supported", path, k)
		}
	}
	id := func(key string, def int) (int, error) {
		r, ok := c[key]
		if !ok || isNull(r) {
			return def, nil
		}
		var s string
		if json.Unmarshal(r, &s) != nil {
			var o struct {
				Content string `json:"content"`
			}
			if err := json.Unmarshal(r, &o); err != nil {
				return 0, fmt.Errorf("tokenize: %s: %s: want a string or {\"content\": ...}", path, key)
			}
			s = o.Content
		}
		id, ok := t.vocab[hfSpelling(s)]
		if !ok {
			return 0, fmt.Errorf("tokenize: %s: %s %q is not a token of %s", path, key, s, JSONFile)
		}
		return id, nil
	}
	if t.bos, err = id("bos_token", -1); err != nil {
		return err
	}
	if t.eos, err = id("eos_token", -1); err != nil {
		return err
	}
	if t.pad, err = id("pad_token", t.eos); err != nil {
		return err
	}
	if t.unk, err = id("unk_token", -1); err != nil {
		return err
	}
	if r, ok := c["chat_template"]; ok && !isNull(r) {
		if err := json.Unmarshal(r, &t.template); err != nil {
			return fmt.Errorf("tokenize: %s: chat_template: want a string", path)
		}
		if t.system, err = parseChatTemplate(t.template); err != nil {
			return fmt.Errorf("tokenize: %s: %w", path, err)
		}
	}
	return nil
}
