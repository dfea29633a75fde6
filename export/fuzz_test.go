package export

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
)

// addNPYSeeds adds the shipped .npy files and issue 19's hostile headers.
func addNPYSeeds(f *testing.F) {
	for _, name := range []string{"f4_2x3.npy", "f4_5.npy", "f4_0x4.npy", "f4_scalar.npy", "i8_2x4.npy"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }", make([]byte, 8)))
	f.Add(npyFile("{'descr': '<i8', 'fortran_order': False, 'shape': (9223372036854775807, 9223372036854775807), }", make([]byte, 8)))
}

// npyRoundTrip checks a loaded array: its value count is the product of its shape, and the bytes
// the writer would produce read back to the same shape and the same values.
func npyRoundTrip[T any](t *testing.T, descr string, shape []int, vals []T, size int, enc func([]byte, T) []byte,
	dec func(path, descr string, shape []int, data []byte) ([]T, []int, error), same func(a, b T) bool) {
	n := 1
	for _, d := range shape {
		n *= d // cannot overflow: the reader checked the product against the data
	}
	if len(vals) != n {
		t.Fatalf("shape %v holds %d values, %d loaded", shape, n, len(vals))
	}
	if err := checkShape("x.npy", shape, len(vals)); err != nil {
		t.Fatalf("the writer refuses a loaded shape: %v", err)
	}
	file := npyHeader(descr, shape)
	if len(file)%npyAlign != 0 {
		t.Fatalf("header of %d bytes is not aligned", len(file))
	}
	for _, v := range vals {
		file = enc(file, v)
	}
	d2, s2, raw, err := parseNPY("written.npy", file)
	if err != nil {
		t.Fatalf("written file does not read back: %v", err)
	}
	back, s3, err := dec("written.npy", d2, s2, raw)
	if err != nil || !slices.Equal(s3, shape) || len(back) != len(vals) || len(raw) != size*len(vals) {
		t.Fatalf("write then read: shape %v, %d values, %v; want %v, %d", s3, len(back), err, shape, len(vals))
	}
	for i := range vals {
		if !same(vals[i], back[i]) {
			t.Fatalf("value %d changed in write then read", i)
		}
	}
}

// FuzzNPYFloat32 reads arbitrary bytes as a float32 .npy file (see npyRoundTrip).
func FuzzNPYFloat32(f *testing.F) {
	addNPYSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		descr, shape, raw, err := parseNPY("x.npy", data)
		if err != nil {
			return
		}
		vals, shape, err := decodeNPYFloat32("x.npy", descr, shape, raw)
		if err != nil {
			return
		}
		npyRoundTrip(t, "<f4", shape, vals, 4,
			func(b []byte, v float32) []byte { return binary.LittleEndian.AppendUint32(b, math.Float32bits(v)) },
			decodeNPYFloat32, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })
	})
}

// FuzzNPYInt64 reads arbitrary bytes as an int64 .npy file (see npyRoundTrip).
func FuzzNPYInt64(f *testing.F) {
	addNPYSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		descr, shape, raw, err := parseNPY("x.npy", data)
		if err != nil {
			return
		}
		vals, shape, err := decodeNPYInt64("x.npy", descr, shape, raw)
		if err != nil {
			return
		}
		npyRoundTrip(t, "<i8", shape, vals, 8,
			func(b []byte, v int64) []byte { return binary.LittleEndian.AppendUint64(b, uint64(v)) },
			decodeNPYInt64, func(a, b int64) bool { return a == b })
	})
}

// writeSeedDirs writes the config files of a tiny transformer tower (config.json and the
// sentence-transformers files) and of a tiny bow tower, as the exporter writes them, and returns
// their directories. No model is built: its worker goroutines would slow the fuzzing.
func writeSeedDirs(f *testing.F) (bert, bow string) {
	bert, bow = filepath.Join(f.TempDir(), "bert"), filepath.Join(f.TempDir(), "bow")
	cfg := tinyConfig(model.EncoderTransformer, 150)
	bc, err := newBertConfig(cfg, 0)
	if err != nil {
		f.Fatal(err)
	}
	for _, err := range []error{
		os.MkdirAll(bert, 0o755), os.MkdirAll(bow, 0o755),
		atomicfile.WriteJSON(filepath.Join(bert, ConfigFile), bc),
		writeSentenceTransformers(bert, cfg, 16, "cosine"),
		atomicfile.WriteJSON(filepath.Join(bow, ConfigFile), bowConfig{ModelType: modelTypeBow, VocabSize: 150, HiddenSize: 4, Pooling: model.PoolingMean}),
	} {
		if err != nil {
			f.Fatal(err)
		}
	}
	return bert, bow
}

