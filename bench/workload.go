package bench

import "github.com/ragtrain/ragtrain/model"

// Shapes are the sizes of every workload: those of the recipes (retriever-cranfield and
// retriever-cranfield-transformer, the reranker of ../shared/refs, the reader of rag-garden).
type Shapes struct {
	Vocab       int     `json:"vocab"`       // V of the retriever and cross-encoder
	Hidden      int     `json:"hidden"`      // H
	Layers      int     `json:"layers"`      // Transformer blocks
	Heads       int     `json:"heads"`       // attention heads
	FFN         int     `json:"ffn"`         // feed-forward width
	Dropout     float64 `json:"dropout"`     // while training
	Temperature float64 `json:"temperature"` // InfoNCE temperature (cosine similarity)
	WD          float64 `json:"weight_decay"`
	Clip        float64 `json:"grad_clip"`
	LR          float64 `json:"lr"`

	L         int `json:"L"`          // retriever sequence length
	BiB       int `json:"bi_b"`       // queries per retriever step (each with a positive and a hard negative)
	BiBatches int `json:"bi_batches"` // distinct retriever batches, used in turn

	EncodeB int `json:"encode_b"` // passages per encoding batch
	EncodeN int `json:"encode_n"` // passages encoded per timed run

	CrossL       int `json:"cross_l"`       // pair sequence length
	CrossLists   int `json:"cross_lists"`   // lists per cross-encoder step
	CrossK       int `json:"cross_k"`       // passages per list
	CrossBatches int `json:"cross_batches"` // distinct cross-encoder batches
	ScoreB       int `json:"score_b"`       // pairs per scoring batch
	ScoreN       int `json:"score_n"`       // pairs scored per timed run

	ReaderVocab int `json:"reader_vocab"`
	ReaderL     int `json:"reader_l"`
	ReaderB     int `json:"reader_b"` // rows per reader step; every next token is a target

	Depth int `json:"depth"` // BM25 hits per query
}

// DefaultShapes are the recipes' sizes.
func DefaultShapes() Shapes {
	return Shapes{
		Vocab: 8000, Hidden: 128, Layers: 2, Heads: 4, FFN: 512, Dropout: 0.1, Temperature: 0.05, WD: 0.01, Clip: 1, LR: 3e-4,
		L: 64, BiB: 32, BiBatches: 4,
		EncodeB: 64, EncodeN: 512,
		CrossL: 128, CrossLists: 8, CrossK: 8, CrossBatches: 4, ScoreB: 64, ScoreN: 256,
		ReaderVocab: 2000, ReaderL: 32, ReaderB: 64,
		Depth: 1000,
	}
}

func (s Shapes) transformer(vocab, maxPos int) model.EncoderConfig {
	return model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: vocab, Hidden: s.Hidden, Layers: s.Layers,
		Heads: s.Heads, FFN: s.FFN, MaxPosition: maxPos, Dropout: s.Dropout}
}

func (s Shapes) bow() model.EncoderConfig {
	return model.EncoderConfig{Encoder: model.EncoderBow, Vocab: s.Vocab, Hidden: s.Hidden, Dropout: s.Dropout}
}

// Peers.
const (
	PeerPyTorch = "pytorch"
	PeerLucene  = "lucene"
)

// Workload is one timed unit of work, done by us and by a peer on the same inputs.
type Workload struct {
	Name  string // as on the command line and in the peers' --workload
	Title string
	Unit  string // what the throughput counts
	Peer  string // PeerPyTorch or PeerLucene
	// Target is the least ratio ours/peer of throughput (0: none) and TargetMem whether
	// our peak memory must not exceed the peer's.
	Target    float64
	TargetMem bool
	// GEMMFLOPs is the matrix-product work of one timed run (2 flops per multiply-add); nil for
	// BM25. SciFactFLOPs is that of the pretrained-shape workloads, which set SciFact.
	GEMMFLOPs    func(Shapes) float64
	SciFactFLOPs func(*SciFactData) float64
	// SciFact workloads read scifact.json (PrepareSciFact), SmolLM2 ones smollm2.json
	// (PrepareSmolLM2; their PyTorch peer is bench/pytorch/smollm2_peer.py, transformers on the
	// same GGUF), the others data.json (Prepare).
	SciFact, SmolLM2 bool
	// LlamaCpp: llama.cpp (llama-cpp-python on the GGUF) runs beside the PyTorch peer.
	LlamaCpp bool
	// Compile: also run PyTorch with torch.compile; Encode: also run sentence-transformers'
	// encode() (passages in, vectors out, its own tokenizing and batching).
	Compile, Encode bool
}

