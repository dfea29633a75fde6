package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"reflect"

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

// writeValue writes v's type tag (when tagged) and its encoding: a scalar as its little-endian
// bytes (a bool as one byte 0 or 1), a string as its length and bytes, an array as its element
// type, its length and its untagged elements.
func writeValue(w io.Writer, v any, tagged bool) error {
	le := func(x any) { binary.Write(w, binary.LittleEndian, x) }
	t, err := valueType(v)
	if err != nil {
		return err
	}
	if tagged {
		le(t)
	}
	switch t {
	case tString:
		x := v.(string)
		le(uint64(len(x)))
		io.WriteString(w, x)
		return nil
	case tArray:
		x := reflect.ValueOf(v)
		et, err := elemType(x)
		if err != nil {
			return err
		}
		le(et)
		le(uint64(x.Len()))
		for i := range x.Len() {
			if err := writeValue(w, x.Index(i).Interface(), false); err != nil {
				return err
			}
		}
		return nil
	}
	le(v)
	return nil
}

// elemType is the element type of an array value: that of the slice's element type, or for an
// []any that of its elements, which must all have one (an empty one is an array of uint8).
func elemType(x reflect.Value) (uint32, error) {
	if x.Type().Elem().Kind() != reflect.Interface {
		return valueType(reflect.Zero(x.Type().Elem()).Interface())
	}
	if x.Len() == 0 {
		return tUint8, nil
	}
	e0 := x.Index(0).Interface()
	et, err := valueType(e0)
	if err != nil {
		return 0, err
	}
	for i := range x.Len() {
		e := x.Index(i).Interface()
		if t, _ := valueType(e); t != et {
			return 0, fmt.Errorf("array elements of different types (%T, %T)", e0, e)
		}
	}
	return et, nil
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