func readSeed(f *testing.F, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzHFConfig reads arbitrary bytes as a tower's config.json (model_type "bert" or
// "ragtrain-bow"). A config that loads must validate, and a BERT one must read back to the
// same encoder once written as this package writes it.
func FuzzHFConfig(f *testing.F) {
	bert, bow := writeSeedDirs(f)
	f.Add(readSeed(f, filepath.Join(bert, ConfigFile)))
	f.Add(readSeed(f, filepath.Join(bow, ConfigFile)))
	f.Add([]byte(`{"model_type":"bert","vocab_size":10000000000,"hidden_size":4,"num_hidden_layers":1,"num_attention_heads":1,"intermediate_size":4,"max_position_embeddings":8}`))
	dir, out := f.TempDir(), f.TempDir() // reused: a worker runs one input at a time
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, ConfigFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, isBert, _, err := readTowerConfig(dir)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of several lines: %q", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("loaded config does not validate: %v", err)
		}
		if isBert != (cfg.Encoder == model.EncoderTransformer) {
			t.Fatalf("model_type and encoder %q disagree", cfg.Encoder)
		}
		if !isBert {
			return
		}
		bc, err := newBertConfig(cfg, 0)
		if err != nil {
			t.Fatalf("a loaded BERT config cannot be written: %v", err)
		}
		b, err := json.Marshal(bc) // as atomicfile.WriteJSON writes it, without its fsync
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, ConfigFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		back, _, _, err := readTowerConfig(out)
		if err != nil || back != cfg {
			t.Fatalf("write then read: %+v, %v; want %+v", back, err, cfg)
		}
	})
}

// FuzzSentenceTransformers reads arbitrary 1_Pooling/config.json, config_sentence_transformers.json
// and sentence_bert_config.json. What loads must be a pooling, similarity and maximum length this
// toolkit uses, and must read back the same once written.
func FuzzSentenceTransformers(f *testing.F) {
	bert, _ := writeSeedDirs(f)
	f.Add(readSeed(f, filepath.Join(bert, PoolingConfigFile)), readSeed(f, filepath.Join(bert, STConfigFile)), readSeed(f, filepath.Join(bert, SentenceBertFile)))
	f.Add([]byte(`{"pooling_mode_cls_token":true}`), []byte(`{"similarity_fn_name":"euclidean"}`), []byte(`{"max_seq_length":-7}`))
	dir, out := f.TempDir(), f.TempDir() // reused: a worker runs one input at a time
	if err := os.MkdirAll(filepath.Join(dir, "1_Pooling"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pooling, st, sb []byte) {
		for name, b := range map[string][]byte{PoolingConfigFile: pooling, STConfigFile: st, SentenceBertFile: sb} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p, errP := readPooling(dir)
		s, errS := readSimilarity(dir)
		n, errN := readMaxLength(dir)
		if errP == nil && p != model.PoolingMean && p != model.PoolingCLS {
			t.Fatalf("pooling %q loaded", p)
		}
		if errS == nil && s != "" && s != "cosine" && s != "dot" {
			t.Fatalf("similarity %q loaded", s)
		}
		if errN == nil && n < 0 {
			t.Fatalf("max_seq_length %d loaded", n)
		}
		if errP != nil || errS != nil || errN != nil || n == 0 {
			return
		}
		if err := writeSentenceTransformers(out, model.EncoderConfig{Hidden: 4, Pooling: p}, n, s); err != nil {
			t.Fatal(err)
		}
		p2, e1 := readPooling(out)
		s2, e2 := readSimilarity(out)
		n2, e3 := readMaxLength(out)
		if p2 != p || s2 != s || n2 != n || e1 != nil || e2 != nil || e3 != nil {
			t.Fatalf("write then read: %q %q %d (%v %v %v), want %q %q %d", p2, s2, n2, e1, e2, e3, p, s, n)
		}
	})
}

