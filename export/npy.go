package export

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"regexp"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// The .npy format, version 1.0 (numpy/lib/format.py, NEP 1):
//
//	6 bytes   magic "\x93NUMPY"
//	2 bytes   version 1, 0
//	2 bytes   HEADER_LEN, unsigned little-endian
//	HEADER_LEN bytes  the Python literal {'descr': '<f4', 'fortran_order': False, 'shape': (N, D), }
//	          padded with spaces and ended by '\n' so that 10+HEADER_LEN is a multiple of 64
//	rest      the values, little-endian, row-major (C order)
//
// The header is padded exactly as numpy >= 1.23 pads it (21 characters reserved for the first
// dimension, so the array can grow in place, then spaces to the 64-byte boundary), so for the
// same array the file is byte for byte what numpy.save writes.

const (
	npyMagic      = "\x93NUMPY"
	npyAlign      = 64
	npyGrowDigits = 21 // numpy's GROWTH_AXIS_MAX_DIGITS
	npyMaxDims    = 64 // numpy's NPY_MAXDIMS (2.x; 32 before)
)

// npyHeader returns the magic, version and padded header of a C-order array.
func npyHeader(descr string, shape []int) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := "(" + strings.Join(dims, ", ") + ")"
	if len(shape) == 1 {
		tuple = "(" + dims[0] + ",)"
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, tuple)
	if len(shape) > 0 {
		h += strings.Repeat(" ", npyGrowDigits-len(dims[0]))
	}
	hlen := len(h) + 1 // the newline
	pad := npyAlign - (len(npyMagic)+2+2+hlen)%npyAlign
	h += strings.Repeat(" ", pad) + "\n"
	out := append([]byte(npyMagic), 1, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(len(h)))
	return append(out, h...)
}

// checkShape checks that shape (at most 64 dimensions, none negative) holds n values, without
// overflow.
func checkShape(path string, shape []int, n int) error {
	if len(shape) > npyMaxDims {
		return fmt.Errorf("%s: npy: shape %v has %d dimensions, numpy allows %d", path, shape, len(shape), npyMaxDims)
	}
	want := 1
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("%s: npy: negative dimension in shape %v", path, shape)
		}
		hi, lo := bits.Mul64(uint64(want), uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return fmt.Errorf("%s: npy: shape %v holds more than 2^63 values, %d given", path, shape, n)
		}
		want = int(lo)
	}
	if want != n {
		return fmt.Errorf("%s: npy: shape %v holds %d values, %d given", path, shape, want, n)
	}
	return nil
}

// WriteNPYFloat32 writes data, row-major with the given shape (e.g. [N, H]), to path as a
// little-endian float32 ('<f4') .npy file, version 1.0, atomically (temporary file, rename).
func WriteNPYFloat32(path string, data []float32, shape ...int) error {
	return writeNPYAs(path, npyFloat32, data, shape)
}

// WriteNPYInt64 writes data, row-major with the given shape, as a little-endian int64 ('<i8')
// .npy file, version 1.0, atomically.
func WriteNPYInt64(path string, data []int64, shape ...int) error {
	return writeNPYAs(path, npyInt64, data, shape)
}

// writeNPYAs writes data, row-major with the given shape, to path as a .npy file of dtype t,
// version 1.0, atomically.
func writeNPYAs[T any](path string, t npyDtype[T], data []T, shape []int) error {
	if err := checkShape(path, shape, len(data)); err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		if _, err := w.Write(npyHeader(t.descr, shape)); err != nil {
			return err
		}
		b := make([]byte, t.size)
		for _, v := range data {
			t.put(b, v)
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	})
}

var (
	npyDescrRE = regexp.MustCompile(`'descr':\s*'([^']*)'`)
	npyOrderRE = regexp.MustCompile(`'fortran_order':\s*(True|False)`)
	npyShapeRE = regexp.MustCompile(`'shape':\s*\(([0-9,\s]*)\)`)
)

// readNPY reads a .npy file of versions 1.0 to 3.0 and returns its descr, shape and data bytes.
func readNPY(path string) (string, []int, []byte, error) {
	buf, err := bounded.ReadFile(path, bounded.Weights)
	if err != nil {
		return "", nil, nil, err
	}
	return parseNPY(path, buf)
}

