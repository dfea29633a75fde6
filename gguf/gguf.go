package gguf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/ragtrain/ragtrain/internal/bounded"
)

// File is a parsed GGUF header: metadata and tensor infos, with every
// tensor's extent checked against the file. Tensor data is read on demand
// (Float32, Raw) from the path Open was given.
type File struct {
	Version uint32
	// Meta holds the key-value metadata (see the package doc for the Go
	// types of the values).
	Meta map[string]any
	// Tensors in file order.
	Tensors []TensorInfo

	path       string
	size       int64  // file size at Open
	dataOffset uint64 // absolute offset of the data section
	alignment  uint64
	index      map[string]int
	keys       []string // metadata keys in file order
}

// TensorInfo describes one tensor. Dims are in ggml order (Dims[0] is the
// row length); Offset is relative to the data section.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   DType
	Offset uint64
}

// Elements returns the number of elements (the product of Dims; Open has
// checked it does not overflow).
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Bytes returns the size of the tensor's data in the file.
func (t TensorInfo) Bytes() uint64 {
	tr := traits[t.Type]
	return t.Elements() / tr.block * tr.size
}

// Shape returns the dims in row-major (PyTorch) order: Dims reversed.
func (t TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(t.Dims)-1-i] = int(d)
	}
	return s
}

// Metadata value types of the GGUF spec.
const (
	tUint8   = 0
	tInt8    = 1
	tUint16  = 2
	tInt16   = 3
	tUint32  = 4
	tInt32   = 5
	tFloat32 = 6
	tBool    = 7
	tString  = 8
	tArray   = 9
	tUint64  = 10
	tInt64   = 11
	tFloat64 = 12
)

// minValueBytes is the fewest bytes a value of each metadata type occupies,
// used to bound counts before allocating.
var minValueBytes = [...]uint64{1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8}

const (
	magic            = 0x46554747 // "GGUF" little-endian
	defaultAlignment = 32
	maxDims          = 4 // GGML_MAX_DIMS
	maxArrayDepth    = 8 // nested arrays beyond this are refused
)

// Open parses the header, metadata and tensor infos of the GGUF file at
// path and validates them against the file's size: every tensor's data
// [offset, offset+bytes) must lie inside the data section, offsets must be
// aligned, names and keys unique. It does not read tensor data. Errors are
// one line starting "gguf: <path>: ".
func Open(path string) (*File, error) {
	fh, size, err := bounded.Open(path, bounded.Weights) // a regular file (never a FIFO or /dev/zero)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	f, err := parse(io.NewSectionReader(fh, 0, size), size)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f.path = path
	return f, nil
}

// reader reads little-endian fields and knows how many bytes are left.
type reader struct {
	r    *bufio.Reader
	pos  uint64
	size uint64
	buf  [8]byte
}

func (r *reader) left() uint64 { return r.size - r.pos }

var errTruncated = errors.New("file truncated")

func (r *reader) bytes(n uint64, what string) ([]byte, error) {
	if n > r.left() {
		return nil, fmt.Errorf("%s: needs %d bytes at offset %d, file has %d left", what, n, r.pos, r.left())
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		return nil, fmt.Errorf("%s: %w", what, errTruncated)
	}
	r.pos += n
	return b, nil
}

func (r *reader) fixed(n int, what string) ([]byte, error) {
	if uint64(n) > r.left() {
		return nil, fmt.Errorf("%s at offset %d: %w", what, r.pos, errTruncated)
	}
	if _, err := io.ReadFull(r.r, r.buf[:n]); err != nil {
		return nil, fmt.Errorf("%s at offset %d: %w", what, r.pos, errTruncated)
	}
	r.pos += uint64(n)
	return r.buf[:n], nil
}

func (r *reader) u32(what string) (uint32, error) {
	b, err := r.fixed(4, what)
	if err != nil {
		return 0, err
	}
	return le32(b), nil
}

