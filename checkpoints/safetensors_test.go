package checkpoints

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/internal/memcheck"
)

// reference builds a file by hand from the spec: 8-byte little-endian header length, the
// compact JSON header padded with spaces to a multiple of 8, then the data.
func reference(header string, data ...byte) []byte {
	for len(header)%8 != 0 {
		header += " "
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func f32le(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// TestWriterMatchesReference checks our writer byte for byte against files laid out as the
// Python library (safetensors.numpy.save_file) lays them out.
func TestWriterMatchesReference(t *testing.T) {
	cases := []struct {
		name    string
		tensors []RawTensor
		meta    map[string]string
		want    []byte
	}{
		{
			// save_file({"a": np.array([1, 2], dtype=np.float32)}, path)
			name:    "a f32[2]",
			tensors: []RawTensor{F32Raw(Tensor{Name: "a", Shape: []int{2}, Data: []float32{1, 2}})},
			want: append(append(binary.LittleEndian.AppendUint64(nil, 56),
				`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  `...),
				0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40),
		},
		{
			// save_file({"b": np.float32([1]), "a": np.int64([3])}, path, metadata={"format": "np"}):
			// I64 sorts before F32 (wider dtype first), __metadata__ comes first.
			name: "mixed dtypes with metadata",
			tensors: []RawTensor{
				F32Raw(Tensor{Name: "b", Shape: []int{1}, Data: []float32{1}}),
				I64Raw("a", []int{1}, []int64{3}),
			},
			meta: map[string]string{"format": "np"},
			want: reference(`{"__metadata__":{"format":"np"},"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`,
				append([]byte{3, 0, 0, 0, 0, 0, 0, 0}, f32le(1)...)...),
		},
		{
			// names sorted by bytes within one dtype; a scalar has shape []; an empty tensor
			// takes no bytes; no tensors and no metadata gives "{}" padded.
			name: "order, scalar, empty",
			tensors: []RawTensor{
				F32Raw(Tensor{Name: "z", Shape: []int{}, Data: []float32{-0.5}}),
				F32Raw(Tensor{Name: "B", Shape: []int{0}, Data: nil}),
				F32Raw(Tensor{Name: "a.b", Shape: []int{1, 1}, Data: []float32{7}}),
			},
			want: reference(`{"B":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a.b":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]},"z":{"dtype":"F32","shape":[],"data_offsets":[4,8]}}`,
				f32le(7, -0.5)...),
		},
		{name: "nothing", want: reference(`{}`)},
		{
			name:    "escapes as serde_json",
			tensors: []RawTensor{F32Raw(Tensor{Name: "q\"<&>\\\n\x01é", Shape: []int{1}, Data: []float32{1}})},
			want:    reference(`{"q\"<&>\\\n\u0001é":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32le(1)...),
		},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".safetensors")
			if err := WriteSafetensorsRaw(path, c.tensors, c.meta); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.want) {
				t.Fatalf("bytes differ\n got %q\nwant %q", got, c.want)
			}
			// and the reference parses back to the same tensors
			back, meta, err := ReadSafetensorsRaw(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(back) != len(c.tensors) || len(meta) != len(c.meta) {
				t.Fatalf("read %d tensors, %d metadata; want %d, %d", len(back), len(meta), len(c.tensors), len(c.meta))
			}
			for _, w := range c.tensors {
				i := slices.IndexFunc(back, func(r RawTensor) bool { return r.Name == w.Name })
				if i < 0 || back[i].DType != w.DType || !slices.Equal(back[i].Shape, w.Shape) || !bytes.Equal(back[i].Data, w.Data) {
					t.Errorf("tensor %q did not round-trip", w.Name)
				}
			}
		})
	}
}

func TestReadReferenceF32(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ref.safetensors")
	ref := reference(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40)
	if err := os.WriteFile(path, ref, 0o644); err != nil {
		t.Fatal(err)
	}
	ts, meta, err := ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].Name != "a" || !slices.Equal(ts[0].Shape, []int{2}) || !slices.Equal(ts[0].Data, []float32{1, 2}) || meta != nil {
		t.Fatalf("got %+v %v", ts, meta)
	}
}

func TestRoundTripBitExact(t *testing.T) {
	nanPayload := math.Float32frombits(0x7fc00123)
	in := []Tensor{
		{Name: "query.layer.0.attn.q.weight", Shape: []int{2, 3}, Data: []float32{1, -0, float32(math.Inf(1)), float32(math.Inf(-1)), nanPayload, math.SmallestNonzeroFloat32}},
		{Name: "empty", Shape: []int{0}, Data: []float32{}},
		{Name: "empty2", Shape: []int{2, 0, 3}, Data: nil},
		{Name: "scalar", Shape: []int{}, Data: []float32{math.MaxFloat32}},
		{Name: "big", Shape: []int{1000, 7}, Data: make([]float32, 7000)},
	}
	for i := range in[4].Data {
		in[4].Data[i] = float32(i)*0.001 - 3
	}
	meta := map[string]string{"step": "12", "note": "a b\tc"}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := WriteSafetensors(path, in, meta); err != nil {
		t.Fatal(err)
	}
	out, gotMeta, err := ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	// written sorted by name
	want := slices.Clone(in)
	slices.SortFunc(want, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	if len(out) != len(want) {
		t.Fatalf("%d tensors, want %d", len(out), len(want))
	}
	for i := range want {
		if out[i].Name != want[i].Name || !slices.Equal(out[i].Shape, want[i].Shape) || len(out[i].Data) != len(want[i].Data) {
			t.Fatalf("tensor %d: got %s %v len %d, want %s %v len %d", i, out[i].Name, out[i].Shape, len(out[i].Data), want[i].Name, want[i].Shape, len(want[i].Data))
		}
		for j := range want[i].Data {
			if math.Float32bits(out[i].Data[j]) != math.Float32bits(want[i].Data[j]) {
				t.Fatalf("%s[%d]: bits %08x, want %08x", want[i].Name, j, math.Float32bits(out[i].Data[j]), math.Float32bits(want[i].Data[j]))
			}
		}
	}
	if gotMeta["step"] != "12" || gotMeta["note"] != "a b\tc" || len(gotMeta) != 2 {
		t.Fatalf("metadata %v", gotMeta)
	}
	// no temporary file is left beside the output
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the file", len(entries))
	}
}

func TestHeaderAlignment(t *testing.T) {
	dir := t.TempDir()
	for n := 1; n <= 17; n++ {
		path := filepath.Join(dir, "x.safetensors")
		name := strings.Repeat("w", n)
		if err := WriteSafetensors(path, []Tensor{{Name: name, Shape: []int{1}, Data: []float32{float32(n)}}}, nil); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		h := binary.LittleEndian.Uint64(b)
		if h%8 != 0 || (8+h)%8 != 0 {
			t.Fatalf("name length %d: header length %d not a multiple of 8", n, h)
		}
		hdr := string(b[8 : 8+h])
		trimmed := strings.TrimRight(hdr, " ")
		if !strings.HasSuffix(trimmed, "}") || len(hdr)-len(trimmed) >= 8 {
			t.Fatalf("name length %d: header %q: padding must be 0..7 spaces after '}'", n, hdr)
		}
		if got := math.Float32frombits(binary.LittleEndian.Uint32(b[8+h:])); got != float32(n) {
			t.Fatalf("name length %d: data at offset %d is %v", n, 8+h, got)
		}
	}
}

func TestReadOtherDTypes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mixed.safetensors")
	in := []RawTensor{
		F64Raw("d", []int{2}, []float64{math.Pi, -1e300}),
		I64Raw("i", []int{3}, []int64{-1, 0, 1 << 62}),
		F32Raw(Tensor{Name: "f", Shape: []int{1}, Data: []float32{0.25}}),
		{Name: "h", DType: F16, Shape: []int{2}, Data: []byte{0x00, 0x3c, 0x00, 0xc0}},
	}
	if err := WriteSafetensorsRaw(path, in, nil); err != nil {
		t.Fatal(err)
	}
	raw, _, err := ReadSafetensorsRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	// file order: F64 and I64 (8 bytes) before F32 before F16
	var names []string
	for _, r := range raw {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"i", "d", "f", "h"}) {
		t.Fatalf("order %v, want [i d f h] (I64, F64, F32, F16 as the Rust enum sorts)", names)
	}
	i64, err := raw[0].Int64()
	if err != nil || !slices.Equal(i64, []int64{-1, 0, 1 << 62}) {
		t.Fatalf("I64 %v %v", i64, err)
	}
	f64, err := raw[1].Float64()
	if err != nil || !slices.Equal(f64, []float64{math.Pi, -1e300}) {
		t.Fatalf("F64 %v %v", f64, err)
	}
	f32as64, err := raw[2].Float64()
	if err != nil || !slices.Equal(f32as64, []float64{0.25}) {
		t.Fatalf("F32 as F64 %v %v", f32as64, err)
	}
	if _, err := raw[3].Float32(); err == nil || !strings.Contains(err.Error(), `"h"`) {
		t.Fatalf("F16 as F32: %v", err)
	}
	_, _, err = ReadSafetensors(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `tensor "i"`) {
		t.Fatalf("ReadSafetensors on I64: %v, want an error naming file and tensor", err)
	}
}

func TestReadErrors(t *testing.T) {
	good := reference(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, f32le(1, 2, 3)...)
	cases := []struct {
		name string
		file []byte
		want []string // substrings of the error, besides the file name
	}{
		{"empty file", nil, []string{"shorter than the 8-byte header length"}},
		{"7 bytes", good[:7], []string{"truncated"}},
		{"header beyond file", good[:40], []string{"header length 112 runs past the end of the 40-byte file"}},
		{"huge header length", binary.LittleEndian.AppendUint64(nil, 1<<40), []string{"exceeds"}},
		{"truncated data", good[:len(good)-1], []string{`tensor "b"`, "run past the 11-byte data section", "truncated"}},
		{"trailing bytes", append(slices.Clone(good), 0), []string{"data section is 13 bytes but the tensors cover 12"}},
		{"overlap", reference(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32le(1, 2)...),
			[]string{`tensor "b"`, "overlap", `"a"`}},
		{"gap", reference(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, f32le(1, 2, 3)...),
			[]string{`tensor "b"`, "gap of 4 bytes"}},
		{"offsets out of range", reference(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,800]}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, "run past"}},
		{"offsets not an interval", reference(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, "not an interval"}},
		{"offsets disagree with shape", reference(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, "needs 12"}},
		{"unknown dtype", reference(`{"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, `unknown dtype "F33"`}},
		{"missing field", reference(`{"a":{"dtype":"F32","data_offsets":[0,8]}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, `lacks "shape"`}},
		{"unknown field", reference(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, `unknown field "x"`}},
		{"negative dim", reference(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, "negative dimension"}},
		{"duplicate name", reference(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32le(1, 2)...),
			[]string{`names "a" twice`}},
		{"not an object", reference(`[1,2]`), []string{"not a JSON object"}},
		{"bad metadata", reference(`{"__metadata__":{"k":1}}`), []string{"__metadata__ must map strings to strings"}},
		{"text after header", reference(`{} x`), []string{"after the JSON object"}},
		// issue 19: the writer refuses an empty name, so the reader does too
		{"empty name", reference(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32le(1)...),
			[]string{"header names a tensor with an empty name"}},
		{"shape overflow", reference(`{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, "shape [4611686018427387904 4] is too large"}},
		{"huge shape", reference(`{"a":{"dtype":"F64","shape":[281474976710656],"data_offsets":[0,8]}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, "shape [281474976710656] of F64 needs 2251799813685248"}},
		{"huge offsets", reference(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,9223372036854775807]}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, "run past the 8-byte data section"}},
		{"fractional dim", reference(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, "cannot unmarshal number 1.5"}},
		{"dim beyond int64", reference(`{"a":{"dtype":"F32","shape":[1e30],"data_offsets":[0,8]}}`, f32le(1, 2)...),
			[]string{`tensor "a"`, "cannot unmarshal number 1e30"}},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".safetensors")
			if err := os.WriteFile(path, c.file, 0o644); err != nil {
				t.Fatal(err)
			}
			var err error
			memcheck.Bounded(t, c.name, func() { _, _, err = ReadSafetensorsRaw(path) })
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is not one line", err)
			}
			for _, w := range append([]string{path}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// the good file itself reads
	path := filepath.Join(dir, "good.safetensors")
	os.WriteFile(path, good, 0o644)
	if ts, _, err := ReadSafetensors(path); err != nil || len(ts) != 2 || ts[1].Data[0] != 3 {
		t.Fatalf("good file: %v %v", ts, err)
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		tensors []Tensor
		want    string
	}{
		{"shape mismatch", []Tensor{{Name: "w", Shape: []int{2, 2}, Data: []float32{1, 2, 3}}}, `tensor "w": shape [2 2] holds 4 values but 3 were given`},
		{"duplicate", []Tensor{{Name: "w", Shape: []int{1}, Data: []float32{1}}, {Name: "w", Shape: []int{1}, Data: []float32{1}}}, `tensor "w" given twice`},
		{"empty name", []Tensor{{Shape: []int{1}, Data: []float32{1}}}, "empty name"},
		{"reserved", []Tensor{{Name: "__metadata__", Shape: []int{1}, Data: []float32{1}}}, "reserved"},
	}
	for _, c := range cases {
		path := filepath.Join(dir, "out.safetensors")
		err := WriteSafetensors(path, c.tensors, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s and saying %q", c.name, err, path, c.want)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: file written despite the error", c.name)
		}
	}
	if err := WriteSafetensorsRaw(filepath.Join(dir, "u.safetensors"), []RawTensor{{Name: "x", DType: "F33", Shape: []int{1}, Data: []byte{0}}}, nil); err == nil || !strings.Contains(err.Error(), `unknown dtype "F33"`) {
		t.Errorf("unknown dtype: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed writes left %d files", len(entries))
	}
}
