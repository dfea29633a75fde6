package export

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// The reader of a rag run as transformers' GPT2LMHeadModel (see the package documentation for
// the directory layout). model.Reader is GPT-2's architecture with the exact GELU, so the
// export is the same function: tools/parity/parity.py checks it.

func init() { register(KindRAG, exportRAG) }

// KindRAG is the config.json "kind" of rag checkpoints (a reader and a bi-encoder).
const KindRAG = "rag"

// File names of a reader export besides the Hugging Face ones of hfbert.go.
const (
	GenerationConfigFile = "generation_config.json"
	RetrieverDir         = "retriever" // the rag run's bi-encoder, a bi-encoder export
	modelTypeGPT2        = "gpt2"
)

// ReaderManifest is ragtrain.json of a rag export: the reader at the root, the retriever in
// retriever/ (itself a bi-encoder export with its own ragtrain.json), and how prompts are built.
type ReaderManifest struct {
	FormatVersion int    `json:"format_version"`
	Kind          string `json:"kind"`                // "rag"
	Reader        string `json:"reader"`              // "."
	Retriever     string `json:"retriever,omitempty"` // "retriever"; none for selfrag
	// MaxLength is L, the longest sequence the reader was trained on (prompt and answer).
	MaxLength int `json:"max_length"`
	// MaxAnswerTokens is the most tokens greedy decoding generates before eos ([SEP]).
	MaxAnswerTokens int `json:"max_answer_tokens"`
	// Prompt is the token layout of a reader prompt; generation continues it.
	Prompt string `json:"prompt"`

	// Self-RAG exports (kind "selfrag", selfrag.go) only.
	// ReflectionTokens are the seven reflection tokens (tokenize.ReflectionTokens order) with
	// their ids: the same ids in tokenizer.json and rows of transformer.wte.weight.
	ReflectionTokens []TokenID `json:"reflection_tokens,omitempty"`
	// Retrieval names what retrieved the reader's passages in its run, e.g. "bm25 k1=1.2 b=0.75".
	Retrieval string `json:"retrieval,omitempty"`
	// Decoding is the run's reflective decoding policy (recipe keys selfrag.*).
	Decoding *SelfRAGDecoding `json:"decoding,omitempty"`

	Source *Source `json:"source,omitempty"`
}

// TokenID is a token and its id in tokenizer.json.
type TokenID struct {
	Token string `json:"token"`
	ID    int    `json:"id"`
}

// readerPrompt documents the prompt layout of ragreader/reader.go.
const readerPrompt = "[CLS] <ctx> passage </ctx> question cloze -> answer [SEP]: encode the text without special tokens (add_special_tokens=False) and prepend [CLS] (bos)"

// ReaderMeta is what a reader export records besides the weights and the tokenizer.
type ReaderMeta struct {
	MaxLength       int // L, reader.max_length
	MaxAnswerTokens int // reader.max_answer_tokens
}

// RAG rebuilds a rag run's reader and bi-encoder from its checkpoint: the architectures from
// config.json, every parameter from model.safetensors (names and shapes must match exactly),
// max_answer_tokens from the run's recipe (its default when the recipe is missing). A checkpoint
// of the earlier BERT-style (post-LN) reader is refused: GPT-2 does not compute it.
func (r *Run) RAG() (*model.Reader, *model.BiEncoder, ReaderMeta, BiEncoderMeta, error) {
	return r.readerModels(KindRAG)
}