// Workloads lists every workload in the order the table prints them.
func Workloads() []Workload {
	return []Workload{
		{Name: "bi-transformer-step", Title: "retriever training step, Transformer", Unit: "pairs", Peer: PeerPyTorch, Target: 1, TargetMem: true,
			GEMMFLOPs: func(s Shapes) float64 { return 3 * (s.transformerFwd(3*s.BiB, s.L) + s.simFwd()) }},
		{Name: "bi-bow-step", Title: "retriever training step, bow", Unit: "pairs", Peer: PeerPyTorch,
			GEMMFLOPs: func(s Shapes) float64 { return 3 * (2*float64(3*s.BiB*s.Hidden*s.Hidden) + s.simFwd()) }},
		{Name: "encode-transformer", Title: "passage encoding, Transformer", Unit: "passages", Peer: PeerPyTorch, Target: 1,
			GEMMFLOPs: func(s Shapes) float64 { return s.transformerFwd(s.EncodeN, s.L) }},
		{Name: "encode-bow", Title: "passage encoding, bow", Unit: "passages", Peer: PeerPyTorch,
			GEMMFLOPs: func(s Shapes) float64 { return 2 * float64(s.EncodeN*s.Hidden*s.Hidden) }},
		{Name: "cross-step", Title: "cross-encoder training step (listwise)", Unit: "pairs", Peer: PeerPyTorch,
			GEMMFLOPs: func(s Shapes) float64 {
				n := s.CrossLists * s.CrossK
				return 3 * (s.transformerFwd(n, s.CrossL) + 2*float64(n*s.Hidden))
			}},
		{Name: "cross-score", Title: "cross-encoder scoring", Unit: "pairs", Peer: PeerPyTorch,
			GEMMFLOPs: func(s Shapes) float64 { return s.transformerFwd(s.ScoreN, s.CrossL) + 2*float64(s.ScoreN*s.Hidden) }},
		{Name: "reader-step", Title: "reader LM training step (causal)", Unit: "rows", Peer: PeerPyTorch,
			GEMMFLOPs: func(s Shapes) float64 {
				m := s.ReaderB * (s.ReaderL - 1)
				return 3 * (s.transformerFwd(s.ReaderB, s.ReaderL) + 2*float64(m*s.Hidden*s.ReaderVocab))
			}},
		{Name: "minilm-train", Title: "retriever training step, all-MiniLM-L6-v2 shapes", Unit: "queries", Peer: PeerPyTorch, SciFact: true, Compile: true,
			SciFactFLOPs: func(d *SciFactData) float64 {
				s := d.Shapes
				return 3 * (s.MiniLM.fwd(s.BiB, s.QueryL) + s.MiniLM.fwd(2*s.BiB, s.PassageL) + 2*float64(s.BiB*2*s.BiB*s.MiniLM.Hidden))
			}},
		{Name: "minilm-encode", Title: "passage encoding, all-MiniLM-L6-v2 shapes, dynamic padding", Unit: "passages", Peer: PeerPyTorch, SciFact: true, Compile: true, Encode: true,
			SciFactFLOPs: func(d *SciFactData) float64 { return d.Encode.flops(d.Shapes.MiniLM) }},
		{Name: "bge-small-encode", Title: "passage encoding, bge-small-en-v1.5 shapes, dynamic padding", Unit: "passages", Peer: PeerPyTorch, SciFact: true, Compile: true, Encode: true,
			SciFactFLOPs: func(d *SciFactData) float64 { return d.Encode.flops(d.Shapes.BGESmall) }},
		{Name: "minilm-cross-train", Title: "cross-encoder training step, all-MiniLM-L6-v2 shapes (listwise)", Unit: "pairs", Peer: PeerPyTorch, SciFact: true, Compile: true,
			SciFactFLOPs: func(d *SciFactData) float64 {
				s := d.Shapes
				n := s.CrossLists * s.CrossK
				return 3 * crossFwd(s.MiniLM, n, s.CrossL)
			}},
		{Name: "minilm-cross-score", Title: "cross-encoder scoring, all-MiniLM-L6-v2 shapes", Unit: "pairs", Peer: PeerPyTorch, SciFact: true, Compile: true,
			SciFactFLOPs: func(d *SciFactData) float64 { return crossFwd(d.Shapes.MiniLM, d.Shapes.ScoreN, d.Shapes.CrossL) }},
		{Name: SmolLM2TrainFull, Title: "SmolLM2-135M training step, full", Unit: "sequences", Peer: PeerPyTorch, Target: 1, TargetMem: true, SmolLM2: true},
		{Name: SmolLM2TrainLoRA, Title: "SmolLM2-135M training step, LoRA", Unit: "sequences", Peer: PeerPyTorch, Target: 1, TargetMem: true, SmolLM2: true},
		{Name: SmolLM2GenB1, Title: "SmolLM2-135M generation, batch 1, KV cache", Unit: "tokens", Peer: PeerPyTorch, Target: 1, TargetMem: true, SmolLM2: true, LlamaCpp: true},
		{Name: SmolLM2GenB8, Title: "SmolLM2-135M generation, batch 8, KV cache", Unit: "tokens", Peer: PeerPyTorch, Target: 1, TargetMem: true, SmolLM2: true, LlamaCpp: true},
		{Name: "bm25-index", Title: "BM25 indexing, Cranfield", Unit: "docs", Peer: PeerLucene},
		{Name: "bm25-query", Title: "BM25 querying, 225 queries, top 1000", Unit: "queries", Peer: PeerLucene, Target: 1},
	}
}

