package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
)

// KV is one metadata entry for Write. Value is one of the Go types Open
// returns (uint8 ... float64, bool, string, []string, []any of one scalar
// type) or a typed slice ([]uint8, []int32, []uint32, []int64, []uint64,
// []float32, []float64, []bool).
type KV struct {
	Key   string
	Value any
}

// TensorData is one tensor for Write: Data holds its bytes as stored
// (little-endian F32/F16/BF16 values, or ggml blocks), and must be exactly
// the size Dims and Type imply.
type TensorData struct {
	Name string
	Dims []uint64 // ggml order: Dims[0] is the row length
	Type DType
	Data []byte
}

// Write writes a GGUF v3 file at path (through a temporary file and a
// rename): the metadata in the given order, then the tensor infos and data,
// each tensor aligned to general.alignment (from meta, default 32). It is
// the inverse of Open for the types Open returns, used to build test
// fixtures and small models.
func Write(path string, meta []KV, tensors []TensorData) error {
	align := uint64(defaultAlignment)
	for _, kv := range meta {
		if kv.Key == "general.alignment" {
			a, ok := asUint(kv.Value)
			if !ok || a == 0 || a&(a-1) != 0 {
				return fmt.Errorf("gguf: write %s: general.alignment %v: want a power of two", path, kv.Value)
			}
			align = a
		}
	}
	offsets := make([]uint64, len(tensors))
	var off uint64
	for i, t := range tensors {
		tr, ok := traits[t.Type]
		if !ok {
			return fmt.Errorf("gguf: write %s: tensor %q: unknown type %d", path, t.Name, t.Type)
		}
		n := uint64(1)
		for _, d := range t.Dims {
			n *= d
		}
		if n%tr.block != 0 || uint64(len(t.Data)) != n/tr.block*tr.size {
			return fmt.Errorf("gguf: write %s: tensor %q: %d bytes for dims %v of %s", path, t.Name, len(t.Data), t.Dims, t.Type)
		}
		offsets[i] = off
		off = (off + uint64(len(t.Data)) + align - 1) / align * align
	}
	err := atomicfile.Write(path, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		cw := &countWriter{w: bw}
		le := func(v any) { binary.Write(cw, binary.LittleEndian, v) }
		str := func(s string) { le(uint64(len(s))); io.WriteString(cw, s) }
		le(uint32(magic))
		le(uint32(3))
		le(uint64(len(tensors)))
		le(uint64(len(meta)))
		for _, kv := range meta {
			str(kv.Key)
			if err := writeValue(cw, kv.Value, true); err != nil {
				return fmt.Errorf("metadata %q: %w", kv.Key, err)
			}
		}
		for i, t := range tensors {
			str(t.Name)
			le(uint32(len(t.Dims)))
			for _, d := range t.Dims {
				le(d)
			}
			le(uint32(t.Type))
			le(offsets[i])
		}
		pad := func() {
			for cw.n%align != 0 {
				cw.Write([]byte{0})
			}
		}
		pad()
		for _, t := range tensors {
			cw.Write(t.Data)
			pad()
		}
		if cw.err != nil {
			return cw.err
		}
		return bw.Flush()
	})
	if err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	return nil
}

type countWriter struct {
	w   io.Writer
	n   uint64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += uint64(n)
	c.err = err
	return n, err
}

// writeValue writes v's type tag (when tagged) and its encoding.
func writeValue(w io.Writer, v any, tagged bool) error {
	le := func(x any) { binary.Write(w, binary.LittleEndian, x) }
	tag := func(t uint32) {
		if tagged {
			le(t)
		}
	}
	arr := func(et uint32, n int, each func(i int) any) error {
		tag(tArray)
		le(et)
		le(uint64(n))
		for i := 0; i < n; i++ {
			if err := writeValue(w, each(i), false); err != nil {
				return err
			}
		}
		return nil
	}
	switch x := v.(type) {
	case uint8:
		tag(tUint8)
		le(x)
	case int8:
		tag(tInt8)
		le(x)
	case uint16:
		tag(tUint16)
		le(x)
	case int16:
		tag(tInt16)
		le(x)
	case uint32:
		tag(tUint32)
		le(x)
	case int32:
		tag(tInt32)
		le(x)
	case uint64:
		tag(tUint64)
		le(x)
	case int64:
		tag(tInt64)
		le(x)
	case float32:
		tag(tFloat32)
		le(math.Float32bits(x))
	case float64:
		tag(tFloat64)
		le(math.Float64bits(x))
	case bool:
		tag(tBool)
		le(x)
	case string:
		tag(tString)
		le(uint64(len(x)))
		io.WriteString(w, x)
	case []string:
		return arr(tString, len(x), func(i int) any { return x[i] })
	case []uint8:
		return arr(tUint8, len(x), func(i int) any { return x[i] })
	case []int32:
		return arr(tInt32, len(x), func(i int) any { return x[i] })
	case []uint32:
		return arr(tUint32, len(x), func(i int) any { return x[i] })
	case []int64:
		return arr(tInt64, len(x), func(i int) any { return x[i] })
	case []uint64:
		return arr(tUint64, len(x), func(i int) any { return x[i] })
	case []float32:
		return arr(tFloat32, len(x), func(i int) any { return x[i] })
	case []float64:
		return arr(tFloat64, len(x), func(i int) any { return x[i] })
	case []bool:
		return arr(tBool, len(x), func(i int) any { return x[i] })
	case []any:
		if len(x) == 0 {
			return arr(tUint8, 0, nil)
		}
		et, err := valueType(x[0])
		if err != nil {
			return err
		}
		for _, e := range x {
			if t, _ := valueType(e); t != et {
				return fmt.Errorf("array elements of different types (%T, %T)", x[0], e)
			}
		}
		return arr(et, len(x), func(i int) any { return x[i] })
	default:
		return fmt.Errorf("cannot write a %T", v)
	}
	return nil
}

func valueType(v any) (uint32, error) {
	switch v.(type) {
	case uint8:
		return tUint8, nil
	case int8:
		return tInt8, nil
	case uint16:
		return tUint16, nil
	case int16:
		return tInt16, nil
	case uint32:
		return tUint32, nil
	case int32:
		return tInt32, nil
	case uint64:
		return tUint64, nil
	case int64:
		return tInt64, nil
	case float32:
		return tFloat32, nil
	case float64:
		return tFloat64, nil
	case bool:
		return tBool, nil
	case string:
		return tString, nil
	case []any, []string, []uint8, []int32, []uint32, []int64, []uint64, []float32, []float64, []bool:
		return tArray, nil
	}
	return 0, fmt.Errorf("cannot write a %T", v)
}

// Float32Bytes returns xs as little-endian F32 data for TensorData.
func Float32Bytes(xs []float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