// FuzzBertTensors gives the BERT importer arbitrary tensor names (one per line; dtypes and
// shapes vary with the line) as they come out of a model.safetensors (FuzzSafetensors fuzzes
// the file format itself). What loads must hold float32 tensors under unique names without
// the "bert." prefix, each with prod(shape) values, and skip only the documented non-encoder
// tensors; a collision after stripping must be an error, not a lost tensor.
func FuzzBertTensors(f *testing.F) {
	f.Add("embeddings.word_embeddings.weight\nencoder.layer.0.output.LayerNorm.bias")
	f.Add("bert.embeddings.word_embeddings.weight\nembeddings.word_embeddings.weight\nbert.pooler.dense.bias\ncls.predictions.bias")
	f.Add("bert.embeddings.position_ids\nbert.encoder.layer.0.attention.self.query.weight\nbert.\nbert.bert.x")
	dtypes := []checkpoints.DType{checkpoints.F32, checkpoints.F16, checkpoints.BF16, checkpoints.F64}
	f.Fuzz(func(t *testing.T, names string) {
		var raw []checkpoints.RawTensor
		seen := map[string]bool{}
		for i, name := range strings.Split(names, "\n") {
			if name == "" || seen[name] { // the safetensors reader refuses these
				continue
			}
			seen[name] = true
			dt := dtypes[i%len(dtypes)]
			shape := []int{i % 3, 2}
			raw = append(raw, checkpoints.RawTensor{Name: name, DType: dt, Shape: shape, Data: make([]byte, shape[0]*2*dt.Size())})
		}
		set, ignored, err := tensorSetOf("model.safetensors", raw, true)
		if err != nil {
			if !strings.Contains(err.Error(), "once the \"bert.\" prefix is removed") {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if len(set.order) != len(set.byName) || len(set.order)+len(ignored) != len(raw) {
			t.Fatalf("%d tensors in, %d kept under %d names, %d ignored", len(raw), len(set.order), len(set.byName), len(ignored))
		}
		for _, name := range set.order {
			ts := set.byName[name]
			if n := ts.Shape[0] * ts.Shape[1]; n != len(ts.Data) {
				t.Fatalf("tensor %q: shape %v, %d values", name, ts.Shape, len(ts.Data))
			}
		}
		for _, ig := range ignored {
			name := strings.TrimPrefix(ig, "model.safetensors: ")
			if set.byName[name].Name != "" {
				t.Fatalf("%q both kept and ignored", name)
			}
			if rest := strings.TrimPrefix(name, "bert."); rest != "embeddings.position_ids" && !strings.HasPrefix(rest, "pooler.") && !strings.HasPrefix(rest, "cls.") {
				t.Fatalf("ignored %q, which is not a documented non-encoder tensor", ig)
			}
		}
	})
}

// FuzzGPT2Config reads arbitrary bytes as a reader's GPT-2 config.json. A config that loads
// must validate as a causal GPT-2 and read back to the same encoder once written as this package
// writes it.
func FuzzGPT2Config(f *testing.F) {
	tok := tinyTokenizer(f)
	cfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 8, Layers: 1, Heads: 2,
		FFN: 16, MaxPosition: 12, Dropout: 0.1, Causal: true, Arch: model.ArchGPT2}
	dir := f.TempDir() // reused: a worker runs one input at a time
	path := filepath.Join(dir, ConfigFile)
	if err := atomicfile.WriteJSON(path, newGPT2Config(cfg, tok)); err != nil {
		f.Fatal(err)
	}
	f.Add(readSeed(f, path))
	f.Add([]byte(`{"model_type":"gpt2","vocab_size":8,"n_embd":4611686018427387904,"n_layer":1,"n_head":1,"n_positions":8,"activation_function":"gelu"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c gpt2Config
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := readJSON(path, &c, false); err != nil {
			return
		}
		got, err := c.readerConfig(path)
		if err != nil {
			return
		}
		if err := got.Validate(); err != nil || !got.Causal || got.Arch != model.ArchGPT2 {
			t.Fatalf("loaded reader config %+v: %v", got, err)
		}
		var back gpt2Config
		b, _ := json.Marshal(newGPT2Config(got, tok))
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if again, err := back.readerConfig(path); err != nil || again != got {
			t.Fatalf("write then read: %+v, %v; want %+v", again, err, got)
		}
	})
}
