package export

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// The reflective reader of a selfrag run (Self-RAG, Asai et al. 2024; experiment/selfrag/selfrag.go) as
// transformers' GPT2LMHeadModel: the same layout as a rag reader (reader.go), its vocabulary
// grown by the seven reflection tokens (model.GrowVocab), which tokenizer.json,
// tokenizer_config.json and special_tokens_map.json list as added special tokens and
// ragtrain.json and README.md name with their ids. A selfrag run retrieves with BM25, so there
// is no retriever/ directory: its checkpoints hold a bi-encoder that the run never trains.

func init() { register(KindSelfRAG, exportSelfRAG) }

// KindSelfRAG is the config.json "kind" of selfrag checkpoints (model.RAGConfig with a
// reader whose vocabulary holds the reflection tokens once the reflective phase has begun).
const KindSelfRAG = "selfrag"

// SelfRAGDecoding is the reflective decoding policy of a selfrag run (recipe keys selfrag.*,
// experiment/selfrag/selfrag_decode.go), recorded in ragtrain.json so that a serving stack can decode
// as the run evaluated. The toml tags are the keys of the run's [selfrag] section it is read
// from (configs.DecodeSection: the section belongs to the kind, which imports export).
type SelfRAGDecoding struct {
	RowLength          int     `json:"row_length" toml:"row_length"`                   // L of one-passage sequences
	TopK               int     `json:"top_k" toml:"top_k"`                             // passages judged one by one
	RetrieveThreshold  float64 `json:"retrieve_threshold" toml:"retrieve_threshold"`   // retrieve when P(Retrieve)/(P(Retrieve)+P(No Retrieve)) >= this
	RelevanceThreshold float64 `json:"relevance_threshold" toml:"relevance_threshold"` // answer from a passage when P(Relevant)/(P(Relevant)+P(Irrelevant)) >= this
	SupportWeight      float64 `json:"support_weight" toml:"support_weight"`           // passage score = relevance + support_weight * support
}

// DefaultSelfRAGDecoding is the decoding policy of the [selfrag] defaults (the kind's defaults
// are built from it), recorded when a run's recipe cannot be read.
func DefaultSelfRAGDecoding() SelfRAGDecoding {
	return SelfRAGDecoding{RowLength: 48, TopK: 3, RetrieveThreshold: 0.5, RelevanceThreshold: 0.5, SupportWeight: 1}
}

// selfragPrompt documents the sequences of experiment/selfrag/selfrag_data.go.
const selfragPrompt = "[CLS] <ctx> passage </ctx> question (an empty passage: closed-book), then the target and [SEP]: " +
	"closed-book \"[Retrieve] | [No Retrieve] cloze answer\"; with a passage \"[Relevant] cloze answer [Fully supported] | [No support]\" " +
	"or \"[Irrelevant]\". Encode text without special tokens (add_special_tokens=False; the reflection tokens are matched in raw text) and prepend [CLS] (bos)"

// SelfRAG rebuilds a selfrag run's reader from its checkpoint as RAG does, with the reflection
// tokens' ids from the checkpoint's tokenizer.json (nil for a checkpoint saved before the
// reflective phase, whose reader is the plain one) and the decoding policy from the run's
// recipe (its defaults when the recipe is missing).
func (r *Run) SelfRAG() (*model.Reader, *tokenize.Tokenizer, ReaderMeta, []TokenID, SelfRAGDecoding, error) {
	rd, _, meta, _, err := r.readerModels(KindSelfRAG)
	if err != nil {
		return nil, nil, ReaderMeta{}, nil, SelfRAGDecoding{}, err
	}
	tok, err := r.Tokenizer()
	if err != nil {
		return nil, nil, ReaderMeta{}, nil, SelfRAGDecoding{}, err
	}
	refl, err := reflectionTokenIDs(filepath.Join(r.Checkpoint.Dir, TokenizerFile), rd.Cfg.Vocab, true)
	if err != nil {
		return nil, nil, ReaderMeta{}, nil, SelfRAGDecoding{}, err
	}
	dec := DefaultSelfRAGDecoding()
	if r.Recipe != nil {
		if err := configs.DecodeSection(r.Recipe, "selfrag", &dec); err != nil {
			return nil, nil, ReaderMeta{}, nil, SelfRAGDecoding{}, err
		}
	}
	return rd, tok, meta, refl, dec, nil
}