// readerModels is RAG for a checkpoint of the given kind (rag or selfrag: both write model.RAGConfig).
func (r *Run) readerModels(kind string) (*model.Reader, *model.BiEncoder, ReaderMeta, BiEncoderMeta, error) {
	var c model.RAGConfig
	cfgPath := filepath.Join(r.Checkpoint.Dir, checkpoints.ConfigFile)
	if err := r.Checkpoint.DecodeConfig(&c); err != nil {
		return nil, nil, ReaderMeta{}, BiEncoderMeta{}, err
	}
	if c.Kind != kind {
		return nil, nil, ReaderMeta{}, BiEncoderMeta{}, fmt.Errorf("%s: kind %q, want %q", cfgPath, c.Kind, kind)
	}
	if c.Reader.Arch != model.ArchGPT2 {
		return nil, nil, ReaderMeta{}, BiEncoderMeta{}, fmt.Errorf("%s: reader.Arch = %q: a reader trained before the GPT-2 architecture (post-LN blocks) has no serving layout; train the recipe again", cfgPath, c.Reader.Arch)
	}
	rd, err := model.NewReader(c.Reader, 0)
	if err != nil {
		return nil, nil, ReaderMeta{}, BiEncoderMeta{}, fmt.Errorf("%s: %w", cfgPath, err)
	}
	enc, err := model.NewBiEncoder(c.Encoder, c.SharedTowers, 0)
	if err != nil {
		return nil, nil, ReaderMeta{}, BiEncoderMeta{}, fmt.Errorf("%s: %w", cfgPath, err)
	}
	if err := loadExactly(r.Checkpoint, append(rd.Params(), enc.Params()...)); err != nil {
		return nil, nil, ReaderMeta{}, BiEncoderMeta{}, err
	}
	meta := ReaderMeta{MaxLength: c.ReaderMaxLength, MaxAnswerTokens: configs.Defaults().Reader.MaxAnswerTokens}
	if r.Recipe != nil {
		meta.MaxAnswerTokens = r.Recipe.Reader.MaxAnswerTokens
	}
	return rd, enc, meta, BiEncoderMeta{Similarity: c.Similarity, Temperature: c.Temperature, MaxLength: c.MaxLength}, nil
}

func exportRAG(r *Run, dir string, o Options) error {
	rd, enc, meta, emeta, err := r.RAG()
	if err != nil {
		return err
	}
	tok, err := r.Tokenizer()
	if err != nil {
		return err
	}
	if err := writeReader(dir, rd, tok, meta); err != nil {
		return err
	}
	sub := filepath.Join(dir, RetrieverDir)
	if err := os.Mkdir(sub, 0o755); err != nil {
		return err
	}
	if _, err := writeBiEncoder(sub, enc, tok, emeta, nil); err != nil {
		return err
	}
	src := r.source()
	if err := atomicfile.WriteJSON(filepath.Join(dir, ManifestFile), ReaderManifest{
		FormatVersion: ManifestFormat, Kind: KindRAG, Reader: ".", Retriever: RetrieverDir,
		MaxLength: meta.MaxLength, MaxAnswerTokens: meta.MaxAnswerTokens, Prompt: readerPrompt, Source: &src,
	}); err != nil {
		return err
	}
	if o.Embeddings {
		fmt.Fprintf(o.Log, "export: no corpus embeddings for a rag run (Options.Embeddings is for retriever runs)\n")
	}
	fmt.Fprintf(o.Log, "export: GPT-2 reader (%d layers, H = %d, V = %d) and %s retriever from %s\n",
		rd.Cfg.Layers, rd.Cfg.Hidden, rd.Cfg.Vocab, enc.Cfg.Encoder, src.Checkpoint)
	return nil
}

// WriteReader exports a reader alone into the new directory out as a GPT2LMHeadModel
// directory with its tokenizer files and ragtrain.json. out must not exist or be empty; it
// appears complete or not at all.
func WriteReader(out string, rd *model.Reader, tok *tokenize.Tokenizer, meta ReaderMeta) error {
	return writeDir(out, func(tmp string) error {
		if err := writeReader(tmp, rd, tok, meta); err != nil {
			return err
		}
		return atomicfile.WriteJSON(filepath.Join(tmp, ManifestFile), ReaderManifest{
			FormatVersion: ManifestFormat, Kind: KindRAG, Reader: ".", MaxLength: meta.MaxLength,
			MaxAnswerTokens: meta.MaxAnswerTokens, Prompt: readerPrompt,
		})
	})
}

