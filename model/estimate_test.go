package model

import (
	"math"
	"testing"
)

// TestParamCountMatchesModel: the estimate counts exactly the parameters the model allocates,
// bi-encoder, cross-encoder and reader.
func TestParamCountMatchesModel(t *testing.T) {
	count := func(ps []*Param) int {
		n := 0
		for _, p := range ps {
			n += p.Value.Shape().TotalSize()
		}
		return n
	}
	for _, cfg := range []EncoderConfig{
		{Encoder: EncoderBow, Vocab: 50, Hidden: 8},
		{Encoder: EncoderTransformer, Vocab: 50, Hidden: 8, Layers: 3, Heads: 2, FFN: 12, MaxPosition: 16},
	} {
		for _, shared := range []bool{true, false} {
			m, err := NewBiEncoder(cfg, shared, 1)
			if err != nil {
				t.Fatal(err)
			}
			n := count(m.Params())
			towers := 2
			if shared {
				towers = 1
			}
			if got := int(ParamCount(cfg)) * towers; got != n {
				t.Errorf("%s shared=%v: ParamCount gives %d, the model has %d", cfg.Encoder, shared, got, n)
			}
			if e := EstimateTraining(cfg, TrainingShape{Towers: towers, Tokens: 64, Length: 16}); e.Params != int64(4*n) || e.Optimizer != int64(12*n) || e.Activations <= 0 {
				t.Errorf("%s: estimate %+v for %d parameters", cfg.Encoder, e, n)
			}
		}
	}
	cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 50, Hidden: 8, Layers: 3, Heads: 2, FFN: 12, MaxPosition: 16}
	ce, err := NewCrossEncoder(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The cross-encoder adds to one tower its pooler (H·H + H) and classifier (H + 1), which
	// ParamCount leaves out (a lower estimate): 2156 + 81.
	if n, got := count(ce.Params()), int(ParamCount(cfg)); n != got+81 {
		t.Errorf("cross-encoder: ParamCount gives %d, the model has %d", got, n)
	}
	cfg.Causal = true
	r, err := NewReader(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n, got := count(r.Params()), int(ParamCount(cfg)); n != got {
		t.Errorf("reader: ParamCount gives %d, the model has %d", got, n)
	}
}

// TestEstimateTrainingByHand: a small reader and bi-encoder against figures computed by hand.
func TestEstimateTrainingByHand(t *testing.T) {
	// V = 50, H = 8, 3 layers, 2 heads, FFN 12, 16 positions. Per layer 4·(8·8+8) + 2·8·12 + 12
	// + 8 + 4·8 = 532; BERT 50·8 + 16·8 + 2·8 (token types) + 2·8 (embedding norm) + 3·532 =
	// 2156; GPT-2 drops the token types, has ln_f: 2140.
	bert := EncoderConfig{Encoder: EncoderTransformer, Vocab: 50, Hidden: 8, Layers: 3, Heads: 2, FFN: 12, MaxPosition: 16}
	gpt := bert
	gpt.Arch = ArchGPT2
	if ParamCount(bert) != 2156 || ParamCount(gpt) != 2140 {
		t.Fatalf("ParamCount: bert %v (want 2156), gpt2 %v (want 2140)", ParamCount(bert), ParamCount(gpt))
	}
	// Reader, 64 tokens of 16, 10 LM rows: per token and layer 6·8 + 2·12 + 2·16 = 104, per
	// token 3·8 + 3·104 = 336, 64·336 = 21504 values, LM head 10·(50 + 8) = 580: 22084 values.
	got := EstimateTraining(gpt, TrainingShape{Towers: 1, Tokens: 64, Length: 16, LMRows: 10})
	if want := (MemoryEstimate{Params: 4 * 2140, Optimizer: 12 * 2140, Activations: 4 * 22084}); got != want {
		t.Errorf("reader: %+v, want %+v", got, want)
	}
	if got.Total() != 4*2140+12*2140+4*22084 {
		t.Errorf("Total %d", got.Total())
	}
	// Two bow towers (V·H + H·H + H = 472 each), 10 tokens: 2·8 values a token.
	bow := EncoderConfig{Encoder: EncoderBow, Vocab: 50, Hidden: 8}
	if got, want := EstimateTraining(bow, TrainingShape{Towers: 2, Tokens: 10, Length: 5}), (MemoryEstimate{Params: 4 * 944, Optimizer: 12 * 944, Activations: 4 * 160}); got != want {
		t.Errorf("bow: %+v, want %+v", got, want)
	}
	// The README's bench step (all-MiniLM-L6-v2, 32 x 32 + 64 x 256 tokens): 3.6 GB measured.
	mini := EncoderConfig{Encoder: EncoderTransformer, Vocab: 30522, Hidden: 384, Layers: 6, Heads: 12, FFN: 1536, MaxPosition: 512}
	if e := EstimateTraining(mini, TrainingShape{Towers: 1, Tokens: 32*32 + 64*256, Length: 256}).Total(); e < 3.0e9 || e > 4.5e9 {
		t.Errorf("MiniLM retriever step: estimated %.2f GB, measured 3.6 GB", float64(e)/1e9)
	}
	huge := EncoderConfig{Encoder: EncoderTransformer, Vocab: 1 << 30, Hidden: 1 << 30, Layers: 1 << 30, Heads: 1, FFN: 1 << 30, MaxPosition: 1 << 30}
	if e := EstimateTraining(huge, TrainingShape{Towers: 2, Tokens: 1 << 60, Length: 1 << 30, LMRows: 1 << 60}); e.Total() != math.MaxInt64 {
		t.Errorf("huge config: total %d, want saturated", e.Total())
	}
}

// TestLlamaEstimate: LlamaParamCount and LlamaLoRACount equal the parameters NewLlama and
// NewLlamaLoRA really make (tied and untied), and EstimateLlamaTraining's figures for a tiny
// config are the hand-computed ones: H 8, 2 layers, 2 heads of 4 with 1 KV head (kv 4), FFN 12,
// V 50, tied: 50·8 + 8 + 2·(16 + 128 + 64 + 288) = 1400 parameters; LoRA rank 2 on q and down:
// 2·(2·16 + 2·20) = 144 values; 10 tokens of length 5: 10·(2·(48 + 36 + 10) + 100) = 2880
// activation values.
func TestLlamaEstimate(t *testing.T) {
	cfg := LlamaConfig{Hidden: 8, Layers: 2, Heads: 2, KVHeads: 1, FFN: 12, Vocab: 50, RopeTheta: 10000, RMSEps: 1e-5, MaxPosition: 16, TieEmbeddings: true}
	lora := LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q_proj", "down_proj"}}
	if got := LlamaParamCount(cfg); got != 1400 {
		t.Errorf("LlamaParamCount = %v, want 1400", got)
	}
	if got := LlamaLoRACount(cfg, lora); got != 144 {
		t.Errorf("LlamaLoRACount = %v, want 144", got)
	}
	for _, tie := range []bool{true, false} {
		c := cfg
		c.TieEmbeddings = tie
		m, err := NewLlama(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewLlamaLoRA(m, lora, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []struct {
			what      string
			ps        []*Param
			estimated float64
		}{{"base", m.Params(), LlamaParamCount(c)}, {"lora", l.Params(), LlamaLoRACount(c, lora)}} {
			n := 0
			for _, p := range x.ps {
				n += p.Value.Shape().TotalSize()
			}
			if float64(n) != x.estimated {
				t.Errorf("tied %v, %s: %d parameters, estimated %v", tie, x.what, n, x.estimated)
			}
		}
	}
	full := EstimateLlamaTraining(cfg, nil, 10, 5)
	if want := (MemoryEstimate{Params: 4 * 1400, Optimizer: 12 * 1400, Activations: 4 * 2880}); full != want {
		t.Errorf("full: %+v, want %+v", full, want)
	}
	adapted := EstimateLlamaTraining(cfg, &lora, 10, 5)
	if want := (MemoryEstimate{Params: 4 * (1400 + 144), Optimizer: 12 * 144, Activations: 4 * 2880}); adapted != want {
		t.Errorf("lora: %+v, want %+v", adapted, want)
	}
}
