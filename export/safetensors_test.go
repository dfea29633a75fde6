package export

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/model"
)

// Safetensors edge cases as the importer meets them. checkpoints/safetensors_test.go covers the
// reader itself (byte-identical output to the Python library, empty and scalar tensors in a round
// trip, bad offsets, truncation at every section); these check the files an import may be handed.

// bowDir writes a shared bow export of a model with hidden 4 over the tiny vocabulary and
// returns its directory and model.
func bowDir(t *testing.T) (string, *model.BiEncoder) {
	t.Helper()
	tok := tinyTokenizer(t)
	cfg := model.EncoderConfig{Encoder: model.EncoderBow, Vocab: tok.VocabSize(), Hidden: 4}
	m := tinyModel(t, cfg, true, 1)
	out := filepath.Join(t.TempDir(), "bow")
	if err := WriteBiEncoder(out, m, tok, tinyMeta); err != nil {
		t.Fatal(err)
	}
	return out, m
}

// unpadded builds a safetensors file whose JSON header is not padded to a multiple of 8: the
// format only asks writers to pad, and the reference reader (safetensors' read_metadata)
// accepts any header length.
func unpadded(m *model.BiEncoder) []byte {
	var hdr strings.Builder
	var data []byte
	hdr.WriteString(`{"__metadata__":{"format":"pt"}`)
	for _, p := range m.Params() {
		name, _ := bowName(p.Name)
		begin := len(data)
		for _, v := range p.Value.Data().([]float32) {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
		var dims []string
		for _, d := range p.Value.Shape() {
			dims = append(dims, fmt.Sprint(d))
		}
		fmt.Fprintf(&hdr, `,%q:{"dtype":"F32","shape":[%s],"data_offsets":[%d,%d]}`, name, strings.Join(dims, ","), begin, len(data))
	}
	hdr.WriteString("}")
	if hdr.Len()%8 == 0 {
		hdr.WriteString(" ") // make it unaligned
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(hdr.Len()))
	return append(append(b, hdr.String()...), data...)
}

func TestImportUnalignedHeader(t *testing.T) {
	dir, src := bowDir(t)
	file := unpadded(src)
	if n := binary.LittleEndian.Uint64(file); n%8 == 0 {
		t.Fatalf("header length %d is aligned; the test needs an unaligned one", n)
	}
	os.WriteFile(filepath.Join(dir, ModelFile), file, 0o644)
	dst := tinyModel(t, src.Cfg, true, 2)
	if _, err := InitBiEncoder(dst, dir); err != nil {
		t.Fatal(err)
	}
	equalBits(t, src.Params(), dst.Params())
}

func TestImportEmptyTensor(t *testing.T) {
	dir, src := bowDir(t)
	rewriteModel(t, dir, func(raw []checkpoints.RawTensor) []checkpoints.RawTensor {
		return append(raw, checkpoints.RawTensor{Name: "dense.extra", DType: "F32", Shape: []int{0, 4}, Data: nil})
	})
	_, err := InitBiEncoder(tinyModel(t, src.Cfg, true, 2), dir)
	var mm *MismatchError
	if !errors.As(err, &mm) || len(mm.Unexpected) != 1 || mm.Unexpected[0].Name != "dense.extra" || !slices.Equal(mm.Unexpected[0].Shape, []int{0, 4}) {
		t.Fatalf("empty tensor: %v, want it listed as unexpected with shape [0 4]", err)
	}
	// A file with no tensors at all: every parameter is missing.
	os.WriteFile(filepath.Join(dir, ModelFile), append(binary.LittleEndian.AppendUint64(nil, 8), "{}      "...), 0o644)
	_, err = InitBiEncoder(tinyModel(t, src.Cfg, true, 2), dir)
	if !errors.As(err, &mm) || len(mm.Missing) != 3 || len(mm.Unexpected) != 0 {
		t.Fatalf("empty file: %v, want 3 missing tensors", err)
	}
}

func TestImportTruncatedFile(t *testing.T) {
	dir, _ := bowDir(t)
	path := filepath.Join(dir, ModelFile)
	full, _ := os.ReadFile(path)
	n := int(binary.LittleEndian.Uint64(full))
	for _, c := range []struct {
		name string
		size int
		want string
	}{
		{"in the length", 5, "shorter than the 8-byte header length"},
		{"in the header", 8 + n/2, "runs past the end"},
		{"in the data", len(full) - 3, "run past"},
	} {
		os.WriteFile(path, full[:c.size], 0o644)
		_, err := OpenBiEncoder(dir)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("truncated %s: %v, want an error naming %s, saying %q and \"truncated\"", c.name, err, path, c.want)
		}
	}
	os.Remove(path)
	os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), []byte("PK"), 0o644)
	if _, err := OpenBiEncoder(dir); err == nil || !strings.Contains(err.Error(), "pytorch_model.bin") {
		t.Errorf("pickle only: %v", err)
	}
}
