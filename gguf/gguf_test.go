package gguf

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func le16(v uint16) []byte { return []byte{byte(v), byte(v >> 8)} }

// Hand-built blocks with known values (halves: 0x3800 = 0.5, 0xBC00 = -1,
// 0x4000 = 2, 0x3400 = 0.25).
func q41Block() ([]byte, []float32) {
	b := append(le16(0x3800), le16(0xBC00)...)
	want := make([]float32, 32)
	for j := 0; j < 16; j++ {
		lo, hi := j, 15-j
		b = append(b, byte(lo|hi<<4))
		want[j] = float32(lo)*0.5 - 1
		want[j+16] = float32(hi)*0.5 - 1
	}
	return b, want
}

func q40Block() ([]byte, []float32) {
	b := le16(0x4000)
	want := make([]float32, 32)
	for j := 0; j < 16; j++ {
		lo, hi := (j*7)%16, (j*3+1)%16
		b = append(b, byte(lo|hi<<4))
		want[j] = float32(lo-8) * 2
		want[j+16] = float32(hi-8) * 2
	}
	return b, want
}

func q80Block() ([]byte, []float32) {
	b := le16(0x3400)
	want := make([]float32, 32)
	for j := 0; j < 32; j++ {
		q := int8(-128 + 8*j + j%3)
		b = append(b, byte(q))
		want[j] = float32(q) * 0.25
	}
	return b, want
}

func TestDequantizeKnownBlocks(t *testing.T) {
	q41, w41 := q41Block()
	q40, w40 := q40Block()
	q80, w80 := q80Block()
	f16 := []byte{}
	for _, h := range []uint16{0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8400, 0x3555} {
		f16 = append(f16, le16(h)...)
	}
	bf16 := append(le16(0x3F80), le16(0xC0A0)...)
	for _, c := range []struct {
		typ  DType
		src  []byte
		want []float32
	}{
		{Q4_1, q41, w41},
		{Q4_0, q40, w40},
		{Q8_0, q80, w80},
		// 1, -2, 65504 (largest half), 2^-24 (smallest subnormal), -2^-14, 0.333251953125
		{F16, f16, []float32{1, -2, 65504, 1.0 / (1 << 24), -1.0 / (1 << 14), 0.333251953125}},
		{BF16, bf16, []float32{1, -5}},
		{F32, Float32Bytes([]float32{1.5, -0.25}), []float32{1.5, -0.25}},
	} {
		got := make([]float32, len(c.want))
		if err := Dequantize(c.typ, c.src, got); err != nil {
			t.Fatal(c.typ, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v\nwant %v", c.typ, got, c.want)
		}
	}
	if v := HalfToFloat(0x7C00); !math.IsInf(float64(v), 1) {
		t.Errorf("half 0x7C00 = %v, want +Inf", v)
	}
	if v := HalfToFloat(0x7E00); !math.IsNaN(float64(v)) {
		t.Errorf("half 0x7E00 = %v, want NaN", v)
	}
	if err := Dequantize(Q4_1, q41[:19], make([]float32, 32)); err == nil {
		t.Error("short Q4_1 block accepted")
	}
	if err := Dequantize(Q4_K, make([]byte, 144), make([]float32, 256)); err == nil {
		t.Error("Q4_K dequantized")
	}
}

// Every half converts as the hardware conversion float32(float16) would:
// checked against the definition value = (-1)^s · 2^(e-15) · (1 + m/1024).
func TestHalfToFloatAll(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		s, e, m := h>>15, (h>>10)&31, h&1023
		if e == 31 {
			continue
		}
		var want float64
		if e == 0 {
			want = math.Ldexp(float64(m), -24)
		} else {
			want = math.Ldexp(1+float64(m)/1024, e-15)
		}
		if s == 1 {
			want = -want
		}
		if got := HalfToFloat(uint16(h)); float64(got) != want || math.Signbit(float64(got)) != (s == 1) {
			t.Fatalf("half %#04x = %v, want %v", h, got, want)
		}
	}
}

