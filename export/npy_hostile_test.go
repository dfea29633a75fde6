package export

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/internal/memcheck"
)

// npyFile builds a version 1.0 .npy file with the given header dict and data bytes.
func npyFile(dict string, data []byte) []byte {
	out := append([]byte(npyMagic), 1, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(len(dict)+1))
	out = append(out, dict...)
	out = append(out, '\n')
	return append(out, data...)
}

// TestNPYHostileShapes holds the shapes of issue 19: (4611686018427387904,) used to panic in
// makeslice and (9223372036854775807, 9223372036854775807) over 4 bytes returned one value
// because the element count overflowed. Each is now one error, for both readers, with little
// allocated.
func TestNPYHostileShapes(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		shape string
		data  int
		want  string
	}{
		{"(4611686018427387904,)", 8, "shape [4611686018427387904] holds more than 2^63 bytes of data, the file has 8"},
		{"(9223372036854775807, 9223372036854775807)", 8, "shape [9223372036854775807 9223372036854775807] holds more than 2^63 bytes of data, the file has 8"},
		{"(1152921504606846976,)", 8, "shape [1152921504606846976] "}, // 2^62 bytes of f4, 2^63 of i8
		{"(4294967296, 4294967296)", 8, "shape [4294967296 4294967296] holds more than 2^63 bytes"},
		{"(3, 0, 9223372036854775807)", 0, ""}, // no values: loads
		{"(2,)", 4, "shape [2] needs"},
	}
	for i, c := range cases {
		for _, descr := range []string{"<f4", "<i8"} {
			size := 4
			if descr == "<i8" {
				size = 8
			}
			path := filepath.Join(dir, strings.Repeat("x", i+1)+descr[1:]+".npy")
			data := make([]byte, c.data)
			if c.want == "" {
				data = nil
			}
			mustWrite(t, path, npyFile("{'descr': '"+descr+"', 'fortran_order': False, 'shape': "+c.shape+", }", data))
			var err error
			var n int
			memcheck.Bounded(t, c.shape, func() {
				if size == 4 {
					var v []float32
					v, _, err = ReadNPYFloat32(path)
					n = len(v)
				} else {
					var v []int64
					v, _, err = ReadNPYInt64(path)
					n = len(v)
				}
			})
			switch {
			case c.want == "" && (err != nil || n != 0):
				t.Errorf("%s %s: %d values, %v; want none and no error", descr, c.shape, n, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), path+": npy: ") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
				t.Errorf("%s %s: error %v, want %q", descr, c.shape, err, c.want)
			}
		}
	}
	if err := WriteNPYFloat32(filepath.Join(dir, "w.npy"), nil, 1<<32, 1<<32); err == nil || !strings.Contains(err.Error(), "more than 2^63 values") {
		t.Errorf("writing an overflowing shape: %v", err)
	}
}

func mustWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
