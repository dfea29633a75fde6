package export

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNPYHeaderBytes spells out the header numpy.save writes for a float32 array of shape
// (2, 3): version 1.0, the dict, spaces, and a newline ending at byte 128 (a multiple of 64).
func TestNPYHeaderBytes(t *testing.T) {
	dict := "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
	want := append([]byte("\x93NUMPY\x01\x00"), 118, 0) // HEADER_LEN = 128 - 10
	want = append(want, dict...)
	want = append(want, strings.Repeat(" ", 128-10-len(dict)-1)...)
	want = append(want, '\n')
	got := npyHeader("<f4", []int{2, 3})
	if !bytes.Equal(got, want) {
		t.Fatalf("header\n%q\nwant\n%q", got, want)
	}
	if len(got)%64 != 0 {
		t.Fatalf("header is %d bytes, not a multiple of 64", len(got))
	}
}

// TestNPYMatchesNumpy compares our files byte for byte with numpy.save's (testdata/gen_npy.py).
func TestNPYMatchesNumpy(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		golden string
		write  func(path string) error
	}{
		{"f4_2x3.npy", func(p string) error {
			return WriteNPYFloat32(p, []float32{0, 1.5, -2, 3.25e-8, 65504, float32(math.Copysign(0, -1))}, 2, 3)
		}},
		{"f4_5.npy", func(p string) error { return WriteNPYFloat32(p, []float32{1, 2, 3, 4, 5}, 5) }},
		{"f4_0x4.npy", func(p string) error { return WriteNPYFloat32(p, nil, 0, 4) }},
		{"f4_scalar.npy", func(p string) error { return WriteNPYFloat32(p, []float32{7.5}) }},
		{"i8_2x4.npy", func(p string) error { return WriteNPYInt64(p, []int64{101, 2023, 102, 0, -1, 1 << 40, 3, 4}, 2, 4) }},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			path := filepath.Join(dir, c.golden)
			if err := c.write(path); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			want, err := os.ReadFile(filepath.Join("testdata", c.golden))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("differs from numpy.save:\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestNPYRead(t *testing.T) {
	f, shape, err := ReadNPYFloat32(filepath.Join("testdata", "f4_2x3.npy"))
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 1.5, -2, 3.25e-8, 65504, float32(math.Copysign(0, -1))}
	if !slices.Equal(shape, []int{2, 3}) || len(f) != 6 {
		t.Fatalf("shape %v, %d values", shape, len(f))
	}
	for i := range want {
		if math.Float32bits(f[i]) != math.Float32bits(want[i]) {
			t.Errorf("[%d] = %v, want %v", i, f[i], want[i])
		}
	}
	ids, shape, err := ReadNPYInt64(filepath.Join("testdata", "i8_2x4.npy"))
	if err != nil || !slices.Equal(shape, []int{2, 4}) || !slices.Equal(ids, []int64{101, 2023, 102, 0, -1, 1 << 40, 3, 4}) {
		t.Fatalf("int64: %v %v %v", ids, shape, err)
	}
	if _, shape, err := ReadNPYFloat32(filepath.Join("testdata", "f4_scalar.npy")); err != nil || len(shape) != 0 {
		t.Fatalf("scalar: shape %v, %v", shape, err)
	}
}

func TestNPYErrors(t *testing.T) {
	dir := t.TempDir()
	good, _ := os.ReadFile(filepath.Join("testdata", "f4_2x3.npy"))
	fortran := bytes.Replace(slices.Clone(good), []byte("False"), []byte("True "), 1)
	hdr := binary.LittleEndian.Uint16(good[8:])
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"not npy", []byte("PK\x03\x04 a zip file"), "no \\x93NUMPY magic"},
		{"truncated data", good[:len(good)-1], "needs 24 bytes of data, the file has 23"},
		{"truncated header", good[:int(hdr)], "runs past the end"},
		{"fortran order", fortran, "fortran_order"},
	}
	for _, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".npy")
		os.WriteFile(path, c.file, 0o644)
		_, _, err := ReadNPYFloat32(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", c.name, err, path, c.want)
		}
	}
	if _, _, err := ReadNPYInt64(filepath.Join("testdata", "f4_2x3.npy")); err == nil || !strings.Contains(err.Error(), `dtype "<f4"`) {
		t.Errorf("float32 file read as int64: %v", err)
	}
	if err := WriteNPYFloat32(filepath.Join(dir, "x.npy"), []float32{1, 2, 3}, 2, 2); err == nil || !strings.Contains(err.Error(), "shape [2 2] holds 4 values, 3 given") {
		t.Errorf("shape mismatch on write: %v", err)
	}
}
