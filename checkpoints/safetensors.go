package checkpoints

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// DType is a safetensors element type, spelled as in the header ("F32", "I64", ...).
type DType string

// The element types of the safetensors format. The reader knows the size of every one of them
// (so any file from the Python library parses); conversion to Go slices exists for F32, F64 and
// I64 only.
const (
	BOOL    DType = "BOOL"
	U8      DType = "U8"
	I8      DType = "I8"
	F8E5M2  DType = "F8_E5M2"
	F8E4M3  DType = "F8_E4M3"
	I16     DType = "I16"
	U16     DType = "U16"
	F16     DType = "F16"
	BF16    DType = "BF16"
	I32     DType = "I32"
	U32     DType = "U32"
	F32     DType = "F32"
	F64     DType = "F64"
	I64     DType = "I64"
	U64     DType = "U64"
	headerK       = "__metadata__"
)

// dtypeOrder lists the types in the order of the Rust library's enum; files are laid out by
// descending position in it (then by name), which keeps every tensor aligned to its element size.
var dtypeOrder = []DType{BOOL, U8, I8, F8E5M2, F8E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64}

// Size returns the element size in bytes, 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case BOOL, U8, I8, F8E5M2, F8E4M3:
		return 1
	case I16, U16, F16, BF16:
		return 2
	case I32, U32, F32:
		return 4
	case F64, I64, U64:
		return 8
	}
	return 0
}

func (d DType) rank() int { return slices.Index(dtypeOrder, d) }

// maxHeader bounds the JSON header, as the reference implementation does (100 MB).
const maxHeader = 100_000_000

