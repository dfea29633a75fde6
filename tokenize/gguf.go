package tokenize

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ragtrain/ragtrain/gguf"
)

// GGUFTokenizer is the byte-level BPE tokenizer a GGUF file describes in its
// metadata (tokenizer.ggml.model "gpt2"), built as Hugging Face transformers
// builds it from the same file (transformers/integrations/gguf/
// gguf_tokenizer_mapping.py: GPT2Tokenizer from the tokens and merges, the
// tokens typed CONTROL added as special tokens), so that Encode gives the ids
// AutoTokenizer.from_pretrained(dir, gguf_file=...) gives:
//
//   - special tokens (token_type 3 = CONTROL, and 4 = USER_DEFINED) are
//     matched in the raw text first, leftmost-longest, and never split;
//   - the rest is split by GPT-2's pattern (gpt2Split) and each piece is
//     BPE-encoded over its UTF-8 bytes in GPT-2's byte alphabet;
//   - no BOS or EOS is added (tokenizer.ggml.add_bos_token is false for
//     SmolLM2; a file asking for BOS is refused rather than half-served).
//
// Pre-tokenizer: the SmolLM2 file says tokenizer.ggml.pre = "smollm", for
// which llama.cpp (llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_SMOLLM) first
// isolates every \p{N} and then applies GPT-2's pattern; transformers has
// no entry for "smollm" and keeps GPT-2's pattern alone. We follow
// transformers, the reference of the parity check. Digits end up one token
// each either way, because the vocabulary has no merge containing a digit
// (Load checks that, and refuses a "smollm" file with such merges); the two
// differ only in the whitespace before a digit: "  1" is "Ġ", "Ġ", "1" here
// and in transformers (GPT-2's \s+(?!\S) leaves the last space to " 1"),
// "ĠĠ", "1" in llama.cpp. Measured with llama-cpp-python 0.3.36: 5 of
// 10,366 SciFact abstract fields and 114 of the 1,000 hand-made strings of
// tools/interop/gguf_tokenizer.py differ, and every difference disappears
// when transformers' tokenizer is given llama.cpp's digit split first.
//
// The bytes whose alphabet character the vocabulary lacks (SmolLM2 lacks 21
// of 256, e.g. 0x04, 0xC0, 0xF5..0xFF) are dropped, as tokenizers' BPE with
// no unk token drops them.
//
// github.com/sugarme/tokenizer is not used: its ByteLevel pre-tokenizer
// relies on a regexp engine without GPT-2's look-ahead, and the WordPiece
// experience of this package (doc.go) showed it 40 times slower than own
// code. A GGUFTokenizer is safe for concurrent use.
type GGUFTokenizer struct {
	tokens   []string       // id -> token as stored (byte alphabet)
	special  []bool         // id -> control/user-defined (matched whole in text)
	control  []bool         // id -> skipped by Decode(skipSpecial)
	added    []int          // ids matched in raw text, longest content first
	vocab    map[string]int // token (respelled into the byte alphabet) -> id
	model    bpe
	bos, eos int
	pad, unk int
	template string // tokenizer.chat_template
	system   string // its default system message, "" if none
	digits   bool   // every \p{N} its own pre-token before GPT-2's pattern (tokenizers' Digits, individual_digits)
}

// Token types of llama.cpp (llama_token_type / gguf TokenType).
const (
	tokenNormal      = 1
	tokenControl     = 3
	tokenUserDefined = 4
)

