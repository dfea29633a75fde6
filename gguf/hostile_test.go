package gguf

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/internal/memcheck"
)

// raw builds GGUF bytes field by field, so that tests can lie in any field.
type raw struct{ bytes.Buffer }

func (r *raw) u32(v uint32) *raw { binary.Write(&r.Buffer, binary.LittleEndian, v); return r }
func (r *raw) u64(v uint64) *raw { binary.Write(&r.Buffer, binary.LittleEndian, v); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.WriteString(s); return r }
func (r *raw) pad(n int) *raw    { r.Write(make([]byte, n)); return r }

func header(nt, nkv uint64) *raw {
	r := &raw{}
	return r.u32(magic).u32(3).u64(nt).u64(nkv)
}

// tensor appends a tensor info.
func (r *raw) tensor(name string, dims []uint64, typ uint32, off uint64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	return r.u32(typ).u64(off)
}

// openHostile writes data, opens it with a 100 MB allocation budget and
// returns the error, which must be one line naming the file.
func openHostile(t *testing.T, name string, data []byte) error {
	t.Helper()
	p := filepath.Join(t.TempDir(), name+".gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	memcheck.Bounded(t, name, func() { _, err = Open(p) })
	if err == nil {
		t.Fatalf("%s: opened", name)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "gguf: "+p+": ") {
		t.Errorf("%s: error %q is not one line naming the file", name, msg)
	}
	return err
}

func TestHostileFiles(t *testing.T) {
	kb := func(r *raw) []byte { return r.pad(4096).Bytes() } // a few KB of zeros after the lie
	for _, c := range []struct {
		name, want string
		data       []byte
	}{
		{"empty", "magic", nil},
		{"bad-magic", "not a GGUF file", []byte("GGML\x03\x00\x00\x00")},
		{"version1", "version 1", (&raw{}).u32(magic).u32(1).pad(64).Bytes()},
		{"big-endian", "big-endian", (&raw{}).u32(magic).u32(3 << 24).pad(64).Bytes()},
		{"version9", "version 9", (&raw{}).u32(magic).u32(9).pad(64).Bytes()},
		{"tensor-count-2^40", "tensor count 1099511627776", kb(header(1<<40, 0))},
		{"kv-count-2^40", "metadata count 1099511627776", kb(header(0, 1<<40))},
		{"key-length-huge", "metadata 0 key (length 4611686018427387904)", kb(header(0, 1).u64(1 << 62))},
		{"string-value-huge", `metadata "k" (length 1152921504606846976)`, kb(header(0, 1).str("k").u32(tString).u64(1 << 60))},
		{"array-length-huge", `metadata "k": array length 1125899906842624`, kb(header(0, 1).str("k").u32(tArray).u32(tUint64).u64(1 << 50))},
		{"array-of-strings-huge", `metadata "k": array length`, kb(header(0, 1).str("k").u32(tArray).u32(tString).u64(1 << 40))},
		{"array-type-unknown", "unknown array element type 77", kb(header(0, 1).str("k").u32(tArray).u32(77).u64(1))},
		{"value-type-unknown", "unknown value type 13", kb(header(0, 1).str("k").u32(13))},
		{"bool-2", "bool byte 2", kb(header(0, 1).str("k").u32(tBool).pad(0).u32(2))},
		{"nested-too-deep", "nested deeper", kb(func() *raw {
			r := header(0, 1).str("k").u32(tArray)
			for i := 0; i < 10; i++ {
				r.u32(tArray).u64(1)
			}
			return r
		}())},
		{"duplicate-key", `"k" appears twice`, kb(header(0, 2).str("k").u32(tUint8).pad(1).str("k").u32(tUint8).pad(1))},
		{"alignment-3", "general.alignment 3", kb(header(0, 1).str("general.alignment").u32(tUint32).u32(3))},
		{"alignment-0", "general.alignment 0", kb(header(0, 1).str("general.alignment").u32(tUint32).u32(0))},
		{"name-length-huge", "tensor 0 name (length", kb(header(1, 0).u64(1 << 61))},
		{"ndims-5", `tensor "t": 5 dims`, kb(header(1, 0).tensor("t", []uint64{1, 1, 1, 1, 1}, 0, 0))},
		{"dims-overflow", `tensor "t": dims [4294967296 4294967296] overflow`, kb(header(1, 0).tensor("t", []uint64{1 << 32, 1 << 32}, 0, 0))},
		{"dims-overflow-bytes", `tensor "t": dims`, kb(header(1, 0).tensor("t", []uint64{1 << 62}, 0, 0))},
		{"unknown-type", `tensor "blk.0.w": unknown ggml type 99`, kb(header(1, 0).tensor("blk.0.w", []uint64{32}, 99, 0))},
		{"q8_1-refused", `tensor "t": unknown ggml type 9`, kb(header(1, 0).tensor("t", []uint64{32}, 9, 0))},
		{"row-not-block", `tensor "t": row length 33 is not a multiple of the Q4_1 block size 32`, kb(header(1, 0).tensor("t", []uint64{33}, 3, 0))},
		{"offset-past-end", `tensor "t": data [1099511627776,`, kb(header(1, 0).tensor("t", []uint64{8}, 0, 1<<40))},
		{"offset-wraps", `tensor "t": data`, kb(header(1, 0).tensor("t", []uint64{8}, 0, ^uint64(31)))},
		{"size-past-end", `tensor "t": data [0, 0+4000000)`, kb(header(1, 0).tensor("t", []uint64{1000, 1000}, 0, 0))},
		{"offset-unaligned", `tensor "t": offset 4 is not a multiple of the alignment 32`, kb(header(1, 0).tensor("t", []uint64{1}, 0, 4))},
		{"duplicate-tensor", `tensor "t" appears twice`, kb(header(2, 0).tensor("t", []uint64{1}, 0, 0).tensor("t", []uint64{1}, 0, 32))},
		{"data-section-missing", "data section at offset 64 starts past the end", header(1, 0).tensor("t", []uint64{1}, 0, 0).Bytes()},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := openHostile(t, c.name, c.data)
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}

// Every proper prefix of a valid file that cuts into its header or tensor
// data is an error, never a panic or a partial File.
func TestTruncatedAtEveryByte(t *testing.T) {
	p, _, _ := sample(t, t.TempDir())
	data, _ := os.ReadFile(p)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	end := uint64(0)
	for _, ti := range f.Tensors {
		end = max(end, f.dataOffset+ti.Offset+ti.Bytes())
	}
	for n := 0; n < int(end); n++ {
		openHostile(t, "prefix", data[:n])
	}
}

func TestNotRegularFile(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{dir, "/dev/zero"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		var err error
		memcheck.Bounded(t, p, func() { _, err = Open(p) })
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Errorf("missing file: %v", err)
	}
}

// A file that shrinks after Open is refused by Float32, not read short.
func TestFileChangedAfterOpen(t *testing.T) {
	p, _, _ := sample(t, t.TempDir())
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Float32("mat"); err == nil || !strings.Contains(err.Error(), "changed size") {
		t.Errorf("Float32 after truncation: %v", err)
	}
}

// FuzzGGUF: Open never panics or over-allocates, and whatever it accepts
// dequantizes (for the supported types) to exactly Elements values.
func FuzzGGUF(f *testing.F) {
	p, _, _ := sample(f, f.TempDir())
	valid, _ := os.ReadFile(p)
	f.Add(valid)
	f.Add(header(1, 0).tensor("t", []uint64{32}, 3, 0).pad(32).Bytes())
	f.Add(header(0, 1).str("k").u32(tArray).u32(tString).u64(2).str("a").str("b").Bytes())
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.gguf")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var g *File
		var err error
		if n := memcheck.Allocated(func() { g, err = Open(path) }); n > uint64(64*len(data))+1<<20 {
			t.Fatalf("Open allocated %d bytes for a %d-byte file", n, len(data))
		}
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		for _, ti := range g.Tensors {
			if _, ok := dequantizers[ti.Type]; !ok {
				continue
			}
			x, shape, err := g.Float32(ti.Name)
			if err != nil {
				t.Fatalf("%s: %v", ti.Name, err)
			}
			n := 1
			for _, d := range shape {
				n *= d
			}
			if uint64(len(x)) != ti.Elements() || n != len(x) {
				t.Fatalf("%s: %d values, shape %v, %d elements", ti.Name, len(x), shape, ti.Elements())
			}
		}
	})
}
