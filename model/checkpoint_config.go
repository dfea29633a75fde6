package model

// The config.json of each checkpoint kind: one type per kind, written by the run that trains
// the model (package experiment) and read back by the same type wherever the checkpoint is
// used (package export, a resumed run). Field names are the JSON keys of every checkpoint
// written so far; change them only with a decoder for the old ones.

// Kinds of checkpoint, the "kind" of their config.json.
const (
	KindBiEncoder    = "bi-encoder"    // BiEncoderConfig: retriever runs
	KindCrossEncoder = "cross-encoder" // CrossEncoderConfig: reranker runs
	KindRAG          = "rag"           // RAGConfig: rag, replug and realm runs
	KindSelfRAG      = "selfrag"       // RAGConfig of a reflective reader: selfrag runs
)

// BiEncoderConfig is the config.json of a bi-encoder checkpoint.
type BiEncoderConfig struct {
	Kind         string        `json:"kind"` // KindBiEncoder
	Encoder      EncoderConfig `json:"encoder"`
	SharedTowers bool          `json:"shared_towers"`
	Similarity   string        `json:"similarity"` // "cosine" or "dot" (losses.ParseSimilarity)
	Temperature  float64       `json:"temperature"`
	MaxLength    int           `json:"max_length"`
}

// CrossEncoderConfig is the config.json of a cross-encoder (reranker) checkpoint.
type CrossEncoderConfig struct {
	Kind      string        `json:"kind"` // KindCrossEncoder
	Encoder   EncoderConfig `json:"encoder"`
	MaxLength int           `json:"max_length"` // L of [CLS] query [SEP] passage [SEP]
	// Loss is the training loss ("pairwise", "listwise", "pointwise").
	Loss string `json:"loss"`
	// FirstStage is what produced the training candidates: "bm25", the dense retriever's
	// checkpoint directory, or the TREC run file.
	FirstStage             string `json:"first_stage"`
	TrainDepth             int    `json:"train_depth"` // N: candidates per training query
	ListSize               int    `json:"list_size"`   // K: passages per training list
	DropAboveFirstPositive bool   `json:"drop_above_first_positive"`
	// PretrainSteps are the cropping-list steps (pretrain.steps) the model took before its
	// supervised ones; InitFrom is the model.init_from directory its weights started from
	// ("" for the seed's initialisation).
	PretrainSteps int    `json:"pretrain_steps"`
	InitFrom      string `json:"init_from,omitempty"`
	// PretrainDepth and PretrainWindow are rerank.pretrain_depth and rerank.pretrain_window.
	PretrainDepth  int `json:"pretrain_depth"`
	PretrainWindow int `json:"pretrain_window"`
	// MatchInit and MatchWordScale are rerank.match_init and rerank.match_word_scale, the
	// term-matching prior of the initialisation (not used with InitFrom).
	MatchInit      float64 `json:"match_init"`
	MatchWordScale float64 `json:"match_word_scale"`
}

// RAGConfig is the config.json of a rag checkpoint (kinds rag, replug, realm and selfrag): the
// reader's and the bi-encoder's architectures.
type RAGConfig struct {
	Kind            string        `json:"kind"` // KindRAG, KindSelfRAG, or the recipe kind
	Reader          EncoderConfig `json:"reader"`
	Encoder         EncoderConfig `json:"encoder"`
	SharedTowers    bool          `json:"shared_towers"`
	Similarity      string        `json:"similarity"`
	Temperature     float64       `json:"temperature"`
	MaxLength       int           `json:"max_length"`
	ReaderMaxLength int           `json:"reader_max_length"`
}