// LoadGGUFTokenizer builds the tokenizer from f's metadata:
// tokenizer.ggml.model (must be "gpt2"), .tokens, .merges ("a b" pairs of
// tokens), .token_type, .bos_token_id, .eos_token_id, .padding_token_id
// (default eos), .unknown_token_id, .add_bos_token / .add_eos_token (must be
// false or absent) and tokenizer.chat_template (optional; when present it
// must be a ChatML template, see ChatPrompt). Errors name the GGUF file and
// the key.
func LoadGGUFTokenizer(f *gguf.File) (*GGUFTokenizer, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("tokenize: %s: %s", f.Path(), fmt.Sprintf(format, a...))
	}
	if m, _ := f.String("tokenizer.ggml.model"); m != "gpt2" {
		return nil, fail("tokenizer.ggml.model %q: only \"gpt2\" (byte-level BPE) is supported", m)
	}
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(toks) == 0 {
		return nil, fail("tokenizer.ggml.tokens missing or not an array of strings")
	}
	merges, ok := f.Strings("tokenizer.ggml.merges")
	if !ok {
		return nil, fail("tokenizer.ggml.merges missing or not an array of strings")
	}
	for _, k := range []string{"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"} {
		if b, _ := f.Bool(k); b {
			return nil, fail("%s is true: adding BOS/EOS is not supported", k)
		}
	}
	var types []int64
	if _, present := f.Meta["tokenizer.ggml.token_type"]; present {
		if types, ok = f.Ints("tokenizer.ggml.token_type"); !ok || len(types) != len(toks) {
			return nil, fail("tokenizer.ggml.token_type: want %d integers", len(toks))
		}
	}
	pre, _ := f.String("tokenizer.ggml.pre")
	switch pre {
	case "", "default", "gpt2", "gpt-2":
	case "smollm":
	default:
		return nil, fail("tokenizer.ggml.pre %q: only GPT-2's pattern (\"gpt2\", \"smollm\") is supported", pre)
	}
	t, digitMerge, err := newByteLevelBPE(toks, types, merges, "tokenizer.ggml.merges")
	if err != nil {
		return nil, fail("%v", err)
	}
	if pre == "smollm" && digitMerge {
		return nil, fail("tokenizer.ggml.pre \"smollm\" with merges joining digits: llama.cpp would keep digits apart, transformers would merge them")
	}
	if t.bos, err = tokenID(f, toks, "tokenizer.ggml.bos_token_id", -1); err != nil {
		return nil, err
	}
	if t.eos, err = tokenID(f, toks, "tokenizer.ggml.eos_token_id", -1); err != nil {
		return nil, err
	}
	if t.pad, err = tokenID(f, toks, "tokenizer.ggml.padding_token_id", t.eos); err != nil {
		return nil, err
	}
	if t.unk, err = tokenID(f, toks, "tokenizer.ggml.unknown_token_id", -1); err != nil {
		return nil, err
	}
	if t.template, ok = f.String("tokenizer.chat_template"); ok {
		if t.system, err = parseChatTemplate(t.template); err != nil {
			return nil, fail("%v", err)
		}
	}
	return t, nil
}

// inAlphabet reports whether every character of s is in GPT-2's byte alphabet.
func inAlphabet(s string) bool {
	for _, r := range s {
		if _, ok := byteDec[r]; !ok {
			return false
		}
	}
	return true
}

// hfSpelling is the vocabulary key of a stored token, as transformers'
// byte_level_tokenizer writes it: the token itself when it is spelled in the
// byte alphabet, else its UTF-8 bytes respelled in that alphabet.
func hfSpelling(tok string) string {
	if inAlphabet(tok) {
		return tok
	}
	var sb strings.Builder
	for k := 0; k < len(tok); k++ {
		sb.WriteRune(byteEnc[tok[k]])
	}
	return sb.String()
}

func tokenID(f *gguf.File, toks []string, key string, def int) (int, error) {
	if _, ok := f.Meta[key]; !ok {
		return def, nil
	}
	v, ok := f.Uint(key)
	if !ok || v >= uint64(len(toks)) {
		return 0, fmt.Errorf("tokenize: %s: %s = %v: want an id below %d", f.Path(), key, f.Meta[key], len(toks))
	}
	return int(v), nil
}

