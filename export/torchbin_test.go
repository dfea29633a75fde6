package export

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/internal/memcheck"
)

// rawValues decodes a raw tensor's values as float64.
func rawValues(t *testing.T, r checkpoints.RawTensor) []float64 {
	t.Helper()
	n := r.DType.Size()
	out := make([]float64, len(r.Data)/n)
	for i := range out {
		b := r.Data[i*n:]
		switch r.DType {
		case checkpoints.F32:
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		case checkpoints.F16:
			out[i] = float64(halfToFloat32(binary.LittleEndian.Uint16(b)))
		case checkpoints.BF16:
			out[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))
		case checkpoints.F64:
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b))
		case checkpoints.I64:
			out[i] = float64(int64(binary.LittleEndian.Uint64(b)))
		case checkpoints.BOOL:
			out[i] = float64(b[0])
		default:
			t.Fatalf("%s: dtype %s", r.Name, r.DType)
		}
	}
	return out
}

// TestReadTorchStateDict reads the state dict testdata/gen_torchbin.py saved with torch 2.15 in
// the zip and in the legacy format: an nn.Module state dict (OrderedDict with _metadata), views
// with offsets and strides, shared storages, F32 F16 BF16 F64 I64 BOOL, a scalar, an empty
// tensor and an nn.Parameter; names, order, dtypes, shapes and values must be torch's.
func TestReadTorchStateDict(t *testing.T) {
	var want struct {
		Tensors []struct {
			Name   string    `json:"name"`
			DType  string    `json:"dtype"`
			Shape  []int     `json:"shape"`
			Values []float64 `json:"values"`
		} `json:"tensors"`
	}
	b, err := os.ReadFile("testdata/torch_expected.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"testdata/torch_zip.bin", "testdata/torch_legacy.bin"} {
		raw, err := readTorchStateDict(file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(raw) != len(want.Tensors) {
			t.Fatalf("%s: %d tensors, want %d", file, len(raw), len(want.Tensors))
		}
		for i, w := range want.Tensors {
			r := raw[i]
			if r.Name != w.Name || string(r.DType) != w.DType || !slices.Equal(r.Shape, w.Shape) {
				t.Errorf("%s: tensor %d is %s %s %v, want %s %s %v", file, i, r.Name, r.DType, r.Shape, w.Name, w.DType, w.Shape)
				continue
			}
			if got := rawValues(t, r); !slices.Equal(got, w.Values) {
				t.Errorf("%s: %s = %v, want %v", file, r.Name, got, w.Values)
			}
		}
	}
}

// pk builds pickles opcode by opcode, as torch.save writes them (protocol 2).
type pk struct{ bytes.Buffer }

func (p *pk) op(b ...byte) *pk { p.Write(b); return p }
func (p *pk) str(s string) *pk {
	p.op('X')
	binary.Write(p, binary.LittleEndian, uint32(len(s)))
	p.WriteString(s)
	return p
}
func (p *pk) int(n int64) *pk {
	if n >= 0 && n < 1<<31 {
		p.op('J')
		binary.Write(p, binary.LittleEndian, int32(n))
		return p
	}
	p.op(0x8a, 8)
	binary.Write(p, binary.LittleEndian, n)
	return p
}
func (p *pk) global(module, name string) *pk {
	p.op('c')
	p.WriteString(module + "\n" + name + "\n")
	return p
}
func (p *pk) ints(v []int) *pk {
	p.op('(')
	for _, x := range v {
		p.int(int64(x))
	}
	return p.op('t')
}

// fakeTensor is one state-dict entry of a hand-made pickle: a view of storage key.
type fakeTensor struct {
	name, key, storageType string
	numel                  int64 // of the storage
	offset                 int64
	shape, stride          []int
}

// statePickle is torch.save's pickle of an OrderedDict of the tensors (zip format; legacy adds a
// sixth element, view_metadata None, to each storage reference).
func statePickle(ts []fakeTensor, legacy bool) []byte {
	var p pk
	p.op(0x80, 2).global("collections", "OrderedDict").op(')', 'R', '(')
	for _, f := range ts {
		p.str(f.name).global("torch._utils", "_rebuild_tensor_v2").op('(', '(')
		p.str("storage").global("torch", f.storageType).str(f.key).str("cpu").int(f.numel)
		if legacy {
			p.op('N')
		}
		p.op('t', 'Q').int(f.offset).ints(f.shape).ints(f.stride).op(0x89)
		p.global("collections", "OrderedDict").op(')', 'R', 't', 'R')
	}
	return p.op('u', '.').Bytes()
}

// contiguous is the row-major stride of shape.
func contiguous(shape []int) []int {
	s := make([]int, len(shape))
	n := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = n
		n *= shape[i]
	}
	return s
}