func exportSelfRAG(r *Run, dir string, o Options) error {
	rd, tok, meta, refl, dec, err := r.SelfRAG()
	if err != nil {
		return err
	}
	retrieval := "bm25"
	if r.Recipe != nil {
		retrieval = fmt.Sprintf("bm25 k1=%g b=%g", r.Recipe.Index.K1, r.Recipe.Index.B)
	}
	src := r.source()
	if err := writeSelfRAGReader(dir, rd, tok, meta, refl, dec, retrieval, &src); err != nil {
		return err
	}
	if o.Embeddings {
		fmt.Fprintf(o.Log, "export: no corpus embeddings for a selfrag run (it retrieves with BM25)\n")
	}
	what := "no reflection tokens: the checkpoint precedes the reflective phase, exported as a plain \"rag\" reader"
	if refl != nil {
		what = fmt.Sprintf("%d reflection tokens (ids %d..%d)", len(refl), refl[0].ID, refl[len(refl)-1].ID)
	}
	fmt.Fprintf(o.Log, "export: GPT-2 reader of a selfrag run (%d layers, H = %d, V = %d), %s, from %s\n",
		rd.Cfg.Layers, rd.Cfg.Hidden, rd.Cfg.Vocab, what, src.Checkpoint)
	return nil
}

// WriteSelfRAGReader exports a reflective reader alone into the new directory out: the GPT-2
// directory of WriteReader, ragtrain.json of kind "selfrag" with the reflection tokens' ids and
// the decoding policy, and README.md. The tokenizer must hold the seven reflection tokens as
// special tokens with rows in rd (tokenize.ReflectionTokens, model.GrowVocab). out must not
// exist or be empty; it appears complete or not at all.
func WriteSelfRAGReader(out string, rd *model.Reader, tok *tokenize.Tokenizer, meta ReaderMeta, dec SelfRAGDecoding) error {
	return writeDir(out, func(tmp string) error {
		if err := tok.Save(filepath.Join(tmp, TokenizerFile)); err != nil {
			return err
		}
		refl, err := reflectionTokenIDs(filepath.Join(tmp, TokenizerFile), rd.Cfg.Vocab, true)
		if err != nil {
			return err
		}
		if refl == nil {
			return fmt.Errorf("export: the tokenizer has none of the reflection tokens %s; write a plain reader with WriteReader",
				strings.Join(tokenize.ReflectionTokens(), ", "))
		}
		return writeSelfRAGReader(tmp, rd, tok, meta, refl, dec, "", nil)
	})
}

// writeSelfRAGReader writes the reader directory, ragtrain.json and (with reflection tokens)
// README.md into dir. Without reflection tokens (refl nil) the manifest is a plain rag
// reader's.
func writeSelfRAGReader(dir string, rd *model.Reader, tok *tokenize.Tokenizer, meta ReaderMeta, refl []TokenID,
	dec SelfRAGDecoding, retrieval string, src *Source) error {
	if err := writeReader(dir, rd, tok, meta); err != nil {
		return err
	}
	man := ReaderManifest{FormatVersion: ManifestFormat, Kind: KindRAG, Reader: ".", MaxLength: meta.MaxLength,
		MaxAnswerTokens: meta.MaxAnswerTokens, Prompt: readerPrompt, Retrieval: retrieval, Source: src}
	if refl != nil {
		man.Kind, man.Prompt, man.ReflectionTokens, man.Decoding = KindSelfRAG, selfragPrompt, refl, &dec
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, ManifestFile), man); err != nil {
		return err
	}
	if refl == nil {
		return nil
	}
	return atomicfile.WriteFile(filepath.Join(dir, ReadmeFile), []byte(selfragReadme(rd.Cfg, man)))
}

// selfragReadme is a selfrag export's README.md: the reflection tokens and their ids, the
// sequence layout and the decoding policy.
func selfragReadme(c model.EncoderConfig, man ReaderManifest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Self-RAG reader (ragtrain export)\n\n")
	fmt.Fprintf(&b, "A GPT2LMHeadModel (%d layers, n_embd %d, %d heads, n_positions %d, vocab_size %d) fine-tuned with\n",
		c.Layers, c.Hidden, c.Heads, c.MaxPosition, c.Vocab)
	fmt.Fprintf(&b, "Self-RAG's reflection tokens (Asai et al. 2024). `AutoModelForCausalLM.from_pretrained(DIR)` and\n")
	fmt.Fprintf(&b, "`PreTrainedTokenizerFast.from_pretrained(DIR)` load it; the reflection tokens are added special tokens:\n\n")
	fmt.Fprintf(&b, "| token | id |\n|---|---|\n")
	for _, t := range man.ReflectionTokens {
		fmt.Fprintf(&b, "| `%s` | %d |\n", t.Token, t.ID)
	}
	fmt.Fprintf(&b, "\nSequences: %s.\n\n", man.Prompt)
	if d := man.Decoding; d != nil {
		fmt.Fprintf(&b, "Decoding as the run evaluated it (ragtrain.json \"decoding\"): retrieve when P([Retrieve]) / (P([Retrieve]) + P([No Retrieve]))\n")
		fmt.Fprintf(&b, "after the closed-book question is >= %g; judge each of the top %d passages with P([Relevant]) / (P([Relevant]) + P([Irrelevant]));\n",
			d.RetrieveThreshold, d.TopK)
		fmt.Fprintf(&b, "answer greedily (at most %d tokens) from those >= %g and keep the best relevance + %g * support; none: answer closed-book.\n",
			man.MaxAnswerTokens, d.RelevanceThreshold, d.SupportWeight)
		fmt.Fprintf(&b, "One-passage sequences are at most %d tokens, any sequence at most %d.\n", d.RowLength, man.MaxLength)
	}
	if man.Retrieval != "" {
		fmt.Fprintf(&b, "\nRetrieval in the run: %s (no retriever is exported).\n", man.Retrieval)
	}
	if s := man.Source; s != nil {
		fmt.Fprintf(&b, "\nExported from %s (phase %s, step %d).\n", s.Checkpoint, s.Phase, s.Step)
	}
	return b.String()
}