func (r *reader) u64(what string) (uint64, error) {
	b, err := r.fixed(8, what)
	if err != nil {
		return 0, err
	}
	return le64(b), nil
}

func (r *reader) str(what string) (string, error) {
	n, err := r.u64(what + " length")
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n, fmt.Sprintf("%s (length %d)", what, n))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
func le64(b []byte) uint64 { return uint64(le32(b)) | uint64(le32(b[4:]))<<32 }

func parse(src io.Reader, size int64) (*File, error) {
	r := &reader{r: bufio.NewReaderSize(src, 1<<16), size: uint64(size)}
	m, err := r.u32("magic")
	if err != nil {
		return nil, err
	}
	if m != magic {
		return nil, fmt.Errorf("not a GGUF file (magic %q)", string(r.buf[:4]))
	}
	f := &File{Meta: map[string]any{}, index: map[string]int{}, size: size}
	if f.Version, err = r.u32("version"); err != nil {
		return nil, err
	}
	switch {
	case f.Version == 1:
		return nil, fmt.Errorf("GGUF version 1 is not supported (only 2 and 3)")
	case f.Version > 0xffff && bits.ReverseBytes32(f.Version) <= 3:
		return nil, fmt.Errorf("big-endian GGUF (version %d byte-swapped) is not supported", bits.ReverseBytes32(f.Version))
	case f.Version != 2 && f.Version != 3:
		return nil, fmt.Errorf("unsupported GGUF version %d (only 2 and 3)", f.Version)
	}
	nt, err := r.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nkv, err := r.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// A key-value pair takes at least 8 (key length) + 4 (type) + 1 (value)
	// bytes, a tensor info at least 8 (name length) + 4 (n_dims) + 4 (type)
	// + 8 (offset).
	if nkv > r.left()/13 {
		return nil, fmt.Errorf("metadata count %d cannot fit in the %d bytes left", nkv, r.left())
	}
	f.keys = make([]string, 0, nkv)
	for i := uint64(0); i < nkv; i++ {
		key, err := r.str(fmt.Sprintf("metadata %d key", i))
		if err != nil {
			return nil, err
		}
		if _, dup := f.Meta[key]; dup {
			return nil, fmt.Errorf("metadata key %q appears twice", key)
		}
		typ, err := r.u32(fmt.Sprintf("metadata %q type", key))
		if err != nil {
			return nil, err
		}
		v, err := r.value(typ, key, 0)
		if err != nil {
			return nil, err
		}
		f.Meta[key] = v
		f.keys = append(f.keys, key)
	}
	f.alignment = defaultAlignment
	if v, ok := f.Meta["general.alignment"]; ok {
		a, ok := asUint(v)
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<30 {
			return nil, fmt.Errorf("metadata general.alignment %v: want a power of two up to 2^30", v)
		}
		f.alignment = a
	}
	if nt > r.left()/24 {
		return nil, fmt.Errorf("tensor count %d cannot fit in the %d bytes left", nt, r.left())
	}
	f.Tensors = make([]TensorInfo, 0, nt)
	for i := uint64(0); i < nt; i++ {
		t, err := r.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := f.index[t.Name]; dup {
			return nil, fmt.Errorf("tensor %q appears twice", t.Name)
		}
		f.index[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	// The data section starts at the next multiple of the alignment.
	f.dataOffset = (r.pos + f.alignment - 1) / f.alignment * f.alignment
	if nt > 0 && f.dataOffset > r.size {
		return nil, fmt.Errorf("data section at offset %d starts past the end of the file (%d bytes)", f.dataOffset, r.size)
	}
	dataLen := uint64(0)
	if f.dataOffset <= r.size {
		dataLen = r.size - f.dataOffset
	}
	for _, t := range f.Tensors {
		if t.Offset%f.alignment != 0 {
			return nil, fmt.Errorf("tensor %q: offset %d is not a multiple of the alignment %d", t.Name, t.Offset, f.alignment)
		}
		n := t.Bytes()
		if t.Offset > dataLen || n > dataLen-t.Offset {
			return nil, fmt.Errorf("tensor %q: data [%d, %d+%d) runs past the end of the data section (%d bytes)", t.Name, t.Offset, t.Offset, n, dataLen)
		}
	}
	return f, nil
}

func (r *reader) tensorInfo(i uint64) (TensorInfo, error) {
	var t TensorInfo
	name, err := r.str(fmt.Sprintf("tensor %d name", i))
	if err != nil {
		return t, err
	}
	t.Name = name
	nd, err := r.u32(fmt.Sprintf("tensor %q n_dims", name))
	if err != nil {
		return t, err
	}
	if nd > maxDims {
		return t, fmt.Errorf("tensor %q: %d dims (at most %d)", name, nd, maxDims)
	}
	t.Dims = make([]uint64, nd)
	n := uint64(1)
	for j := range t.Dims {
		if t.Dims[j], err = r.u64(fmt.Sprintf("tensor %q dim %d", name, j)); err != nil {
			return t, err
		}
		hi, lo := bits.Mul64(n, t.Dims[j])
		if hi != 0 || lo > math.MaxInt64 {
			return t, fmt.Errorf("tensor %q: dims %v overflow", name, t.Dims[:j+1])
		}
		n = lo
	}
	typ, err := r.u32(fmt.Sprintf("tensor %q type", name))
	if err != nil {
		return t, err
	}
	t.Type = DType(typ)
	tr, ok := traits[t.Type]
	if !ok {
		return t, fmt.Errorf("tensor %q: unknown ggml type %d", name, typ)
	}
	row := uint64(1) // a 0-dim tensor is one element
	if nd > 0 {
		row = t.Dims[0]
	}
	if row%tr.block != 0 {
		return t, fmt.Errorf("tensor %q: row length %d is not a multiple of the %s block size %d", name, row, t.Type, tr.block)
	}
	if hi, _ := bits.Mul64(n/tr.block, tr.size); hi != 0 {
		return t, fmt.Errorf("tensor %q: dims %v overflow", name, t.Dims)
	}
	if t.Offset, err = r.u64(fmt.Sprintf("tensor %q offset", name)); err != nil {
		return t, err
	}
	return t, nil
}

// value reads one metadata value of type typ; key names it in errors.
func (r *reader) value(typ uint32, key string, depth int) (any, error) {
	what := fmt.Sprintf("metadata %q", key)
	if typ <= tFloat64 && typ != tString && typ != tArray { // a scalar of 1, 2, 4 or 8 bytes
		b, err := r.fixed(int(minValueBytes[typ]), what)
		if err != nil {
			return nil, err
		}
		u := uint64(0)
		for i := len(b) - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		switch typ {
		case tUint8:
			return uint8(u), nil
		case tInt8:
			return int8(u), nil
		case tUint16:
			return uint16(u), nil
		case tInt16:
			return int16(u), nil
		case tUint32:
			return uint32(u), nil
		case tInt32:
			return int32(u), nil
		case tFloat32:
			return math.Float32frombits(uint32(u)), nil
		case tUint64:
			return u, nil
		case tInt64:
			return int64(u), nil
		case tFloat64:
			return math.Float64frombits(u), nil
		}
		if u > 1 {
			return nil, fmt.Errorf("%s: bool byte %d (want 0 or 1)", what, u)
		}
		return u == 1, nil
	}
	switch typ {
	case tString:
		return r.str(what)
	case tArray:
		if depth >= maxArrayDepth {
			return nil, fmt.Errorf("%s: arrays nested deeper than %d", what, maxArrayDepth)
		}
		et, err := r.u32(what + " array type")
		if err != nil {
			return nil, err
		}
		if int(et) >= len(minValueBytes) {
			return nil, fmt.Errorf("%s: unknown array element type %d", what, et)
		}
		n, err := r.u64(what + " array length")
		if err != nil {
			return nil, err
		}
		if n > r.left()/minValueBytes[et] {
			return nil, fmt.Errorf("%s: array length %d cannot fit in the %d bytes left", what, n, r.left())
		}
		if et == tString {
			out := make([]string, n)
			for i := range out {
				if out[i], err = r.str(fmt.Sprintf("%s[%d]", what, i)); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = r.value(et, key, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: unknown value type %d", what, typ)
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Keys returns the metadata keys in file order.
func (f *File) Keys() []string { return append([]string(nil), f.keys...) }

// Alignment returns the data alignment (general.alignment, default 32).
func (f *File) Alignment() uint64 { return f.alignment }

// Path returns the path Open read.
func (f *File) Path() string { return f.path }

// String returns a string metadata value.
func (f *File) String(key string) (string, bool) {
	s, ok := f.Meta[key].(string)
	return s, ok
}

// Uint returns an integer metadata value of any integer type, if it is not
// negative.
func (f *File) Uint(key string) (uint64, bool) { return asUint(f.Meta[key]) }

// Float returns a float32 or float64 metadata value (integers are
// converted too).
func (f *File) Float(key string) (float64, bool) {
	switch v := f.Meta[key].(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	if i, ok := asInt(f.Meta[key]); ok {
		return float64(i), true
	}
	return 0, false
}

// Bool returns a bool metadata value.
func (f *File) Bool(key string) (bool, bool) {
	b, ok := f.Meta[key].(bool)
	return b, ok
}

// Strings returns an array-of-strings metadata value.
func (f *File) Strings(key string) ([]string, bool) {
	s, ok := f.Meta[key].([]string)
	return s, ok
}

// Ints returns an array of integers (any integer element type) as int64s.
// An empty array is returned as an empty slice.
func (f *File) Ints(key string) ([]int64, bool) {
	a, ok := f.Meta[key].([]any)
	if !ok {
		return nil, false
	}
	out := make([]int64, len(a))
	for i, v := range a {
		if out[i], ok = asInt(v); !ok {
			return nil, false
		}
	}
	return out, true
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

func asUint(v any) (uint64, bool) {
	if x, ok := v.(uint64); ok {
		return x, true
	}
	i, ok := asInt(v)
	if !ok || i < 0 {
		return 0, false
	}
	return uint64(i), true
}

// Raw returns the tensor's bytes as stored (its extent was checked by
// Open). The file must still have the size it had at Open.
func (f *File) Raw(name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no tensor %q", f.path, name)
	}
	fh, size, err := bounded.Open(f.path, bounded.Weights)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	if size != f.size {
		return nil, fmt.Errorf("gguf: %s: file changed size since Open (%d, now %d bytes)", f.path, f.size, size)
	}
	b := make([]byte, t.Bytes())
	if _, err := fh.ReadAt(b, int64(f.dataOffset+t.Offset)); err != nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", f.path, name, err)
	}
	return b, nil
}

// Float32 returns the named tensor dequantized to float32, with its shape in
// row-major (PyTorch) order: Dims reversed, so a ggml [cols, rows] matrix is
// returned as shape [rows, cols] with element (i, j) at i*cols+j. Supported
// types: F32, F16, BF16, Q8_0, Q4_0, Q4_1 (see the package doc).
func (f *File) Float32(name string) ([]float32, []int, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, nil, fmt.Errorf("gguf: %s: no tensor %q", f.path, name)
	}
	if _, ok := dequantizers[t.Type]; !ok {
		return nil, nil, fmt.Errorf("gguf: %s: tensor %q: cannot dequantize type %s (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1)", f.path, name, t.Type)
	}
	raw, err := f.Raw(name)
	if err != nil {
		return nil, nil, err
	}
	out := make([]float32, t.Elements())
	if err := Dequantize(t.Type, raw, out); err != nil {
		return nil, nil, fmt.Errorf("gguf: %s: tensor %q: %w", f.path, name, err)
	}
	return out, t.Shape(), nil
}