// writeTorchZip writes a torch.save zip archive: archive/data.pkl, archive/byteorder and
// archive/data/<key> per storage, all stored uncompressed.
func writeTorchZip(t *testing.T, path string, pkl []byte, storages map[string][]byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	put := func(name string, data []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	put("archive/data.pkl", pkl)
	put("archive/byteorder", []byte("little"))
	for _, k := range slices.Sorted(maps.Keys(storages)) {
		put("archive/data/"+k, storages[k])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, path, buf.Bytes())
}

// writeTorchLegacy writes the legacy format: magic number, protocol version, system
// information, the state dict, the storage keys, then each storage.
func writeTorchLegacy(t *testing.T, path string, ts []fakeTensor, storages map[string][]byte, keys []string) {
	t.Helper()
	var b bytes.Buffer
	b.Write([]byte{0x80, 2, 0x8a, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, '.'})
	var v pk
	b.Write(v.op(0x80, 2).int(1001).op('.').Bytes())
	var info pk
	b.Write(info.op(0x80, 2, '}', '(').str("little_endian").op(0x88).op('u', '.').Bytes())
	b.Write(statePickle(ts, true))
	var kp pk
	kp.op(0x80, 2, ']', '(')
	for _, k := range keys {
		kp.str(k)
	}
	b.Write(kp.op('e', '.').Bytes())
	for _, k := range keys {
		binary.Write(&b, binary.LittleEndian, int64(len(storages[k])/4))
		b.Write(storages[k])
	}
	mustWrite(t, path, b.Bytes())
}

func f32Bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// TestImportPyTorchBin: a BERT directory whose weights are a pytorch_model.bin (no
// model.safetensors) in the zip or the legacy format initialises the model bit for bit; the
// errors name pytorch_model.bin; with both files present model.safetensors is read.
func TestImportPyTorchBin(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		dir, src := hfBertDir(t)
		raw, _, err := checkpoints.ReadSafetensorsRaw(filepath.Join(dir, ModelFile))
		if err != nil {
			t.Fatal(err)
		}
		var ts []fakeTensor
		storages := map[string][]byte{}
		var keys []string
		slices.SortStableFunc(raw, func(a, b checkpoints.RawTensor) int { // a matrix first
			return len(b.Shape) - len(a.Shape)
		})
		for i, r := range raw {
			key := fmt.Sprint(i)
			keys = append(keys, key)
			storages[key] = r.Data
			ts = append(ts, fakeTensor{name: "bert." + r.Name, key: key, storageType: "FloatStorage", numel: int64(len(r.Data) / 4),
				shape: r.Shape, stride: contiguous(r.Shape)})
		}
		bin := filepath.Join(dir, PyTorchFile)
		if legacy {
			writeTorchLegacy(t, bin, ts, storages, keys)
		} else {
			writeTorchZip(t, bin, statePickle(ts, false), storages)
		}

		// Both present: model.safetensors wins (the .bin's names are prefixed, so the set differs
		// only in the file it names).
		d, err := OpenBiEncoder(dir)
		if err != nil || d.query.set.file != filepath.Join(dir, ModelFile) {
			t.Fatalf("legacy %v, both files: %v, read %s", legacy, err, d.query.set.file)
		}
		os.Remove(filepath.Join(dir, ModelFile))
		dst := tinyModel(t, src.Cfg, true, 2)
		if d, err = InitBiEncoder(dst, dir); err != nil {
			t.Fatalf("legacy %v: %v", legacy, err)
		}
		if d.query.set.file != bin {
			t.Errorf("legacy %v: read %s", legacy, d.query.set.file)
		}
		equalBits(t, src.Params(), dst.Params())

		// A missing and a wrongly shaped tensor are named, with pytorch_model.bin.
		ts[0].shape = []int{ts[0].shape[1], ts[0].shape[0]}
		ts[0].stride = contiguous(ts[0].shape)
		last := ts[len(ts)-1]
		if legacy {
			writeTorchLegacy(t, bin, ts[:len(ts)-1], storages, keys[:len(keys)-1])
		} else {
			writeTorchZip(t, bin, statePickle(ts[:len(ts)-1], false), storages)
		}
		_, err = InitBiEncoder(tinyModel(t, src.Cfg, true, 2), dir)
		var mm *MismatchError
		if !errors.As(err, &mm) || len(mm.Missing) != 1 || len(mm.WrongShape) != 1 ||
			mm.Missing[0].Name != strings.TrimPrefix(last.name, "bert.") || mm.Missing[0].File != bin ||
			mm.WrongShape[0].Name != strings.TrimPrefix(ts[0].name, "bert.") || mm.WrongShape[0].File != bin {
			t.Errorf("legacy %v: %v", legacy, err)
		}
	}
}