// transformerFwd is the matrix-product work of the Transformer encoder's forward pass on n
// sequences of l tokens (T = n·l): per layer the Q, K, V and output projections (8·T·H²), the
// feed-forward layer (4·T·H·F) and the attention scores and context (4·n·l²·H).
func (s Shapes) transformerFwd(n, l int) float64 {
	return transformerFwd(s.Layers, s.Hidden, s.FFN, n, l)
}

func transformerFwd(layers, hidden, ffn, n, l int) float64 {
	t, h, f := float64(n*l), float64(hidden), float64(ffn)
	return float64(layers) * (8*t*h*h + 4*t*h*f + 4*float64(n)*float64(l*l)*h)
}

// simFwd is the work of the B x 2B score matrix of a retriever step.
func (s Shapes) simFwd() float64 { return 2 * float64(s.BiB*2*s.BiB*s.Hidden) }

// Find returns the workload of that name.
func Find(name string) (Workload, bool) {
	for _, w := range Workloads() {
		if w.Name == name {
			return w, true
		}
	}
	return Workload{}, false
}

// crossFwd is the forward work of a cross-encoder on n pairs of l tokens: the encoder, BERT's
// tanh pooler on [CLS] (2·n·H²) and the H -> 1 head.
func crossFwd(m ModelShape, n, l int) float64 {
	h := float64(m.Hidden)
	return m.fwd(n, l) + 2*float64(n)*h*h + 2*float64(n)*h
}

// flops is the forward work of encoding r by its plan: every batch padded to its L.
func (r Ragged) flops(m ModelShape) float64 {
	f := 0.0
	for _, b := range r.Batches {
		f += m.fwd(len(b.Rows), b.L)
	}
	return f
}
