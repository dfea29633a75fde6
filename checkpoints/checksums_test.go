package checkpoints

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/trainer"
)

// flipBit flips one bit in the middle of the file at path.
func flipBit(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-7] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestChecksumsDetectBitFlip: issue 37's bit flipped in a checkpoint's model.safetensors was
// resumed from and exported silently (the file still parses). Save now writes checksums.sha256
// beside the files; LoadLatest names the damaged file, and Load falls back to the newest intact
// checkpoint, saying so.
func TestChecksumsDetectBitFlip(t *testing.T) {
	dir := t.TempDir()
	if err := Save(dir, sample(t, "train", 5)); err != nil {
		t.Fatal(err)
	}
	if err := Save(dir, sample(t, "train", 10)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "checkpoint-train-10", ChecksumFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ConfigFile, ModelFile, OptimizerFile, TokenizerFile, TrainerFile} {
		if !strings.Contains(string(b), "  "+f+"\n") {
			t.Errorf("%s does not list %s:\n%s", ChecksumFile, f, b)
		}
	}
	for _, f := range []string{ModelFile, OptimizerFile, TrainerFile} {
		t.Run(f, func(t *testing.T) {
			d := t.TempDir()
			os.CopyFS(d, os.DirFS(dir))
			path := filepath.Join(d, "checkpoint-train-10", f)
			flipBit(t, path)
			_, err := LoadLatest(d)
			if !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), path+": sha256 ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("LoadLatest: %v, want one line naming %s", err, path)
			}
			var warn strings.Builder
			Warnings = &warn
			defer func() { Warnings = os.Stderr }()
			ck, err := Load(d)
			if err != nil || ck.Trainer.Step != 5 || ck.Dir != filepath.Join(d, "checkpoint-train-5") {
				t.Fatalf("Load: %v, %v; want the fall-back to checkpoint-train-5", ck, err)
			}
			if w := warn.String(); !strings.Contains(w, path) || !strings.Contains(w, "using "+ck.Dir+", the newest intact checkpoint") {
				t.Errorf("warning %q", w)
			}
			flipBit(t, filepath.Join(d, "checkpoint-train-5", ModelFile))
			if _, err := Load(d); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Errorf("both damaged: %v, want the latest's damage", err)
			}
		})
	}
	// A checkpoint written before checksums (no sidecar) still loads.
	os.Remove(filepath.Join(dir, "checkpoint-train-10", ChecksumFile))
	if ck, err := LoadLatest(dir); err != nil || ck.Trainer.Step != 10 {
		t.Errorf("no sidecar: %v", err)
	}
}

func TestParseChecksums(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, c := range []struct{ text, want string }{
		{sum + "  model.safetensors\n", ""},
		{"", ""},
		{sum + "  model.safetensors", "no newline"},
		{sum + " model.safetensors\n", ":1: want"},
		{strings.ToUpper(sum) + "  a\n", ":1: want"},
		{sum + "  ../x\n", `:1: "../x" is not a file name`},
		{sum + "  a\n" + sum + "  a\n", ":2: a listed twice"},
	} {
		_, err := ParseChecksums("c", []byte(c.text))
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
}

// FuzzParseChecksums: any sidecar gives sums or an error, never a panic; every name accepted is
// a plain file name and every sum 64 lowercase hex digits.
func FuzzParseChecksums(f *testing.F) {
	f.Add([]byte(strings.Repeat("0", 64) + "  model.safetensors\n" + strings.Repeat("f", 64) + "  config.json\n"))
	f.Add([]byte("x  y\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sums, err := ParseChecksums("fuzz", b)
		if err != nil {
			return
		}
		for n, s := range sums {
			if n == "" || strings.ContainsAny(n, "/\\\x00") || n == ".." || len(s) != 64 {
				t.Fatalf("accepted %q -> %q", n, s)
			}
		}
	})
}

// TestLogWindowRoundTrip: the loop's partial log window travels in optimizer.safetensors'
// metadata, exactly.
func TestLogWindowRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ck := sample(t, "train", 7)
	ck.Optimizer.Window = trainer.LogWindow{Loss: 2.5510000000000001e-3 / 3, Steps: 2, Examples: 64}
	if err := Save(dir, ck); err != nil {
		t.Fatal(err)
	}
	got, err := LoadLatest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Optimizer.Window != ck.Optimizer.Window {
		t.Errorf("window %+v, saved %+v", got.Optimizer.Window, ck.Optimizer.Window)
	}
}