// TestTorchHostile: hand-made pytorch_model.bin files of a few hundred bytes that state huge
// sizes, reach outside their storages, hold other objects or are cut short. Each is one line
// naming the file (and the tensor or entry at fault), and reading allocates little.
func TestTorchHostile(t *testing.T) {
	good := []fakeTensor{{name: "w", key: "0", storageType: "FloatStorage", numel: 6, shape: []int{2, 3}, stride: []int{3, 1}}}
	six := map[string][]byte{"0": f32Bytes(1, 2, 3, 4, 5, 6)}
	with := func(edit func(*fakeTensor)) []fakeTensor {
		ts := slices.Clone(good)
		edit(&ts[0])
		return ts
	}
	pickleOf := func(ops ...byte) []byte { return append(append([]byte{0x80, 2}, ops...), '.') }
	u64 := func(op byte, n uint64) []byte {
		b := []byte{op, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.LittleEndian.PutUint64(b[1:], n)
		return b
	}
	many := slices.Clone(good)
	for i := range 20 {
		many = append(many, fakeTensor{name: fmt.Sprint("v", i), key: "0", storageType: "FloatStorage", numel: 6, shape: []int{6}, stride: []int{1}})
	}
	cases := []struct {
		name    string
		pkl     []byte
		storage map[string][]byte
		want    string
	}{
		{"control", statePickle(good, false), six, ""},
		{"huge numel", statePickle(with(func(f *fakeTensor) { f.numel = 1 << 40 }), false), six,
			"entry archive/data/0 holds 24 bytes; its storage is 1099511627776 F32 elements"},
		{"numel overflow", statePickle(with(func(f *fakeTensor) { f.numel = 1 << 62; f.shape = []int{1}; f.stride = []int{1} }), false), six, "overflow"},
		{"shape past storage", statePickle(with(func(f *fakeTensor) { f.shape = []int{4, 3}; f.stride = []int{3, 1} }), false), six,
			`tensor "w": shape [4 3] holds more elements than its storage "0" (6)`},
		{"huge shape", statePickle(with(func(f *fakeTensor) { f.shape = []int{1 << 30, 1 << 30}; f.stride = []int{0, 0} }), false), six,
			`tensor "w": shape [1073741824 1073741824] holds more elements`},
		{"stride past storage", statePickle(with(func(f *fakeTensor) { f.stride = []int{4, 1} }), false), six,
			`tensor "w": shape [2 3], stride [4 1] and offset 0 reach past the 6 elements`},
		{"offset past storage", statePickle(with(func(f *fakeTensor) { f.offset = 1 }), false), six, `tensor "w": shape [2 3], stride [3 1] and offset 1 reach past`},
		{"no storage entry", statePickle(with(func(f *fakeTensor) { f.key = "9" }), false), six, `storage "9": no entry archive/data/9`},
		{"storage type", statePickle(with(func(f *fakeTensor) { f.storageType = "ComplexFloatStorage" }), false), six, "storage type torch.ComplexFloatStorage is not read"},
		{"too many views", statePickle(many, false), six, "the tensors view 504 bytes of storages holding 24"},
		{"global", pickleOf(append([]byte("cposix\nsystem\n"), ')', 'R')...), six, "data.pkl: global posix.system: a state dict of tensors holds no such object"},
		{"not a dict", pickleOf(']'), six, "holds a list, not a state dict"},
		{"not a tensor", pickleOf('}', 'X', 1, 0, 0, 0, 'a', 'K', 7, 's'), six, `entry "a" holds a Python int, not a tensor`},
		{"BINBYTES8", pickleOf(u64(0x8e, 1<<40)...), six, "data.pkl: opcode 0x8e at byte 2: argument of 1099511627776 bytes"},
		{"BINUNICODE8 sign", pickleOf(u64(0x8d, 1<<63)...), six, "data.pkl: opcode 0x8d at byte 2: argument of 9223372036854775808 bytes"},
		{"FRAME", pickleOf(u64(0x95, 1<<33)...), six, "data.pkl: opcode 0x95 at byte 2: argument of 8589934592 bytes"},
		{"BINUNICODE", pickleOf('X', 0xff, 0xff, 0xff, 0x7f), six, "opcode 0x58 at byte 2: argument of 2147483647 bytes"},
		{"LONG1 empty", pickleOf(0x8a, 0), six, "opcode LONG1 at byte 2: an integer of 0 bytes"},
		{"LONG4 long", pickleOf(0x8b, 0, 0, 1, 0), six, "opcode LONG4 at byte 2: an integer of 65536 bytes"},
		{"unknown opcode", pickleOf(0xff), six, "unknown opcode 0xff at byte 2"},
		{"no STOP", []byte{0x80, 2, 'N'}, six, "no STOP opcode in 3 bytes"},
		{"trailing", append(pickleOf('N'), 'N'), six, "1 bytes after the pickle's STOP"},
		{"stack underflow", pickleOf('R'), six, "data.pkl:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), PyTorchFile)
			writeTorchZip(t, path, c.pkl, c.storage)
			var err error
			memcheck.Bounded(t, c.name, func() { _, err = readTorchStateDict(path) })
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), path+": ") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%v, want one line naming %s and containing %q", err, path, c.want)
			}
		})
	}

	// The archive itself: cut short, compressed, big-endian, TorchScript.
	dir := t.TempDir()
	path := filepath.Join(dir, PyTorchFile)
	writeTorchZip(t, path, statePickle(good, false), six)
	full, _ := os.ReadFile(path)
	other := func(name string, entries map[string][]byte, method uint16) {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, k := range slices.Sorted(maps.Keys(entries)) {
			w, _ := zw.CreateHeader(&zip.FileHeader{Name: k, Method: method})
			w.Write(entries[k])
		}
		zw.Close()
		mustWrite(t, path, buf.Bytes())
	}
	for _, c := range []struct {
		name  string
		write func()
		want  string
	}{
		{"truncated", func() { mustWrite(t, path, full[:len(full)-30]) }, "zip: not a valid zip file"},
		{"tiny", func() { mustWrite(t, path, []byte("PK")) }, "2 bytes, not a PyTorch checkpoint"},
		{"not torch", func() { mustWrite(t, path, []byte("hello world, no pickle here")) }, "neither a zip archive nor a legacy PyTorch file"},
		{"compressed", func() {
			other("c", map[string][]byte{"archive/data.pkl": statePickle(good, false), "archive/data/0": six["0"]}, zip.Deflate)
		}, "entry archive/data.pkl is compressed (method 8)"},
		{"big-endian", func() {
			other("b", map[string][]byte{"archive/data.pkl": statePickle(good, false), "archive/data/0": six["0"], "archive/byteorder": []byte("big")}, zip.Store)
		}, `archive/byteorder is "big"; only little-endian`},
		{"torchscript", func() {
			other("s", map[string][]byte{"archive/data.pkl": statePickle(good, false), "archive/constants.pkl": nil}, zip.Store)
		}, "a TorchScript archive"},
		{"no data.pkl", func() { other("n", map[string][]byte{"archive/x": nil}, zip.Store) }, "a zip archive without <name>/data.pkl"},
	} {
		c.write()
		var err error
		memcheck.Bounded(t, c.name, func() { _, err = readTorchStateDict(path) })
		if err == nil || !strings.Contains(err.Error(), path+": ") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming %s and containing %q", c.name, err, path, c.want)
		}
	}

	// The legacy format: storages cut short or of the wrong size, keys naming nothing.
	for _, c := range []struct {
		name string
		cut  int
		keys []string
		sto  map[string][]byte
		want string
	}{
		{"control", 0, []string{"0"}, six, ""},
		{"cut in the data", 3, []string{"0"}, six, `storage "0": 24 bytes at byte`},
		{"cut in the count", 26, []string{"0"}, six, `storage "0": the file ends at byte`},
		{"wrong count", 0, []string{"0"}, map[string][]byte{"0": f32Bytes(1, 2, 3)}, `storage "0" holds 3 elements; the pickle says 6`},
		{"unknown key", 0, []string{"7"}, map[string][]byte{"7": six["0"]}, `storage key 0 (7) names no storage`},
	} {
		writeTorchLegacy(t, path, good, c.sto, c.keys)
		if c.cut > 0 {
			b, _ := os.ReadFile(path)
			mustWrite(t, path, b[:len(b)-c.cut])
		}
		var err error
		memcheck.Bounded(t, c.name, func() { _, err = readTorchStateDict(path) })
		if c.want == "" {
			if err != nil {
				t.Fatalf("legacy control: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), path+": ") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("legacy %s: %v, want one line naming %s and containing %q", c.name, err, path, c.want)
		}
	}
}

// TestTorchDTypeConversion: F16 and BF16 tensors of a pytorch_model.bin are converted to
// float32 exactly (torch's values), and an integer tensor is refused naming the file and the
// tensor.
func TestTorchDTypeConversion(t *testing.T) {
	raw, err := readTorchStateDict("testdata/torch_zip.bin")
	if err != nil {
		t.Fatal(err)
	}
	var keep []checkpoints.RawTensor
	want := map[string][]float32{
		"half": {1.5, -2.25, 65504, float32(math.Ldexp(1, -24)), 0}, // 6e-8 rounds to the subnormal 2^-24
		"bf16": {1, -3, 0.10009765625, 1.0002555517425873e+30},      // torch rounds 0.1 and 1e30 to 8 bits
	}
	for _, r := range raw {
		if want[r.Name] != nil {
			keep = append(keep, r)
		}
	}
	set, _, err := tensorSetOf("pytorch_model.bin", keep, true)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		if got := set.byName[name].Data; !slices.Equal(got, w) {
			t.Errorf("%s: %v, want %v", name, got, w)
		}
	}
	_, _, err = tensorSetOf("pytorch_model.bin", raw, true)
	if err == nil || !strings.Contains(err.Error(), `pytorch_model.bin: tensor "ids": dtype I64, want a floating-point type`) {
		t.Errorf("int tensor: %v", err)
	}
}