// gpt2Config is transformers.GPT2Config's config.json. Pointer fields are optional when
// reading a foreign checkpoint; GPT2Config's defaults apply when they are absent.
type gpt2Config struct {
	Architectures              []string `json:"architectures,omitempty"`
	ModelType                  string   `json:"model_type"`
	VocabSize                  int      `json:"vocab_size"`
	NEmbd                      int      `json:"n_embd"`
	NLayer                     int      `json:"n_layer"`
	NHead                      int      `json:"n_head"`
	NInner                     *int     `json:"n_inner"`
	NPositions                 int      `json:"n_positions"`
	NCtx                       int      `json:"n_ctx,omitempty"`
	ActivationFunction         *string  `json:"activation_function,omitempty"`
	ResidPdrop                 float64  `json:"resid_pdrop"`
	EmbdPdrop                  float64  `json:"embd_pdrop"`
	AttnPdrop                  float64  `json:"attn_pdrop"`
	LayerNormEpsilon           *float64 `json:"layer_norm_epsilon,omitempty"`
	InitializerRange           float64  `json:"initializer_range"`
	ScaleAttnWeights           *bool    `json:"scale_attn_weights,omitempty"`
	ScaleAttnByInverseLayerIdx bool     `json:"scale_attn_by_inverse_layer_idx"`
	ReorderAndUpcastAttn       bool     `json:"reorder_and_upcast_attn"`
	AddCrossAttention          bool     `json:"add_cross_attention"`
	TieWordEmbeddings          *bool    `json:"tie_word_embeddings,omitempty"`
	BosTokenID                 *int     `json:"bos_token_id,omitempty"`
	EosTokenID                 *int     `json:"eos_token_id,omitempty"`
	PadTokenID                 *int     `json:"pad_token_id,omitempty"`
	UseCache                   bool     `json:"use_cache"`
	TorchDtype                 string   `json:"torch_dtype,omitempty"`
}

// generationConfig is generation_config.json: greedy decoding of at most MaxNewTokens tokens.
type generationConfig struct {
	BosTokenID   int  `json:"bos_token_id"`
	EosTokenID   int  `json:"eos_token_id"`
	PadTokenID   int  `json:"pad_token_id"`
	MaxNewTokens int  `json:"max_new_tokens"`
	DoSample     bool `json:"do_sample"`
	NumBeams     int  `json:"num_beams"`
}

// readerTokenizerConfig is tokenizer_config.json of a reader: the WordPiece tokenizer.json read
// by PreTrainedTokenizerFast, with [CLS] as bos and [SEP] as eos.
type readerTokenizerConfig struct {
	TokenizerClass            string   `json:"tokenizer_class"`
	ModelMaxLength            int      `json:"model_max_length"`
	PaddingSide               string   `json:"padding_side"`
	CleanUpTokenizationSpaces bool     `json:"clean_up_tokenization_spaces"`
	AdditionalSpecialTokens   []string `json:"additional_special_tokens,omitempty"`
	// AddedTokensDecoder is transformers' id -> added token table (every added token of
	// tokenizer.json, the five BERT ones included), keyed by the decimal id.
	AddedTokensDecoder map[string]addedTokenDecoder `json:"added_tokens_decoder,omitempty"`
	readerSpecialTokens
}

