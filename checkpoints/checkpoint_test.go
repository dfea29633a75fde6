package checkpoints

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type archConfig struct {
	Encoder string `json:"encoder"`
	Hidden  int    `json:"hidden"`
	Vocab   int    `json:"vocab"`
}

const tokJSON = `{"version":"1.0","model":{"type":"WordPiece","vocab":{"[PAD]":0,"[UNK]":1}}}`

// sample returns a checkpoint at the given phase and step whose values depend on step.
func sample(t *testing.T, phase string, step int) *Checkpoint {
	t.Helper()
	pcg := rand.NewPCG(42, uint64(step))
	r := rand.New(pcg)
	fill := func(n int) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = r.Float32()*2 - 1
		}
		return d
	}
	rng, err := pcg.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return &Checkpoint{
		Params: []Tensor{
			{Name: "encoder.embeddings.word", Shape: []int{10, 4}, Data: fill(40)},
			{Name: "encoder.proj.weight", Shape: []int{4, 4}, Data: fill(16)},
			{Name: "encoder.proj.bias", Shape: []int{4}, Data: fill(4)},
		},
		Config:    archConfig{Encoder: "bow", Hidden: 4, Vocab: 10},
		Tokenizer: []byte(tokJSON),
		Optimizer: &OptimizerState{
			Step: step,
			M:    map[string][]float32{"encoder.embeddings.word": fill(40), "encoder.proj.weight": fill(16)},
			V:    map[string][]float32{"encoder.embeddings.word": fill(40), "encoder.proj.weight": fill(16)},
		},
		Trainer: TrainerState{Step: step, Phase: phase, Epoch: step / 3, SamplerPosition: 32 * step, Seed: 42,
			BestMetric: 0.25, BestMetricName: "dev/nDCG@10", RNG: map[string][]byte{"dropout": rng}},
	}
}

