package gguf

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// smolPath is where tools/pretrained/get.sh SmolLM2-135M-Instruct puts the GGUF.
func smolPath(t *testing.T) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(here), "..", "pretrained", "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no %s (bash tools/pretrained/get.sh SmolLM2-135M-Instruct)", p)
	}
	return p
}

// The header of SmolLM2-135M-Instruct.Q4_1.gguf as the issue records it.
func TestSmolLM2Header(t *testing.T) {
	f, err := Open(smolPath(t))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || len(f.Tensors) != 272 {
		t.Fatalf("version %d, %d tensors; want 3, 272", f.Version, len(f.Tensors))
	}
	if a, _ := f.String("general.architecture"); a != "llama" {
		t.Errorf("architecture %q", a)
	}
	for key, want := range map[string]uint64{
		"llama.block_count": 30, "llama.embedding_length": 576, "llama.attention.head_count": 9,
		"llama.attention.head_count_kv": 3, "llama.feed_forward_length": 1536, "llama.context_length": 8192,
		"tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.padding_token_id": 2,
	} {
		if v, ok := f.Uint(key); !ok || v != want {
			t.Errorf("%s = %v, %v; want %d", key, v, ok, want)
		}
	}
	if v, _ := f.Float("llama.rope.freq_base"); v != 100000 {
		t.Errorf("rope base %v", v)
	}
	if v, _ := f.Float("llama.attention.layer_norm_rms_epsilon"); float32(v) != 1e-5 {
		t.Errorf("rms eps %v", v)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	merges, _ := f.Strings("tokenizer.ggml.merges")
	if len(toks) != 49152 || len(merges) != 48900 {
		t.Errorf("%d tokens, %d merges; want 49152, 48900", len(toks), len(merges))
	}
	count := map[DType]int{}
	for _, ti := range f.Tensors {
		count[ti.Type]++
	}
	if count[Q4_1] != 210 || count[F32] != 61 || count[Q8_0] != 1 {
		t.Errorf("type counts %v", count)
	}
	if _, ok := f.Tensor("output.weight"); ok {
		t.Error("output.weight present; the embeddings are tied")
	}
	emb, shape, err := f.Float32("token_embd.weight")
	if err != nil {
		t.Fatal(err)
	}
	if len(shape) != 2 || shape[0] != 49152 || shape[1] != 576 || len(emb) != 49152*576 {
		t.Fatalf("token_embd shape %v", shape)
	}
	_, shape, err = f.Float32("blk.0.attn_q.weight")
	if err != nil || len(shape) != 2 || shape[0] != 576 || shape[1] != 576 {
		t.Fatalf("blk.0.attn_q.weight %v %v", shape, err)
	}
}