// Tensor is a named float32 tensor: Data holds prod(Shape) values in row-major order. A scalar has
// Shape [] and one value; a tensor with a zero dimension has no values.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// RawTensor is a tensor of any dtype as stored: Data holds prod(Shape)·DType.Size() bytes,
// little-endian, row-major.
type RawTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Float32 returns the values of an F32 tensor.
func (t RawTensor) Float32() ([]float32, error) {
	if t.DType != F32 {
		return nil, fmt.Errorf("tensor %q: dtype %s, want F32", t.Name, t.DType)
	}
	out := make([]float32, len(t.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out, nil
}

// Float64 returns the values of an F64 or F32 tensor as float64 (F32 converts exactly).
func (t RawTensor) Float64() ([]float64, error) {
	switch t.DType {
	case F64:
		out := make([]float64, len(t.Data)/8)
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
		return out, nil
	case F32:
		f, _ := t.Float32()
		out := make([]float64, len(f))
		for i, v := range f {
			out[i] = float64(v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("tensor %q: dtype %s, want F64 or F32", t.Name, t.DType)
}

// Int64 returns the values of an I64 tensor.
func (t RawTensor) Int64() ([]int64, error) {
	if t.DType != I64 {
		return nil, fmt.Errorf("tensor %q: dtype %s, want I64", t.Name, t.DType)
	}
	out := make([]int64, len(t.Data)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
	}
	return out, nil
}

// F32Raw encodes a float32 tensor as stored (little-endian F32).
func F32Raw(t Tensor) RawTensor {
	b := make([]byte, 4*len(t.Data))
	for i, v := range t.Data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return RawTensor{Name: t.Name, DType: F32, Shape: t.Shape, Data: b}
}

// F64Raw encodes float64 values of the given shape as an F64 tensor.
func F64Raw(name string, shape []int, data []float64) RawTensor {
	b := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return RawTensor{Name: name, DType: F64, Shape: shape, Data: b}
}

// I64Raw encodes int64 values of the given shape as an I64 tensor.
func I64Raw(name string, shape []int, data []int64) RawTensor {
	b := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return RawTensor{Name: name, DType: I64, Shape: shape, Data: b}
}

// WriteSafetensors writes float32 tensors and string metadata (nil for none) to path in the
// safetensors format, atomically (see WriteSafetensorsRaw).
func WriteSafetensors(path string, tensors []Tensor, metadata map[string]string) error {
	raw := make([]RawTensor, len(tensors))
	for i, t := range tensors {
		if n, err := numel(t.Shape); err != nil || n != len(t.Data) {
			return fmt.Errorf("%s: tensor %q: shape %v holds %d values but %d were given", path, t.Name, t.Shape, n, len(t.Data))
		}
		raw[i] = F32Raw(t)
	}
	return WriteSafetensorsRaw(path, raw, metadata)
}

// WriteSafetensorsRaw writes tensors of any dtype and string metadata (nil for none) to path in
// the safetensors format (https://github.com/huggingface/safetensors):
//
//	8 bytes   N, the header length, unsigned little-endian
//	N bytes   JSON header {"__metadata__": {k: v}, name: {"dtype", "shape", "data_offsets": [begin, end]}}
//	          padded with spaces so that the data starts at a multiple of 8
//	rest      the tensors' bytes; offsets are relative to the start of this buffer
//
// Tensors are laid out as the Python library lays them out (by dtype, widest first, then by
// name), and the header is the same compact JSON, so for the same input the file is byte for byte
// the one safetensors.numpy.save_file writes (metadata keys, unordered there, are sorted here).
// The file is written to a temporary file in the same directory, synced and renamed over path.
// Duplicate or empty names, the name "__metadata__", names that are not UTF-8, unknown dtypes and
// data whose length does not match the shape are errors naming the file and the tensor.
func WriteSafetensorsRaw(path string, tensors []RawTensor, metadata map[string]string) error {
	header, order, err := encodeHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
		if _, err := w.Write(n[:]); err != nil {
			return err
		}
		if _, err := w.Write(header); err != nil {
			return err
		}
		for _, i := range order {
			if _, err := w.Write(tensors[i].Data); err != nil {
				return err
			}
		}
		return nil
	})
}

// encodeHeader validates the tensors and returns the padded header and the order of the data.
func encodeHeader(tensors []RawTensor, metadata map[string]string) ([]byte, []int, error) {
	seen := make(map[string]bool, len(tensors))
	for _, t := range tensors {
		switch {
		case t.Name == "":
			return nil, nil, errors.New("tensor with an empty name")
		case t.Name == headerK:
			return nil, nil, fmt.Errorf("tensor name %q is reserved", t.Name)
		case !utf8.ValidString(t.Name):
			return nil, nil, fmt.Errorf("tensor name %q is not valid UTF-8", t.Name)
		case seen[t.Name]:
			return nil, nil, fmt.Errorf("tensor %q given twice", t.Name)
		case t.DType.Size() == 0:
			return nil, nil, fmt.Errorf("tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		seen[t.Name] = true
		n, err := numel(t.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if n*t.DType.Size() != len(t.Data) {
			return nil, nil, fmt.Errorf("tensor %q: shape %v of %s needs %d bytes, data has %d",
				t.Name, t.Shape, t.DType, n*t.DType.Size(), len(t.Data))
		}
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, nil, fmt.Errorf("metadata %q: not valid UTF-8", k)
		}
	}
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if ra, rb := tensors[a].DType.rank(), tensors[b].DType.rank(); ra != rb {
			return rb - ra
		}
		return strings.Compare(tensors[a].Name, tensors[b].Name)
	})

	var h bytes.Buffer
	h.WriteByte('{')
	if len(metadata) > 0 {
		writeJSONString(&h, headerK)
		h.WriteString(":{")
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				h.WriteByte(',')
			}
			writeJSONString(&h, k)
			h.WriteByte(':')
			writeJSONString(&h, metadata[k])
		}
		h.WriteByte('}')
	}
	offset := 0
	for i, ti := range order {
		t := tensors[ti]
		if i > 0 || len(metadata) > 0 {
			h.WriteByte(',')
		}
		writeJSONString(&h, t.Name)
		fmt.Fprintf(&h, `:{"dtype":"%s","shape":[`, t.DType)
		for j, d := range t.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			fmt.Fprintf(&h, "%d", d)
		}
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, offset, offset+len(t.Data))
		offset += len(t.Data)
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	return h.Bytes(), order, nil
}

// writeJSONString writes s as serde_json (the Rust library's encoder) does: only '"', '\\' and
// control characters are escaped, with the short forms \b \f \n \r \t where they exist.
func writeJSONString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			fmt.Fprintf(b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// numel returns prod(shape), rejecting negative dimensions and overflow.
func numel(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if hi != 0 || lo > 1<<48 {
			return 0, fmt.Errorf("shape %v is too large", shape)
		}
		n = int(lo)
	}
	return n, nil
}

// ReadSafetensors reads a safetensors file whose tensors are all F32. A tensor of another dtype
// is an error naming it (use ReadSafetensorsRaw for F64, I64 and the rest). Tensors come back
// in file order (by name for files this package writes). See ReadSafetensorsRaw for the checks.
func ReadSafetensors(path string) ([]Tensor, map[string]string, error) {
	raw, meta, err := ReadSafetensorsRaw(path)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Tensor, len(raw))
	for i, r := range raw {
		data, err := r.Float32()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w (ReadSafetensors reads F32 only)", path, err)
		}
		out[i] = Tensor{Name: r.Name, Shape: r.Shape, Data: data}
	}
	return out, meta, nil
}