// parseNPY is readNPY on the bytes of the file at path.
func parseNPY(path string, buf []byte) (string, []int, []byte, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s: npy: %s", path, fmt.Sprintf(format, a...))
	}
	if len(buf) < 10 || string(buf[:6]) != npyMagic {
		return "", nil, nil, bad("not a .npy file (no \\x93NUMPY magic)")
	}
	var hlen, start int
	switch buf[6] {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(buf[8:])), 10
	case 2, 3:
		if len(buf) < 12 {
			return "", nil, nil, bad("file is %d bytes, truncated in the header length", len(buf))
		}
		hlen, start = int(binary.LittleEndian.Uint32(buf[8:])), 12
	default:
		return "", nil, nil, bad("unknown format version %d.%d", buf[6], buf[7])
	}
	if start+hlen > len(buf) {
		return "", nil, nil, bad("header of %d bytes runs past the end of the %d-byte file (truncated?)", hlen, len(buf))
	}
	h := string(buf[start : start+hlen])
	d, o, s := npyDescrRE.FindStringSubmatch(h), npyOrderRE.FindStringSubmatch(h), npyShapeRE.FindStringSubmatch(h)
	if d == nil || o == nil || s == nil {
		return "", nil, nil, bad("header %q lacks descr, fortran_order or shape", strings.TrimSpace(h))
	}
	if o[1] == "True" {
		return "", nil, nil, bad("fortran_order arrays are not supported; save with C order")
	}
	var shape []int
	for _, f := range strings.Split(s[1], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return "", nil, nil, bad("shape (%s): %v", s[1], err)
		}
		shape = append(shape, n)
	}
	if len(shape) > npyMaxDims {
		return "", nil, nil, bad("shape (%s) has %d dimensions, numpy allows %d", s[1], len(shape), npyMaxDims)
	}
	return d[1], shape, buf[start+hlen:], nil
}

// npyCount returns the number of values of shape, checking with overflow-safe arithmetic,
// before anything is allocated, that they fill the data section exactly (size bytes each).
func npyCount(path string, shape []int, data []byte, size int) (int, error) {
	n := 1
	for _, d := range shape {
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if hi != 0 || lo > math.MaxInt64/uint64(size) {
			return 0, fmt.Errorf("%s: npy: shape %v holds more than 2^63 bytes of data, the file has %d", path, shape, len(data))
		}
		n = int(lo)
	}
	if n*size != len(data) {
		return 0, fmt.Errorf("%s: npy: shape %v needs %d bytes of data, the file has %d (truncated?)", path, shape, n*size, len(data))
	}
	return n, nil
}

// ReadNPYFloat32 reads a little-endian float32 .npy file written by WriteNPYFloat32 or numpy
// (C order) and returns its values, row-major, and its shape.
func ReadNPYFloat32(path string) ([]float32, []int, error) { return readNPYAs(path, npyFloat32) }

func decodeNPYFloat32(path, descr string, shape []int, data []byte) ([]float32, []int, error) {
	return decodeNPYAs(path, descr, shape, data, npyFloat32)
}

// ReadNPYInt64 reads a little-endian int64 .npy file (C order).
func ReadNPYInt64(path string) ([]int64, []int, error) { return readNPYAs(path, npyInt64) }

func decodeNPYInt64(path, descr string, shape []int, data []byte) ([]int64, []int, error) {
	return decodeNPYAs(path, descr, shape, data, npyInt64)
}

// npyDtype is a dtype the readers and writers take: its descr, its name in errors, the bytes of
// a value, the encoding of one value and the decoding of a data section into values.
type npyDtype[T any] struct {
	descr, name string
	size        int
	put         func(b []byte, v T)
	decode      func(out []T, data []byte)
}

var (
	npyFloat32 = npyDtype[float32]{"<f4", "little-endian float32", 4,
		func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) },
		func(out []float32, data []byte) {
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
		}}
	npyInt64 = npyDtype[int64]{"<i8", "little-endian int64", 8,
		func(b []byte, v int64) { binary.LittleEndian.PutUint64(b, uint64(v)) },
		func(out []int64, data []byte) {
			for i := range out {
				out[i] = int64(binary.LittleEndian.Uint64(data[8*i:]))
			}
		}}
)

// readNPYAs reads a .npy file of dtype t (C order) and returns its values, row-major, and its
// shape.
func readNPYAs[T any](path string, t npyDtype[T]) ([]T, []int, error) {
	descr, shape, data, err := readNPY(path)
	if err != nil {
		return nil, nil, err
	}
	return decodeNPYAs(path, descr, shape, data, t)
}

// decodeNPYAs decodes the data section of a .npy file after checking that descr is t's and that
// the data fills shape exactly.
func decodeNPYAs[T any](path, descr string, shape []int, data []byte, t npyDtype[T]) ([]T, []int, error) {
	if descr != t.descr {
		return nil, nil, fmt.Errorf("%s: npy: dtype %q, want '%s' (%s)", path, descr, t.descr, t.name)
	}
	n, err := npyCount(path, shape, data, t.size)
	if err != nil {
		return nil, nil, err
	}
	out := make([]T, n)
	t.decode(out, data)
	return out, shape, nil
}