// addedTokenDecoder is one entry of tokenizer_config.json's added_tokens_decoder (transformers'
// AddedToken fields).
type addedTokenDecoder struct {
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// savedAddedToken is an entry of tokenizer.json's added_tokens.
type savedAddedToken struct {
	ID      int    `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

// readAddedTokens reads the added_tokens of a tokenizer.json.
func readAddedTokens(path string) ([]savedAddedToken, error) {
	var saved struct {
		AddedTokens []savedAddedToken `json:"added_tokens"`
	}
	if err := readJSON(path, &saved, false); err != nil {
		return nil, err
	}
	return saved.AddedTokens, nil
}

// readerSpecialTokens is special_tokens_map.json of a reader.
type readerSpecialTokens struct {
	BosToken                string   `json:"bos_token"`
	EosToken                string   `json:"eos_token"`
	PadToken                string   `json:"pad_token"`
	UnkToken                string   `json:"unk_token"`
	CLSToken                string   `json:"cls_token"`
	SepToken                string   `json:"sep_token"`
	MaskToken               string   `json:"mask_token"`
	AdditionalSpecialTokens []string `json:"additional_special_tokens,omitempty"`
}

// newGPT2Config describes a reader as GPT2LMHeadModel.
func newGPT2Config(c model.EncoderConfig, tok *tokenize.Tokenizer) gpt2Config {
	return gpt2Config{
		Architectures: []string{"GPT2LMHeadModel"}, ModelType: modelTypeGPT2,
		VocabSize: c.Vocab, NEmbd: c.Hidden, NLayer: c.Layers, NHead: c.Heads, NInner: ptr(c.FFN),
		NPositions: c.MaxPosition, NCtx: c.MaxPosition, ActivationFunction: ptr("gelu"),
		ResidPdrop: c.Dropout, EmbdPdrop: c.Dropout, AttnPdrop: c.Dropout,
		LayerNormEpsilon: ptr(model.GPT2LayerNormEps), InitializerRange: 0.02, ScaleAttnWeights: ptr(true),
		TieWordEmbeddings: ptr(true), BosTokenID: ptr(tok.CLSID()), EosTokenID: ptr(tok.SEPID()), PadTokenID: ptr(tok.PadID()),
		UseCache: true, TorchDtype: "float32",
	}
}

// readerConfig checks that c describes a GPT-2 this toolkit computes exactly (exact GELU,
// layer_norm_epsilon 1e-5, scaled attention, tied embeddings, no cross-attention) and converts it.
func (c gpt2Config) readerConfig(path string) (model.EncoderConfig, error) {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%s: %s = %v, but this toolkit's reader needs %s", path, field, v, want)
	}
	act := "gelu_new" // GPT2Config's default
	if c.ActivationFunction != nil {
		act = *c.ActivationFunction
	}
	switch {
	case act != "gelu":
		return model.EncoderConfig{}, bad("activation_function", fmt.Sprintf("%q", act), `"gelu" (exact erf GELU; GPT-2's default "gelu_new" is the tanh approximation)`)
	case c.LayerNormEpsilon != nil && *c.LayerNormEpsilon != model.GPT2LayerNormEps:
		return model.EncoderConfig{}, bad("layer_norm_epsilon", *c.LayerNormEpsilon, fmt.Sprint(model.GPT2LayerNormEps))
	case c.ScaleAttnWeights != nil && !*c.ScaleAttnWeights:
		return model.EncoderConfig{}, bad("scale_attn_weights", false, "true")
	case c.ScaleAttnByInverseLayerIdx:
		return model.EncoderConfig{}, bad("scale_attn_by_inverse_layer_idx", true, "false")
	case c.AddCrossAttention:
		return model.EncoderConfig{}, bad("add_cross_attention", true, "false")
	case c.TieWordEmbeddings != nil && !*c.TieWordEmbeddings:
		return model.EncoderConfig{}, bad("tie_word_embeddings", false, "true (the reader's output layer is its word embedding matrix)")
	}
	ffn := 4 * c.NEmbd
	if c.NInner != nil {
		ffn = *c.NInner
	}
	cfg := model.EncoderConfig{
		Encoder: model.EncoderTransformer, Vocab: c.VocabSize, Hidden: c.NEmbd, Layers: c.NLayer, Heads: c.NHead,
		FFN: ffn, MaxPosition: c.NPositions, Dropout: c.ResidPdrop, Causal: true, Arch: model.ArchGPT2,
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// writeReader writes the GPT-2 directory of a reader into dir (everything but ragtrain.json).
func writeReader(dir string, rd *model.Reader, tok *tokenize.Tokenizer, meta ReaderMeta) error {
	if tok.VocabSize() != rd.Cfg.Vocab {
		return fmt.Errorf("export: the tokenizer has %d tokens, the reader's vocabulary is %d", tok.VocabSize(), rd.Cfg.Vocab)
	}
	if meta.MaxLength <= 0 || meta.MaxLength > rd.Cfg.MaxPosition || meta.MaxAnswerTokens <= 0 {
		return fmt.Errorf("export: reader max_length %d (positions %d), max_answer_tokens %d", meta.MaxLength, rd.Cfg.MaxPosition, meta.MaxAnswerTokens)
	}
	ts, err := readerTensors(rd)
	if err != nil {
		return err
	}
	if err := writeHFModel(dir, ts, newGPT2Config(rd.Cfg, tok)); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, GenerationConfigFile), generationConfig{
		BosTokenID: tok.CLSID(), EosTokenID: tok.SEPID(), PadTokenID: tok.PadID(), MaxNewTokens: meta.MaxAnswerTokens, NumBeams: 1,
	}); err != nil {
		return err
	}
	return writeReaderTokenizer(dir, tok, meta.MaxLength)
}

// writeReaderTokenizer writes tokenizer.json, tokenizer_config.json and special_tokens_map.json;
// the added special tokens of tokenizer.json beyond BERT's five (<ctx>, </ctx>, Self-RAG's
// reflection tokens) become additional_special_tokens, and every added token is listed with its
// id in tokenizer_config.json's added_tokens_decoder.
func writeReaderTokenizer(dir string, tok *tokenize.Tokenizer, maxLength int) error {
	path := filepath.Join(dir, TokenizerFile)
	if err := tok.Save(path); err != nil {
		return err
	}
	added, err := readAddedTokens(path)
	if err != nil {
		return err
	}
	name := func(id int) string { s, _ := tok.Token(id); return s }
	sp := readerSpecialTokens{BosToken: name(tok.CLSID()), EosToken: name(tok.SEPID()), PadToken: name(tok.PadID()),
		UnkToken: name(tok.UnkID()), CLSToken: name(tok.CLSID()), SepToken: name(tok.SEPID()), MaskToken: name(tok.MaskID())}
	bert := map[string]bool{sp.CLSToken: true, sp.SepToken: true, sp.PadToken: true, sp.UnkToken: true, sp.MaskToken: true}
	decoder := map[string]addedTokenDecoder{}
	for _, a := range added {
		if a.Special && !bert[a.Content] {
			sp.AdditionalSpecialTokens = append(sp.AdditionalSpecialTokens, a.Content)
		}
		decoder[fmt.Sprint(a.ID)] = addedTokenDecoder{Content: a.Content, Special: a.Special}
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, TokenizerConfigFile), readerTokenizerConfig{
		TokenizerClass: "PreTrainedTokenizerFast", ModelMaxLength: maxLength, PaddingSide: "right",
		CleanUpTokenizationSpaces: true, AdditionalSpecialTokens: sp.AdditionalSpecialTokens,
		AddedTokensDecoder: decoder, readerSpecialTokens: sp,
	}); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(dir, SpecialTokensFile), sp)
}