// sample writes a small GGUF with metadata of every type and one tensor of
// each dequantizable type; it returns the path and the expected values.
func sample(t testing.TB, dir string) (string, []KV, map[string][]float32) {
	q41, w41 := q41Block()
	q40, w40 := q40Block()
	q80, w80 := q80Block()
	meta := []KV{
		{"general.architecture", "llama"},
		{"u8", uint8(200)}, {"i8", int8(-3)}, {"u16", uint16(60000)}, {"i16", int16(-300)},
		{"u32", uint32(4000000000)}, {"i32", int32(-7)}, {"f32", float32(1.5)}, {"b", true},
		{"u64", uint64(1) << 40}, {"i64", int64(-1) << 40}, {"f64", 2.25},
		{"strs", []string{"a", "", "ünï"}},
		{"ints", []any{int32(1), int32(-2), int32(3)}},
		{"nested", []any{[]any{uint8(1), uint8(2)}, []any{uint8(3)}}},
		{"empty", []any{}},
	}
	want := map[string][]float32{}
	mat := make([]float32, 6)
	for i := range mat {
		mat[i] = float32(i) - 2.5
	}
	want["mat"], want["q41"], want["q40"], want["q80"] = mat, append(append([]float32{}, w41...), w41...), w40, w80
	want["f16"], want["bf16"] = []float32{1, -2}, []float32{1, -5}
	tensors := []TensorData{
		{"mat", []uint64{3, 2}, F32, Float32Bytes(mat)},
		{"q41", []uint64{32, 2}, Q4_1, append(append([]byte{}, q41...), q41...)},
		{"q40", []uint64{32}, Q4_0, q40},
		{"q80", []uint64{32, 1}, Q8_0, q80},
		{"f16", []uint64{2}, F16, append(le16(0x3C00), le16(0xC000)...)},
		{"bf16", []uint64{2}, BF16, append(le16(0x3F80), le16(0xC0A0)...)},
	}
	p := filepath.Join(dir, "sample.gguf")
	if err := Write(p, meta, tensors); err != nil {
		t.Fatal(err)
	}
	return p, meta, want
}

func TestWriteOpenRoundTrip(t *testing.T) {
	p, meta, want := sample(t, t.TempDir())
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || len(f.Meta) != len(meta) || len(f.Tensors) != 6 || f.Alignment() != 32 {
		t.Fatalf("version %d, %d keys, %d tensors, alignment %d", f.Version, len(f.Meta), len(f.Tensors), f.Alignment())
	}
	for i, kv := range meta {
		if f.Keys()[i] != kv.Key || !reflect.DeepEqual(f.Meta[kv.Key], kv.Value) {
			t.Errorf("%s = %#v, want %#v", kv.Key, f.Meta[kv.Key], kv.Value)
		}
	}
	if v, ok := f.Uint("u32"); !ok || v != 4000000000 {
		t.Errorf("Uint(u32) = %v %v", v, ok)
	}
	if _, ok := f.Uint("i8"); ok {
		t.Error("Uint of a negative value")
	}
	if v, ok := f.Float("f32"); !ok || v != 1.5 {
		t.Errorf("Float(f32) = %v", v)
	}
	if v, ok := f.Ints("ints"); !ok || !reflect.DeepEqual(v, []int64{1, -2, 3}) {
		t.Errorf("Ints = %v", v)
	}
	if s, ok := f.Strings("strs"); !ok || s[2] != "ünï" {
		t.Errorf("Strings = %v", s)
	}
	shapes := map[string][]int{"mat": {2, 3}, "q41": {2, 32}, "q40": {32}, "q80": {1, 32}, "f16": {2}, "bf16": {2}}
	for name, w := range want {
		got, shape, err := f.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, w) || !reflect.DeepEqual(shape, shapes[name]) {
			t.Errorf("%s: %v %v, want %v %v", name, shape, got, shapes[name], w)
		}
	}
	if ti, _ := f.Tensor("mat"); ti.Offset%32 != 0 || ti.Bytes() != 24 {
		t.Errorf("mat info %+v", ti)
	}
	if _, _, err := f.Float32("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing tensor: %v", err)
	}
}

// GGUF v2 has the v3 layout; general.alignment other than 32 is honoured.
func TestVersion2AndAlignment(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.gguf")
	data := Float32Bytes([]float32{1, 2, 3})
	err := Write(p, []KV{{"general.alignment", uint32(64)}}, []TensorData{{"a", []uint64{3}, F32, data}, {"b", []uint64{1}, F32, data[:4]}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	binary.LittleEndian.PutUint32(raw[4:], 2)
	os.WriteFile(p, raw, 0o644)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := f.Tensor("b")
	if f.Version != 2 || f.Alignment() != 64 || b.Offset != 64 || f.dataOffset%64 != 0 {
		t.Fatalf("version %d alignment %d offset %d data %d", f.Version, f.Alignment(), b.Offset, f.dataOffset)
	}
	if x, _, err := f.Float32("b"); err != nil || x[0] != 1 {
		t.Fatal(x, err)
	}
}

// The smallest legal entries (an empty key, an empty tensor name, a 0-dim
// tensor) pass the count bounds.
func TestMinimalEntries(t *testing.T) {
	p := filepath.Join(t.TempDir(), "min.gguf")
	if err := Write(p, []KV{{"", uint8(1)}}, []TensorData{{"", nil, F32, Float32Bytes([]float32{7})}}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	x, shape, err := f.Float32("")
	if err != nil || len(shape) != 0 || len(x) != 1 || x[0] != 7 {
		t.Fatalf("%v %v %v", x, shape, err)
	}
}