func checkEqual(t *testing.T, got, want *Checkpoint) {
	t.Helper()
	if len(got.Params) != len(want.Params) {
		t.Fatalf("%d params, want %d", len(got.Params), len(want.Params))
	}
	for _, w := range want.Params {
		i := slices.IndexFunc(got.Params, func(p Tensor) bool { return p.Name == w.Name })
		if i < 0 || !slices.Equal(got.Params[i].Shape, w.Shape) || !slices.Equal(got.Params[i].Data, w.Data) {
			t.Fatalf("param %q differs", w.Name)
		}
	}
	var cfg archConfig
	if err := got.DecodeConfig(&cfg); err != nil || cfg != want.Config.(archConfig) {
		t.Fatalf("config %+v %v, want %+v", cfg, err, want.Config)
	}
	if string(got.Tokenizer) != string(want.Tokenizer) {
		t.Fatalf("tokenizer %q", got.Tokenizer)
	}
	if got.Optimizer.Step != want.Optimizer.Step || len(got.Optimizer.M) != len(want.Optimizer.M) || len(got.Optimizer.V) != len(want.Optimizer.V) {
		t.Fatalf("optimizer step %d, %d/%d moments", got.Optimizer.Step, len(got.Optimizer.M), len(got.Optimizer.V))
	}
	for k, m := range want.Optimizer.M {
		if !slices.Equal(got.Optimizer.M[k], m) || !slices.Equal(got.Optimizer.V[k], want.Optimizer.V[k]) {
			t.Fatalf("moments of %q differ", k)
		}
	}
	gt, wt := got.Trainer, want.Trainer
	if gt.Step != wt.Step || gt.Phase != wt.Phase || gt.Epoch != wt.Epoch || gt.SamplerPosition != wt.SamplerPosition ||
		gt.Seed != wt.Seed || gt.BestMetric != wt.BestMetric || gt.BestMetricName != wt.BestMetricName ||
		string(gt.RNG["dropout"]) != string(wt.RNG["dropout"]) {
		t.Fatalf("trainer state %+v, want %+v", gt, wt)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := sample(t, "train", 500)
	if err := Save(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkEqual(t, got, want)
	if got.Dir != filepath.Join(dir, "checkpoint-train-500") {
		t.Fatalf("Dir = %s", got.Dir)
	}
	latest, _ := os.ReadFile(filepath.Join(dir, LatestFile))
	if string(latest) != "checkpoint-train-500\n" {
		t.Fatalf("latest = %q", latest)
	}
	for _, f := range []string{ModelFile, ConfigFile, TokenizerFile, OptimizerFile, TrainerFile} {
		if _, err := os.Stat(filepath.Join(got.Dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}

	// the restored RNG state continues the same stream
	var a, b rand.PCG
	if err := a.UnmarshalBinary(want.Trainer.RNG["dropout"]); err != nil {
		t.Fatal(err)
	}
	if err := b.UnmarshalBinary(got.Trainer.RNG["dropout"]); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if a.Uint64() != b.Uint64() {
			t.Fatal("restored RNG diverges")
		}
	}

	// trainer_state.json is readable JSON with the documented keys
	var ts map[string]any
	raw, _ := os.ReadFile(filepath.Join(got.Dir, TrainerFile))
	if err := json.Unmarshal(raw, &ts); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"step", "phase", "epoch", "sampler_position", "seed", "best_metric", "rng"} {
		if _, ok := ts[k]; !ok {
			t.Errorf("trainer_state.json lacks %q", k)
		}
	}
}

// TestStateRoundTrip: a checkpoint's State tensors (any dtype) are saved in state.safetensors
// and load back byte for byte; a checkpoint without State has no such file and loads none.
func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ck := sample(t, "replug", 50)
	ck.State = []RawTensor{I64Raw("cache.keys", []int{2, 2}, []int64{3, 17, 5, -1}), F64Raw("cache.loglik", []int{2}, []float64{-0.125, -7.5}),
		{Name: "cache.reader_hash", DType: U8, Shape: []int{3}, Data: []byte("abc")}}
	if err := Save(dir, ck); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkEqual(t, got, ck)
	if len(got.State) != len(ck.State) {
		t.Fatalf("%d state tensors, want %d", len(got.State), len(ck.State))
	}
	for _, w := range ck.State {
		i := slices.IndexFunc(got.State, func(g RawTensor) bool { return g.Name == w.Name })
		if i < 0 || got.State[i].DType != w.DType || !slices.Equal(got.State[i].Shape, w.Shape) || string(got.State[i].Data) != string(w.Data) {
			t.Errorf("state tensor %q: got %+v, want %+v", w.Name, got.State, w)
		}
	}
	keys, err := got.State[slices.IndexFunc(got.State, func(g RawTensor) bool { return g.Name == "cache.keys" })].Int64()
	if err != nil || !slices.Equal(keys, []int64{3, 17, 5, -1}) {
		t.Errorf("cache.keys = %v (%v)", keys, err)
	}

	if err := Save(dir, sample(t, "replug", 60)); err != nil {
		t.Fatal(err)
	}
	if got, err = Load(dir); err != nil || got.State != nil {
		t.Fatalf("checkpoint without state: State %v, err %v", got.State, err)
	}
	if _, err := os.Stat(filepath.Join(got.Dir, StateFile)); err == nil {
		t.Errorf("%s written for a checkpoint without state", StateFile)
	}
}

func TestTokenizerFromPath(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(src, []byte(tokJSON), 0o644)
	ck := sample(t, "", 3)
	ck.Tokenizer, ck.TokenizerPath = nil, src
	ck.Optimizer = nil
	if err := Save(dir, ck); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Dir != filepath.Join(dir, "checkpoint-3") || string(got.Tokenizer) != tokJSON || got.Optimizer != nil {
		t.Fatalf("dir %s tokenizer %q optimizer %v", got.Dir, got.Tokenizer, got.Optimizer)
	}
}

// TestCrashMidSave leaves the states a crash can leave and checks that Load returns the last
// complete checkpoint, then that the next Save cleans up.
func TestCrashMidSave(t *testing.T) {
	dir := t.TempDir()
	first := sample(t, "train", 1)
	if err := Save(dir, first); err != nil {
		t.Fatal(err)
	}

	// crash while writing files: a temp directory with a half-written model.safetensors
	tmp, _ := os.MkdirTemp(dir, tmpPrefix+"*")
	if err := WriteSafetensors(filepath.Join(tmp, ModelFile), sample(t, "train", 2).Params, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(tmp, ModelFile))
	os.WriteFile(filepath.Join(tmp, ModelFile), b[:len(b)/2], 0o644)
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkEqual(t, got, first)

	// crash after the directory rename, before latest moved: the new directory is ignored
	orphan, _ := os.MkdirTemp(dir, tmpPrefix+"*")
	if err := writeFiles(orphan, sample(t, "train", 2)); err != nil {
		t.Fatal(err)
	}
	os.Rename(orphan, filepath.Join(dir, "checkpoint-train-2"))
	if got, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	checkEqual(t, got, first)

	// crash while replacing latest: its temp file is ignored
	os.WriteFile(filepath.Join(dir, ".latest.tmp-123"), []byte("checkpoint-tr"), 0o644)
	if got, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	checkEqual(t, got, first)

	// the next save takes a fresh name, keeps the previous one and removes the leftovers
	third := sample(t, "train", 2)
	third.Trainer.BestMetric = 0.5
	if err := Save(dir, third); err != nil {
		t.Fatal(err)
	}
	if got, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	checkEqual(t, got, third)
	if got.Dir != filepath.Join(dir, "checkpoint-train-2.2") {
		t.Fatalf("Dir = %s, want the .2 suffix beside the orphan", got.Dir)
	}
	names, _ := Checkpoints(dir)
	if !slices.Equal(names, []string{"checkpoint-train-1", "checkpoint-train-2.2"}) {
		t.Fatalf("checkpoints after save: %v, want the previous and the new one", names)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temp directory %s not removed", tmp)
	}
	if _, err := os.Stat(filepath.Join(dir, ".latest.tmp-123")); !os.IsNotExist(err) {
		t.Fatal("temp pointer file not removed")
	}

	// a third save drops the oldest
	if err := Save(dir, sample(t, "train", 3)); err != nil {
		t.Fatal(err)
	}
	names, _ = Checkpoints(dir)
	if !slices.Equal(names, []string{"checkpoint-train-2.2", "checkpoint-train-3"}) {
		t.Fatalf("checkpoints: %v", names)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Run("no latest", func(t *testing.T) {
		dir := t.TempDir()
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), "no complete checkpoint") || !strings.Contains(err.Error(), dir) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("bad latest", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, LatestFile), []byte("../../etc\n"), 0o644)
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, LatestFile)+":1:") {
			t.Fatalf("error %v", err)
		}
	})
	corrupt := []struct {
		file   string
		damage func(path string)
		want   string
	}{
		{ModelFile, func(p string) { b, _ := os.ReadFile(p); os.WriteFile(p, b[:len(b)-3], 0o644) }, "truncated"},
		{OptimizerFile, func(p string) { b, _ := os.ReadFile(p); os.WriteFile(p, b[:5], 0o644) }, "shorter than the 8-byte"},
		{ConfigFile, func(p string) { os.WriteFile(p, []byte(`{"encoder":`), 0o644) }, "invalid JSON"},
		{TrainerFile, func(p string) { os.WriteFile(p, []byte(`{"step":1,"stepz":2}`), 0o644) }, `unknown field "stepz"`},
		{TrainerFile, func(p string) { os.Remove(p) }, "no such file"},
		{ModelFile, func(p string) { os.Remove(p) }, "no such file"},
	}
	for _, c := range corrupt {
		t.Run(c.file, func(t *testing.T) {
			dir := t.TempDir()
			if err := Save(dir, sample(t, "train", 7)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "checkpoint-train-7", c.file)
			os.Remove(filepath.Join(dir, "checkpoint-train-7", ChecksumFile)) // the parsers' own checks (checksums_test.go tests the sidecar's)
			c.damage(path)
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %s and saying %q", err, path, c.want)
			}
		})
	}
}