// gpt2Param is where one GPT-2 tensor comes from: the reader parameters (after the "reader."
// prefix) concatenated along GPT-2's output dimension, transposed from [out,in] to Conv1D's
// [in,out] when transpose is set.
type gpt2Param struct {
	name      string   // GPT2LMHeadModel name
	params    []string // reader parameter names without the prefix
	transpose bool
}

// gpt2Params lists the GPT2LMHeadModel tensors of a reader of that many layers, in state-dict
// order; lm_head.weight is tied to transformer.wte.weight and is not among them.
func gpt2Params(layers int) []gpt2Param {
	ps := []gpt2Param{
		{name: "transformer.wte.weight", params: []string{"embeddings.word"}},
		{name: "transformer.wpe.weight", params: []string{"embeddings.position"}},
	}
	for i := 0; i < layers; i++ {
		h, l := fmt.Sprintf("transformer.h.%d.", i), fmt.Sprintf("layer.%d.", i)
		ps = append(ps,
			gpt2Param{name: h + "ln_1.weight", params: []string{l + "ln_1.weight"}},
			gpt2Param{name: h + "ln_1.bias", params: []string{l + "ln_1.bias"}},
			gpt2Param{name: h + "attn.c_attn.weight", params: []string{l + "attn.q.weight", l + "attn.k.weight", l + "attn.v.weight"}, transpose: true},
			gpt2Param{name: h + "attn.c_attn.bias", params: []string{l + "attn.q.bias", l + "attn.k.bias", l + "attn.v.bias"}},
			gpt2Param{name: h + "attn.c_proj.weight", params: []string{l + "attn.out.weight"}, transpose: true},
			gpt2Param{name: h + "attn.c_proj.bias", params: []string{l + "attn.out.bias"}},
			gpt2Param{name: h + "ln_2.weight", params: []string{l + "ln_2.weight"}},
			gpt2Param{name: h + "ln_2.bias", params: []string{l + "ln_2.bias"}},
			gpt2Param{name: h + "mlp.c_fc.weight", params: []string{l + "ffn.in.weight"}, transpose: true},
			gpt2Param{name: h + "mlp.c_fc.bias", params: []string{l + "ffn.in.bias"}},
			gpt2Param{name: h + "mlp.c_proj.weight", params: []string{l + "ffn.out.weight"}, transpose: true},
			gpt2Param{name: h + "mlp.c_proj.bias", params: []string{l + "ffn.out.bias"}},
		)
	}
	return append(ps,
		gpt2Param{name: "transformer.ln_f.weight", params: []string{"ln_f.weight"}},
		gpt2Param{name: "transformer.ln_f.bias", params: []string{"ln_f.bias"}})
}

