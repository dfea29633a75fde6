package tokenize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
)

// WriteHF writes the tokenizer as a Hugging Face fast tokenizer into dir
// (created if missing): tokenizer.json (BPE model with the vocabulary and
// merges, the special tokens as added tokens, ByteLevel pre-tokenizer and
// decoder, no post-processing) and tokenizer_config.json (bos/eos/pad/unk
// tokens, add_bos_token false, the chat template). Loaded by transformers'
// AutoTokenizer.from_pretrained(dir) or tokenizers.Tokenizer.from_file it
// gives the ids Encode gives (tools/interop/gguf_tokenizer.py checks it).
// Each file is written to a temporary name and renamed.
// Duplicate tokens (a respelled token equal to another) would make the
// vocab object ambiguous; hfToken keeps the stored spelling of each id.
func (t *GGUFTokenizer) WriteHF(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	merges := make([][2]string, 0, len(t.model.merges))
	// Ranks are dense only where the file had no duplicate pairs; order by rank.
	byRank := make(map[int][2]string, len(t.model.merges))
	for key, m := range t.model.merges {
		byRank[m.rank] = [2]string{hfSpelling(t.tokens[int(key>>32)]), hfSpelling(t.tokens[int(uint32(key))])}
	}
	for r := 0; len(merges) < len(t.model.merges); r++ {
		if p, ok := byRank[r]; ok {
			merges = append(merges, p)
		}
	}
	var addedTokens []addedTokenJSON
	var extra []string
	for id, sp := range t.special {
		if sp {
			addedTokens = append(addedTokens, addedTokenJSON{ID: id, Content: t.tokens[id], Special: t.control[id]})
			if t.control[id] {
				extra = append(extra, t.tokens[id])
			}
		}
	}
	vocab, err := idOrderVocab(t.tokens, hfSpelling)
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	tj := map[string]any{
		"version":        "1.0",
		"truncation":     nil,
		"padding":        nil,
		"added_tokens":   addedTokens,
		"normalizer":     nil,
		"pre_tokenizer":  byteLevel,
		"post_processor": nil,
		"decoder":        byteLevel,
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges,
		},
	}
	tokenOrNil := func(id int) any {
		if id < 0 {
			return nil
		}
		return t.tokens[id]
	}
	cfg := map[string]any{
		"tokenizer_class":              "PreTrainedTokenizerFast",
		"add_bos_token":                false,
		"add_eos_token":                false,
		"bos_token":                    tokenOrNil(t.bos),
		"eos_token":                    tokenOrNil(t.eos),
		"pad_token":                    tokenOrNil(t.pad),
		"unk_token":                    tokenOrNil(t.unk),
		"additional_special_tokens":    extra,
		"clean_up_tokenization_spaces": false,
	}
	if t.template != "" {
		cfg["chat_template"] = t.template
	}
	if err := writeJSONFile(filepath.Join(dir, "tokenizer.json"), tj); err != nil {
		return err
	}
	return writeJSONFile(filepath.Join(dir, "tokenizer_config.json"), cfg)
}

// writeJSONFile writes v as indented JSON without HTML escaping (as
// Hugging Face writes it) through atomicfile (temporary file, rename).
func writeJSONFile(path string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("tokenize: %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, buf.Bytes()); err != nil {
		return fmt.Errorf("tokenize: %s: %w", path, err)
	}
	return nil
}

// idOrderVocab is the vocab object {spell(tokens[0]): 0, ...} with keys in id order, as Hugging
// Face writes it (encoding/json would sort map keys).
func idOrderVocab(tokens []string, spell func(string) string) (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for id, tok := range tokens {
		if id > 0 {
			b.WriteByte(',')
		}
		key, err := marshalNoEscape(spell(tok))
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(id))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