func TestSaveErrors(t *testing.T) {
	cases := []struct {
		name   string
		modify func(ck *Checkpoint)
		want   string
	}{
		{"orphan moment", func(ck *Checkpoint) {
			ck.Optimizer.M["nope"], ck.Optimizer.V["nope"] = []float32{1}, []float32{1}
		}, `moment "m.nope" names no parameter`},
		{"unpaired moment", func(ck *Checkpoint) { delete(ck.Optimizer.V, "encoder.proj.weight") }, "not both"},
		{"moment size", func(ck *Checkpoint) { ck.Optimizer.M["encoder.proj.weight"] = []float32{1} }, `tensor "m.encoder.proj.weight": shape [4 4] holds 16 values but 1 were given`},
		{"bad phase", func(ck *Checkpoint) { ck.Trainer.Phase = "pre/train" }, "phase"},
		{"no config", func(ck *Checkpoint) { ck.Config = nil }, "no config"},
		{"tokenizer not JSON", func(ck *Checkpoint) { ck.Tokenizer = []byte("vocab.txt") }, "not valid JSON"},
		{"param shape", func(ck *Checkpoint) { ck.Params[0].Shape = []int{3} }, `tensor "encoder.embeddings.word"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := Save(dir, sample(t, "train", 1)); err != nil {
				t.Fatal(err)
			}
			ck := sample(t, "train", 2)
			c.modify(ck)
			err := Save(dir, ck)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			// the failed save left the previous checkpoint as it was, and no temp directory
			got, lerr := Load(dir)
			if lerr != nil || got.Trainer.Step != 1 {
				t.Fatalf("after a failed save: %v, step %v", lerr, got)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 2 {
				t.Fatalf("run directory holds %d entries, want latest and one checkpoint", len(entries))
			}
		})
	}
}