func sortByLenDesc(ids []int, toks []string) {
	for i := 1; i < len(ids); i++ { // insertion sort: a few dozen ids, stable
		for j := i; j > 0 && len(toks[ids[j]]) > len(toks[ids[j-1]]); j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
}

// Encode returns the ids of text (no BOS/EOS added). Special tokens written
// in text, such as "<|im_start|>", become their ids.
func (t *GGUFTokenizer) Encode(text string) []int {
	var out []int
	plain := func(s string) {
		emit := func(p string) { out = t.model.encode(p, out) }
		if !t.digits {
			gpt2Split(s, emit)
			return
		}
		last := 0
		for i, r := range s {
			if unicode.IsNumber(r) {
				gpt2Split(s[last:i], emit)
				emit(s[i : i+utf8.RuneLen(r)])
				last = i + utf8.RuneLen(r)
			}
		}
		gpt2Split(s[last:], emit)
	}
	last := 0
	for i := 0; i < len(text); i++ {
		if id := t.addedAt(text, i); id >= 0 {
			plain(text[last:i])
			out = append(out, id)
			i += len(t.tokens[id]) - 1
			last = i + 1
		}
	}
	plain(text[last:])
	return out
}

// addedAt returns the id of the longest special token starting at text[i],
// or -1.
func (t *GGUFTokenizer) addedAt(text string, i int) int {
	for _, id := range t.added {
		if strings.HasPrefix(text[i:], t.tokens[id]) {
			return id
		}
	}
	return -1
}

// Decode returns the text of ids: the tokens' byte-alphabet characters
// turned back into bytes, invalid UTF-8 replaced by U+FFFD (as
// tokenizers' ByteLevel decoder does). With skipSpecial, control tokens
// (e.g. <|im_end|>) are left out. Ids outside [0, VocabSize()) are skipped.
func (t *GGUFTokenizer) Decode(ids []int, skipSpecial bool) string {
	var raw []byte
	for _, id := range ids {
		if id < 0 || id >= len(t.tokens) || (skipSpecial && t.control[id]) {
			continue
		}
		tok := t.tokens[id]
		start := len(raw)
		for _, r := range tok {
			b, ok := byteDec[r]
			if !ok { // not byte-alphabet: the token's own UTF-8
				raw = append(raw[:start], tok...)
				break
			}
			raw = append(raw, b)
		}
	}
	return string(appendLossy(nil, raw))
}

// BOS returns the beginning-of-sequence id (tokenizer.ggml.bos_token_id; -1 if absent).
func (t *GGUFTokenizer) BOS() int { return t.bos }

// EOS returns the end-of-sequence id (tokenizer.ggml.eos_token_id; -1 if absent).
func (t *GGUFTokenizer) EOS() int { return t.eos }

// PAD returns the padding id (tokenizer.ggml.padding_token_id, default EOS).
func (t *GGUFTokenizer) PAD() int { return t.pad }

// VocabSize returns V, the number of ids: every id is in [0, V).
func (t *GGUFTokenizer) VocabSize() int { return len(t.tokens) }

// Token returns the stored token of an id (in the byte alphabet).
func (t *GGUFTokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.tokens) {
		return "", false
	}
	return t.tokens[id], true
}

// IsControl reports whether id is a control (special) token such as
// <|im_end|>.
func (t *GGUFTokenizer) IsControl(id int) bool {
	return id >= 0 && id < len(t.control) && t.control[id]
}

// ChatTemplate returns tokenizer.chat_template as stored ("" if absent).
func (t *GGUFTokenizer) ChatTemplate() string { return t.template }

// chatML is the ChatML message line and generation prompt the template
// must contain (whitespace inside Jinja tags ignored); defaultSystem finds
// an optional default system message emitted when the first message is not
// a system one (SmolLM2's template).
var (
	chatMLMessage = squeeze(`{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}`)
	chatMLPrompt  = squeeze(`{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`)
	defaultSystem = regexp.MustCompile(`\{%-?\s*if\s+loop\.first\s+and\s+messages\[0\]\['role'\]\s*!=\s*'system'\s*-?%\}\s*\{\{-?\s*'(<\|im_start\|>system(?:\n|\\n)[^']*<\|im_end\|>(?:\n|\\n))'\s*-?\}\}\s*\{%-?\s*endif\s*-?%\}`)
)

// squeeze drops spaces and turns written "\n" escapes into newlines, so
// templates are compared regardless of spacing and escaping.
func squeeze(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, `\n`, "\n"), " ", "")
}

// parseChatTemplate checks that tmpl is a ChatML template and returns its
// default system message ("" when it has none). Only the ChatML family is
// understood; any other template is an error naming what is missing.
func parseChatTemplate(tmpl string) (string, error) {
	sq := squeeze(tmpl)
	if !strings.Contains(sq, chatMLMessage) || !strings.Contains(sq, chatMLPrompt) {
		return "", fmt.Errorf("tokenizer.chat_template is not a ChatML template (no \"<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\" line or no add_generation_prompt branch)")
	}
	if m := defaultSystem.FindStringSubmatch(tmpl); m != nil {
		return strings.ReplaceAll(m[1], `\n`, "\n"), nil
	}
	if strings.Contains(sq, "'system'") {
		return "", fmt.Errorf("tokenizer.chat_template: a ChatML template whose system-message logic is not understood")
	}
	return "", nil
}

// ChatPrompt renders one user message with the file's chat template, ready
// for the assistant's reply: the template's default system message when it
// has one (SmolLM2: "<|im_start|>system\nYou are a helpful AI assistant
// named SmolLM, trained by Hugging Face<|im_end|>\n"), then
// "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n" --
// what transformers' apply_chat_template([{"role": "user", ...}],
// add_generation_prompt=True) renders. LoadGGUFTokenizer has already
// refused a template outside the ChatML family; with no template at all
// the prompt is plain ChatML without a system message.
func (t *GGUFTokenizer) ChatPrompt(user string) string {
	return t.system + "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n"
}

// WriteHF is defined in gguf_hf.go.