// readerTensors returns the reader's parameters as GPT2LMHeadModel tensors.
func readerTensors(rd *model.Reader) ([]checkpoints.Tensor, error) {
	var ts []checkpoints.Tensor
	for _, gp := range gpt2Params(rd.Cfg.Layers) {
		var parts [][]float32
		var rows, cols int // of each part, [out,in] (or [out] for a vector: cols = 0)
		for _, n := range gp.params {
			p := rd.Param(model.PrefixReader + "." + n)
			if p == nil {
				return nil, fmt.Errorf("export: the reader has no parameter %s.%s", model.PrefixReader, n)
			}
			s := p.Value.Shape()
			rows, cols = s[0], 0
			if len(s) == 2 {
				cols = s[1]
			}
			parts = append(parts, p.Value.Data().([]float32))
		}
		t := checkpoints.Tensor{Name: gp.name}
		switch {
		case cols == 0: // vectors: concatenate
			t.Shape = []int{rows * len(parts)}
			for _, d := range parts {
				t.Data = append(t.Data, d...)
			}
		case !gp.transpose: // embeddings
			t.Shape, t.Data = []int{rows, cols}, append([]float32(nil), parts[0]...)
		default: // Conv1D [in, out·len(parts)]: column k·rows+o of row i is part k's [o,i]
			n := rows * len(parts)
			t.Shape, t.Data = []int{cols, n}, make([]float32, cols*n)
			for k, d := range parts {
				for o := 0; o < rows; o++ {
					for i := 0; i < cols; i++ {
						t.Data[i*n+k*rows+o] = d[o*cols+i]
					}
				}
			}
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// ReaderDir is a reader on disk, opened by OpenReader.
type ReaderDir struct {
	Dir    string
	Layout string // LayoutExport, LayoutHuggingFace or LayoutRun
	// Reader is the architecture the directory describes (Arch "gpt2").
	Reader model.EncoderConfig
	// Tokenizer is the path of the directory's tokenizer.json, "" when it has none.
	Tokenizer string
	// ReflectionTokens are Self-RAG's seven reflection tokens with their ids when the tokenizer
	// holds all seven as special tokens with rows in the reader (a selfrag export or run), nil
	// otherwise; for a selfrag export or run, anything short of that is an error.
	ReflectionTokens []TokenID
	// Ignored lists tensors skipped by design, as "file: name": GPT-2's attention-mask buffers
	// (h.N.attn.bias, h.N.attn.masked_bias) and an lm_head.weight equal to the word embeddings.
	Ignored []string

	set    *tensorSet
	prefix string // "reader." for a run's checkpoint, "" for GPT-2 names
}

// InitReader opens dir (OpenReader) and copies its tensors into rd (Init).
func InitReader(rd *model.Reader, dir string) (*ReaderDir, error) {
	return openInit(OpenReader, rd, dir)
}

// OpenReader reads a reader directory: a rag or selfrag export (ragtrain.json of kind "rag" or
// "selfrag"; the reader is its root), a Hugging Face GPT-2 directory (config.json with
// model_type "gpt2" and a single model.safetensors with GPT2LMHeadModel names, or GPT2Model's
// without "transformer."; F16, BF16 and F64 are converted to float32), or a rag or selfrag run
// or checkpoint directory. The config must describe a GPT-2 this toolkit computes:
// activation_function "gelu", layer_norm_epsilon 1e-5, tied embeddings (readerConfig lists the
// checks). When the tokenizer holds the reflection tokens, ReflectionTokens lists them; they
// must all be special tokens with rows in the reader, and a selfrag export's ragtrain.json must
// list the same ids (an error names the token and both ids otherwise).
func OpenReader(dir string) (*ReaderDir, error) {
	if err := checkUnfinished(dir); err != nil {
		return nil, err
	}
	if exists(filepath.Join(dir, checkpoints.LatestFile)) || exists(filepath.Join(dir, checkpoints.TrainerFile)) {
		return openRunReader(dir)
	}
	layout, kind := LayoutHuggingFace, ""
	if path := filepath.Join(dir, ManifestFile); exists(path) {
		var man ReaderManifest
		if err := readJSON(path, &man, false); err != nil {
			return nil, err
		}
		if man.FormatVersion != ManifestFormat {
			return nil, fmt.Errorf("%s: format_version %d, this build reads %d", path, man.FormatVersion, ManifestFormat)
		}
		if man.Kind != KindRAG && man.Kind != KindSelfRAG {
			return nil, fmt.Errorf("%s: kind %q; a reader is read from a %q or %q export", path, man.Kind, KindRAG, KindSelfRAG)
		}
		if man.Reader != "." {
			return nil, fmt.Errorf("%s: reader = %q, want \".\"", path, man.Reader)
		}
		layout, kind = LayoutExport, man.Kind
	}
	cfgPath := filepath.Join(dir, ConfigFile)
	if !exists(cfgPath) {
		return nil, fmt.Errorf("%s: not a reader directory: no %s (GPT-2), %s or %s (run)", dir, ConfigFile, checkpoints.LatestFile, checkpoints.TrainerFile)
	}
	var c gpt2Config
	if err := readJSON(cfgPath, &c, false); err != nil {
		return nil, err
	}
	if c.ModelType != modelTypeGPT2 {
		return nil, fmt.Errorf("%s: model_type %q; a reader is read from %q", cfgPath, c.ModelType, modelTypeGPT2)
	}
	cfg, err := c.readerConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	set, ignored, err := readGPT2Tensors(filepath.Join(dir, ModelFile))
	if err != nil {
		return nil, err
	}
	d := &ReaderDir{Dir: dir, Layout: layout, Reader: cfg, Tokenizer: fileIfExists(filepath.Join(dir, TokenizerFile)),
		Ignored: ignored, set: set}
	if d.ReflectionTokens, err = reflectionTokenIDs(d.Tokenizer, cfg.Vocab, kind == KindSelfRAG); err != nil {
		return nil, err
	}
	if layout == LayoutExport {
		if err := checkManifestReflection(filepath.Join(dir, ManifestFile), d.ReflectionTokens); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func openRunReader(dir string) (*ReaderDir, error) {
	r, err := OpenRun(dir)
	if err != nil {
		return nil, err
	}
	if r.Kind != KindRAG && r.Kind != KindSelfRAG {
		return nil, fmt.Errorf("%s: holds a %s, not a %s or %s reader", r.Checkpoint.Dir, r.Kind, KindRAG, KindSelfRAG)
	}
	var c model.RAGConfig
	if err := r.Checkpoint.DecodeConfig(&c); err != nil {
		return nil, err
	}
	if c.Reader.Arch != model.ArchGPT2 {
		return nil, fmt.Errorf("%s: reader.Arch = %q: a reader trained before the GPT-2 architecture cannot initialise one", filepath.Join(r.Checkpoint.Dir, checkpoints.ConfigFile), c.Reader.Arch)
	}
	set := checkpointSet(r.Checkpoint, model.PrefixReader+".")
	d := &ReaderDir{Dir: dir, Layout: LayoutRun, Reader: c.Reader, set: set, prefix: model.PrefixReader + ".",
		Tokenizer: fileIfExists(filepath.Join(r.Checkpoint.Dir, checkpoints.TokenizerFile))}
	if d.ReflectionTokens, err = reflectionTokenIDs(d.Tokenizer, c.Reader.Vocab, r.Kind == KindSelfRAG); err != nil {
		return nil, err
	}
	return d, nil
}

// readGPT2Tensors reads a GPT-2 model.safetensors under GPT2LMHeadModel names (adding
// "transformer." to GPT2Model's), converting to float32. The attention-mask buffers are
// skipped; lm_head.weight is skipped when it equals transformer.wte.weight bit for bit and an
// error otherwise (the reader ties its output layer to the word embeddings).
func readGPT2Tensors(path string) (*tensorSet, []string, error) {
	raw, err := readFloatTensors(path)
	if err != nil {
		return nil, nil, err
	}
	prefixed := false
	for _, t := range raw {
		prefixed = prefixed || strings.HasPrefix(t.Name, "transformer.")
	}
	set := newTensorSet(path)
	var ignored []string
	var head *checkpoints.Tensor
	for i, t := range raw {
		name := t.Name
		if !prefixed && name != "lm_head.weight" {
			name = "transformer." + name
		}
		switch {
		case name == "lm_head.weight":
			head = &raw[i]
			continue
		case strings.HasPrefix(name, "transformer.h.") && (strings.HasSuffix(name, ".attn.bias") || strings.HasSuffix(name, ".attn.masked_bias")):
			ignored = append(ignored, path+": "+t.Name)
			continue
		}
		t.Name = name
		set.add(t)
	}
	if head != nil {
		wte, ok := set.byName["transformer.wte.weight"]
		if !ok || !sameFloats(head.Data, wte.Data) {
			return nil, nil, fmt.Errorf("%s: lm_head.weight differs from transformer.wte.weight; the reader ties its output layer to the word embeddings", path)
		}
		ignored = append(ignored, path+": lm_head.weight (tied)")
	}
	return set, ignored, nil
}

// readFloatTensors reads every tensor of a safetensors file as float32.
func readFloatTensors(path string) ([]checkpoints.Tensor, error) {
	raw, _, err := checkpoints.ReadSafetensorsRaw(path)
	if err != nil {
		return nil, err
	}
	out := make([]checkpoints.Tensor, 0, len(raw))
	for _, r := range raw {
		if r.DType == checkpoints.BOOL || r.DType == checkpoints.U8 {
			out = append(out, checkpoints.Tensor{Name: r.Name, Shape: r.Shape}) // mask buffers; skipped by name
			continue
		}
		data, err := toFloat32(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, checkpoints.Tensor{Name: r.Name, Shape: r.Shape, Data: data})
	}
	return out, nil
}

func sameFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(a[i] != a[i] && b[i] != b[i]) {
			return false
		}
	}
	return true
}

// Init copies the directory's tensors into rd, bit for bit. The number of heads must match
// (it has no tensor of its own); every GPT-2 tensor of rd's architecture must be in the
// directory with its shape, and every tensor of the directory must be one of them (Ignored
// aside); otherwise the error is a *MismatchError naming each missing, unexpected and wrongly
// shaped tensor with both shapes, and rd may be partly overwritten.
func (d *ReaderDir) Init(rd *model.Reader) error {
	if rd.Cfg.Heads != d.Reader.Heads {
		return fmt.Errorf("%s has %d attention heads; the reader has %d (reader.heads)", d.Dir, d.Reader.Heads, rd.Cfg.Heads)
	}
	var mm MismatchError
	if d.prefix != "" { // a run's checkpoint: our names
		for _, p := range rd.Params() {
			d.set.fill(p, p.Name, &mm)
		}
	} else {
		for _, gp := range gpt2Params(rd.Cfg.Layers) {
			d.fillGPT2(rd, gp, &mm)
		}
	}
	d.set.leftovers(&mm)
	return mm.err(d.Dir)
}

// fillGPT2 copies one GPT-2 tensor into the reader parameters it fuses (the inverse of
// readerTensors), or records why it cannot: a wrong shape names the tensor, its shape and the
// shape the reader needs for it.
func (d *ReaderDir) fillGPT2(rd *model.Reader, gp gpt2Param, mm *MismatchError) {
	var ps []*model.Param
	for _, n := range gp.params {
		ps = append(ps, rd.Param(model.PrefixReader+"."+n))
	}
	s := ps[0].Value.Shape()
	rows, cols := s[0], 0
	if len(s) == 2 {
		cols = s[1]
	}
	var want []int
	switch {
	case cols == 0:
		want = []int{rows * len(ps)}
	case !gp.transpose:
		want = []int{rows, cols}
	default:
		want = []int{cols, rows * len(ps)}
	}
	param := ps[0].Name
	if len(ps) > 1 {
		param = strings.TrimSuffix(strings.TrimSuffix(ps[0].Name, ".weight"), ".bias")
		param = strings.TrimSuffix(param, ".q") + ".{q,k,v}"
	}
	t, ok := d.set.byName[gp.name]
	if !ok {
		mm.Missing = append(mm.Missing, TensorRef{File: d.set.file, Name: gp.name, Shape: want, Param: param})
		return
	}
	if d.set.used == nil {
		d.set.used = map[string]bool{}
	}
	d.set.used[gp.name] = true
	if !slices.Equal(t.Shape, want) {
		mm.WrongShape = append(mm.WrongShape, ShapeMismatch{File: d.set.file, Name: gp.name, Param: param, Have: t.Shape, Want: want})
		return
	}
	switch {
	case cols == 0:
		for k, p := range ps {
			copy(p.Value.Data().([]float32), t.Data[k*rows:(k+1)*rows])
		}
	case !gp.transpose:
		copy(ps[0].Value.Data().([]float32), t.Data)
	default:
		n := rows * len(ps)
		for k, p := range ps {
			dst := p.Value.Data().([]float32)
			for o := 0; o < rows; o++ {
				for i := 0; i < cols; i++ {
					dst[o*cols+i] = t.Data[i*n+k*rows+o]
				}
			}
		}
	}
}