// FuzzTorchStateDict reads arbitrary bytes as a pytorch_model.bin (seeds: the zip and legacy
// files of testdata and a pickle alone). It must never panic; an error is one line naming the
// file; what loads holds tensors whose data is prod(shape) elements of their dtype, and the
// read allocates at most a small multiple of the file.
func FuzzTorchStateDict(f *testing.F) {
	for _, name := range []string{"testdata/torch_zip.bin", "testdata/torch_legacy.bin"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(statePickle([]fakeTensor{{name: "w", key: "0", storageType: "FloatStorage", numel: 6, shape: []int{2, 3}, stride: []int{1, 2}}}, true))
	path := filepath.Join(f.TempDir(), PyTorchFile) // reused: a worker runs one input at a time
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var raw []checkpoints.RawTensor
		var err error
		if n := memcheck.Allocated(func() { raw, err = readTorchStateDict(path) }); n > uint64(64*len(data))+1<<20 {
			t.Fatalf("a file of %d bytes allocated %d", len(data), n)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), path+": ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q", err)
			}
			return
		}
		for _, r := range raw {
			n := r.DType.Size()
			for _, d := range r.Shape {
				n *= d
			}
			if n != len(r.Data) {
				t.Fatalf("%s: shape %v of %s, %d bytes", r.Name, r.Shape, r.DType, len(r.Data))
			}
		}
	})
}