// ReadSafetensorsRaw reads a safetensors file, tensors in the order of their data offsets.
// Errors name the file and, where one is at fault, the tensor: a file shorter than 8 bytes, a
// header length beyond the file or above 100 MB, a header that is not a JSON object, an empty
// or duplicate name, a missing or unknown field, an unknown dtype, a negative or non-integer dimension, offsets
// that do not match the shape, run past the data (a truncated file), overlap another tensor's or
// leave a gap, and bytes after the last tensor.
func ReadSafetensorsRaw(path string) ([]RawTensor, map[string]string, error) {
	buf, err := bounded.ReadFile(path, bounded.Weights)
	if err != nil {
		return nil, nil, err
	}
	ts, meta, err := parseSafetensors(buf)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: safetensors: %w", path, err)
	}
	return ts, meta, nil
}

type headerEntry struct {
	DType       *DType   `json:"dtype"`
	Shape       *[]int   `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

func parseSafetensors(buf []byte) ([]RawTensor, map[string]string, error) {
	if len(buf) < 8 {
		return nil, nil, fmt.Errorf("file is %d bytes, shorter than the 8-byte header length (truncated?)", len(buf))
	}
	n := binary.LittleEndian.Uint64(buf)
	if n > maxHeader {
		return nil, nil, fmt.Errorf("header length %d exceeds the %d-byte limit", n, maxHeader)
	}
	if n > uint64(len(buf)-8) {
		return nil, nil, fmt.Errorf("header length %d runs past the end of the %d-byte file (truncated?)", n, len(buf))
	}
	hdr, data := buf[8:8+n], buf[8+n:]
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("header is not a JSON object")
	}
	var meta map[string]string
	var tensors []RawTensor
	var offsets [][2]int64
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("header: %w", err)
		}
		name := tok.(string)
		if name == "" {
			return nil, nil, errors.New("header names a tensor with an empty name")
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("header names %q twice", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("header: entry %q: %w", name, err)
		}
		if name == headerK {
			if err := json.Unmarshal(raw, &meta); err != nil {
				return nil, nil, fmt.Errorf("header: %s must map strings to strings: %w", headerK, err)
			}
			continue
		}
		var e headerEntry
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("tensor %q: header entry: %w", name, err)
		}
		switch {
		case e.DType == nil:
			return nil, nil, fmt.Errorf("tensor %q: header entry lacks \"dtype\"", name)
		case e.Shape == nil:
			return nil, nil, fmt.Errorf("tensor %q: header entry lacks \"shape\"", name)
		case e.DataOffsets == nil:
			return nil, nil, fmt.Errorf("tensor %q: header entry lacks \"data_offsets\"", name)
		case e.DType.Size() == 0:
			return nil, nil, fmt.Errorf("tensor %q: unknown dtype %q", name, *e.DType)
		case len(*e.DataOffsets) != 2:
			return nil, nil, fmt.Errorf("tensor %q: data_offsets has %d values, want [begin, end]", name, len(*e.DataOffsets))
		}
		count, err := numel(*e.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		off := [2]int64{(*e.DataOffsets)[0], (*e.DataOffsets)[1]}
		want := int64(count) * int64(e.DType.Size())
		switch {
		case off[0] < 0 || off[1] < off[0]:
			return nil, nil, fmt.Errorf("tensor %q: data_offsets %v are not an interval", name, off)
		case off[1] > int64(len(data)):
			return nil, nil, fmt.Errorf("tensor %q: data_offsets %v run past the %d-byte data section (truncated?)", name, off, len(data))
		case off[1]-off[0] != want:
			return nil, nil, fmt.Errorf("tensor %q: data_offsets %v span %d bytes, shape %v of %s needs %d",
				name, off, off[1]-off[0], *e.Shape, *e.DType, want)
		}
		tensors = append(tensors, RawTensor{Name: name, DType: *e.DType, Shape: *e.Shape})
		offsets = append(offsets, off)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("header: %w", err)
	}
	if rest := bytes.TrimSpace(hdr[dec.InputOffset():]); len(rest) > 0 {
		return nil, nil, fmt.Errorf("header: %d bytes after the JSON object", len(rest))
	}

	idx := make([]int, len(tensors))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := cmp.Compare(offsets[a][0], offsets[b][0]); c != 0 {
			return c
		}
		return cmp.Compare(offsets[a][1], offsets[b][1])
	})
	out := make([]RawTensor, len(tensors))
	var end int64
	prev := ""
	for k, i := range idx {
		off := offsets[i]
		switch {
		case off[0] < end:
			return nil, nil, fmt.Errorf("tensor %q: data_offsets %v overlap tensor %q (which ends at %d)", tensors[i].Name, off, prev, end)
		case off[0] > end:
			return nil, nil, fmt.Errorf("tensor %q: data_offsets %v leave a gap of %d bytes after offset %d", tensors[i].Name, off, off[0]-end, end)
		}
		t := tensors[i]
		t.Data = data[off[0]:off[1]:off[1]]
		out[k] = t
		end, prev = off[1], t.Name
	}
	if end != int64(len(data)) {
		return nil, nil, fmt.Errorf("data section is %d bytes but the tensors cover %d", len(data), end)
	}
	return out, meta, nil
}
