package checkpoints

import (
	"bytes"
	"encoding/binary"
	"maps"
	"slices"
	"testing"
)

// FuzzSafetensors parses arbitrary bytes as a safetensors file. A file that parses must hold
// tensors with non-empty unique names whose byte length is the product of their shape times
// their dtype size, covering the data section exactly; and writing them (with the metadata)
// then reading gives the same tensors and metadata.
func FuzzSafetensors(f *testing.F) {
	f.Add(reference(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, f32le(1, 2, 3)...))
	f.Add(reference(`{"__metadata__":{"format":"np"},"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`,
		append([]byte{3, 0, 0, 0, 0, 0, 0, 0}, f32le(1)...)...))
	f.Add(reference(`{"B":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a.b":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]},"z":{"dtype":"U8","shape":[],"data_offsets":[4,5]}}`,
		1, 2, 3, 4, 5))
	f.Add(reference(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32le(1)...))
	f.Add(reference(`{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}`, f32le(1, 2)...))
	f.Add(reference(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, meta, err := parseSafetensors(data)
		if err != nil {
			return
		}
		total := 0
		seen := map[string]bool{}
		for _, r := range ts {
			n, err := numel(r.Shape)
			if err != nil {
				t.Fatalf("tensor %q: loaded with shape %v: %v", r.Name, r.Shape, err)
			}
			if r.Name == "" || r.Name == headerK || seen[r.Name] {
				t.Fatalf("tensor name %q loaded (empty, reserved or repeated)", r.Name)
			}
			seen[r.Name] = true
			if len(r.Data) != n*r.DType.Size() || r.DType.Size() == 0 {
				t.Fatalf("tensor %q: %d bytes, shape %v of %s needs %d", r.Name, len(r.Data), r.Shape, r.DType, n*r.DType.Size())
			}
			total += len(r.Data)
		}
		hlen := int(binary.LittleEndian.Uint64(data))
		if total != len(data)-8-hlen {
			t.Fatalf("tensors cover %d bytes of a %d-byte data section", total, len(data)-8-hlen)
		}

		header, order, err := encodeHeader(ts, meta)
		if err != nil {
			t.Fatalf("the writer refuses what the reader loaded: %v", err)
		}
		file := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
		file = append(file, header...)
		for _, i := range order {
			file = append(file, ts[i].Data...)
		}
		back, meta2, err := parseSafetensors(file)
		if err != nil {
			t.Fatalf("written file does not read back: %v", err)
		}
		if len(back) != len(ts) || !maps.Equal(meta, meta2) && len(meta)+len(meta2) > 0 {
			t.Fatalf("write then read: %d tensors and metadata %v, want %d and %v", len(back), meta2, len(ts), meta)
		}
		byName := map[string]RawTensor{}
		for _, r := range back {
			byName[r.Name] = r
		}
		for _, r := range ts {
			b, ok := byName[r.Name]
			if !ok || b.DType != r.DType || !slices.Equal(b.Shape, r.Shape) || !bytes.Equal(b.Data, r.Data) {
				t.Fatalf("tensor %q did not survive write then read", r.Name)
			}
		}
	})
}