// reflectionTokenIDs returns the reflection tokens of the tokenizer.json at path with their ids,
// in tokenize.ReflectionTokens order, or nil when it holds none of them (or path is ""). When
// strict (a selfrag reader), some but not all of them, one that is not a special token, or an
// id without a row in a reader of vocab ids is an error naming the file and the token; otherwise
// (any other reader, whose tokenizer may hold a token of that name by chance) it is nil.
func reflectionTokenIDs(path string, vocab int, strict bool) ([]TokenID, error) {
	if path == "" {
		return nil, nil
	}
	ids, err := reflectionTokenIDsStrict(path, vocab)
	if err != nil && !strict && errors.Is(err, errNotReflective) {
		return nil, nil
	}
	return ids, err
}

// errNotReflective marks reflectionTokenIDsStrict's errors about the tokens themselves (not
// about reading the file).
var errNotReflective = errors.New("not a complete set of reflection tokens")

func reflectionTokenIDsStrict(path string, vocab int) ([]TokenID, error) {
	added, err := readAddedTokens(path)
	if err != nil {
		return nil, err
	}
	byContent := map[string]savedAddedToken{}
	for _, a := range added {
		byContent[a.Content] = a
	}
	var out []TokenID
	var missing []string
	for _, name := range tokenize.ReflectionTokens() {
		a, ok := byContent[name]
		switch {
		case !ok:
			missing = append(missing, name)
			continue
		case !a.Special:
			return nil, fmt.Errorf("%s: the reflection token %s (id %d) is not a special token: %w", path, name, a.ID, errNotReflective)
		case a.ID < 0:
			return nil, fmt.Errorf("%s: the reflection token %s has negative id %d", path, name, a.ID)
		case a.ID >= vocab:
			return nil, fmt.Errorf("%s: the reflection token %s has id %d, but the reader has %d rows: its vocabulary was not grown by the reflection tokens (%w)", path, name, a.ID, vocab, errNotReflective)
		}
		out = append(out, TokenID{Token: name, ID: a.ID})
	}
	if len(out) == 0 {
		return nil, nil
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: has %d of the 7 reflection tokens, lacks %s (%w)", path, len(out), strings.Join(missing, ", "), errNotReflective)
	}
	return out, nil
}

// checkManifestReflection checks that a selfrag export's ragtrain.json lists the reflection
// tokens its tokenizer.json holds (have), id for id.
func checkManifestReflection(path string, have []TokenID) error {
	var man ReaderManifest
	if err := readJSON(path, &man, false); err != nil {
		return err
	}
	if man.Kind != KindSelfRAG {
		return nil
	}
	if have == nil {
		return fmt.Errorf("%s: kind %q, but the export's %s has no reflection tokens", path, KindSelfRAG, TokenizerFile)
	}
	if slices.Equal(man.ReflectionTokens, have) {
		return nil
	}
	ids := map[string]int{}
	for _, t := range have {
		ids[t.Token] = t.ID
	}
	for _, t := range man.ReflectionTokens {
		if id, ok := ids[t.Token]; !ok {
			return fmt.Errorf("%s: reflection_tokens gives %s id %d, %s lacks it", path, t.Token, t.ID, TokenizerFile)
		} else if id != t.ID {
			return fmt.Errorf("%s: reflection_tokens gives %s id %d, %s has it at id %d", path, t.Token, t.ID, TokenizerFile, id)
		}
	}
	return fmt.Errorf("%s: reflection_tokens lists %d tokens, %s holds %d", path, len(man.ReflectionTokens), TokenizerFile, len(have))
}
