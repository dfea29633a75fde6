package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"unicode/utf8"
)

// DType is how a shard stores vector values.
type DType uint32

// The dtypes. Their numbers are part of the file format.
const (
	Float32       DType = 1 // 4 bytes a value, as given
	Float16       DType = 2 // 2 bytes a value, IEEE 754 half precision, round to nearest even
	Int8PerVector DType = 3 // 1 byte a value, one float32 scale per vector
	Int8PerDim    DType = 4 // 1 byte a value, one float32 scale per dimension (per shard)
)

var dtypeNames = map[DType]string{
	Float32:       "float32",
	Float16:       "float16",
	Int8PerVector: "int8-per-vector",
	Int8PerDim:    "int8-per-dim",
}

// String returns the dtype's name as the manifest writes it: "float32", "float16",
// "int8-per-vector" or "int8-per-dim".
func (t DType) String() string {
	if s, ok := dtypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("dtype(%d)", uint32(t))
}

// ParseDType returns the dtype named s (as String writes it).
func ParseDType(s string) (DType, error) {
	for t, name := range dtypeNames {
		if name == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want float32, float16, int8-per-vector or int8-per-dim)", s)
}

// valueBytes is the size of one stored value.
func (t DType) valueBytes() int64 {
	switch t {
	case Float32:
		return 4
	case Float16:
		return 2
	default:
		return 1
	}
}

// scales is the number of float32 scales a shard of n vectors of width dim stores.
func (t DType) scales(n, dim int64) int64 {
	switch t {
	case Int8PerVector:
		return n
	case Int8PerDim:
		return dim
	}
	return 0
}

// Meta identifies what a set of shards holds. Every shard of a version and its manifest carry
// the same Meta.
type Meta struct {
	// ModelHash identifies the encoder that produced the vectors (for example the hex sha256 of
	// its checkpoint): 1 to 128 printable ASCII characters.
	ModelHash string
	// Version names the index version: 1 to 64 characters of [A-Za-z0-9._-]. It is part of the
	// shard file names, so two versions never share a file.
	Version string
	// Dim is the embedding width H (>= 1).
	Dim int
	// DType is how values are stored.
	DType DType
}

var versionRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// check validates m.
func (m Meta) check() error {
	if m.ModelHash == "" || len(m.ModelHash) > 128 {
		return fmt.Errorf("model hash %q must have 1 to 128 characters", m.ModelHash)
	}
	for _, c := range []byte(m.ModelHash) {
		if c < 0x21 || c > 0x7e {
			return fmt.Errorf("model hash %q: want printable ASCII without spaces", m.ModelHash)
		}
	}
	if !versionRE.MatchString(m.Version) {
		return fmt.Errorf("version %q: want 1 to 64 characters of [A-Za-z0-9._-]", m.Version)
	}
	if m.Dim < 1 || m.Dim > math.MaxInt32 {
		return fmt.Errorf("dim %d must be >= 1", m.Dim)
	}
	if _, ok := dtypeNames[m.DType]; !ok {
		return fmt.Errorf("unknown dtype %d", uint32(m.DType))
	}
	return nil
}

// ShardFile returns the file name, inside the directory, of shard i of version.
func ShardFile(version string, i int) string {
	return fmt.Sprintf("emb-%s-%05d.shard", version, i)
}

// ManifestFile is the manifest's file name inside a shard directory.
const ManifestFile = "manifest.json"

const (
	magic      = "RTSHARD1"
	headerSize = 64
	dataAlign  = 64
)

// header is the decoded fixed part of a shard file plus its strings.
type header struct {
	dtype      DType
	dim        int64
	count      int64
	shard      int64
	modelHash  string
	version    string
	idsOffset  int64 // offsets table of count+1 uint64, then the id bytes
	dataOffset int64 // scales, then values
	fileSize   int64
}

// layout computes the offsets and the size of a shard file.
func layout(m Meta, shard int, count int64, idBytes int64) header {
	h := header{
		dtype: m.DType, dim: int64(m.Dim), count: count, shard: int64(shard),
		modelHash: m.ModelHash, version: m.Version,
	}
	h.idsOffset = headerSize + int64(len(m.ModelHash)+len(m.Version))
	end := h.idsOffset + 8*(count+1) + idBytes
	h.dataOffset = (end + dataAlign - 1) / dataAlign * dataAlign
	h.fileSize = h.dataOffset + 4*m.DType.scales(count, h.dim) + count*h.dim*m.DType.valueBytes()
	return h
}

// encode returns the fixed header and the strings.
func (h header) encode() []byte {
	b := make([]byte, headerSize, h.idsOffset)
	copy(b, magic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], uint32(h.dtype))
	le.PutUint32(b[12:], uint32(h.dim))
	le.PutUint64(b[16:], uint64(h.count))
	le.PutUint32(b[24:], uint32(h.shard))
	le.PutUint16(b[28:], uint16(len(h.modelHash)))
	le.PutUint16(b[30:], uint16(len(h.version)))
	le.PutUint64(b[32:], uint64(h.idsOffset))
	le.PutUint64(b[40:], uint64(h.dataOffset))
	le.PutUint64(b[48:], uint64(h.fileSize))
	b = append(b, h.modelHash...)
	return append(b, h.version...)
}

var errNotShard = errors.New("not a shard file (bad magic)")

// decodeHeader parses the first bytes of a shard file of size bytes and checks that the header
// is self-consistent and that the file has exactly the size it announces.
func decodeHeader(b []byte, size int64) (header, error) {
	if len(b) < headerSize {
		return header{}, fmt.Errorf("truncated: %d bytes, shorter than the %d-byte header", size, headerSize)
	}
	if string(b[:8]) != magic {
		return header{}, errNotShard
	}
	le := binary.LittleEndian
	h := header{
		dtype:      DType(le.Uint32(b[8:])),
		dim:        int64(le.Uint32(b[12:])),
		count:      int64(le.Uint64(b[16:])),
		shard:      int64(le.Uint32(b[24:])),
		idsOffset:  int64(le.Uint64(b[32:])),
		dataOffset: int64(le.Uint64(b[40:])),
		fileSize:   int64(le.Uint64(b[48:])),
	}
	nHash, nVer := int(le.Uint16(b[28:])), int(le.Uint16(b[30:]))
	if _, ok := dtypeNames[h.dtype]; !ok {
		return header{}, fmt.Errorf("header: unknown dtype %d", uint32(h.dtype))
	}
	if h.dim < 1 || h.count < 0 || h.count > size/8 || h.count > 0 && h.dim > size/h.count {
		return header{}, fmt.Errorf("header: dim %d, count %d out of range for %d bytes", h.dim, h.count, size)
	}
	if h.fileSize != size {
		if size < h.fileSize {
			return header{}, fmt.Errorf("truncated: %d bytes, header says %d", size, h.fileSize)
		}
		return header{}, fmt.Errorf("%d bytes, header says %d (trailing bytes)", size, h.fileSize)
	}
	if len(b) < headerSize+nHash+nVer {
		return header{}, fmt.Errorf("truncated: header strings past byte %d", len(b))
	}
	h.modelHash = string(b[headerSize : headerSize+nHash])
	h.version = string(b[headerSize+nHash : headerSize+nHash+nVer])
	// The layout is a function of (meta, count, id bytes): recompute it and compare.
	if h.idsOffset != int64(headerSize+nHash+nVer) || h.dataOffset < h.idsOffset+8*(h.count+1) ||
		h.dataOffset%dataAlign != 0 ||
		h.fileSize != h.dataOffset+4*h.dtype.scales(h.count, h.dim)+h.count*h.dim*h.dtype.valueBytes() {
		return header{}, fmt.Errorf("header: inconsistent offsets (ids %d, data %d, size %d for %d×%d %v)",
			h.idsOffset, h.dataOffset, h.fileSize, h.count, h.dim, h.dtype)
	}
	return h, nil
}

// decodeIDs reads the ids section of a mapped (or fully read) shard file.
func decodeIDs(file []byte, h header) ([]string, error) {
	le := binary.LittleEndian
	tab := file[h.idsOffset : h.idsOffset+8*(h.count+1)]
	base := h.idsOffset + 8*(h.count+1)
	total := int64(le.Uint64(tab[8*h.count:]))
	if total < 0 || base+total > h.dataOffset || base+total+dataAlign <= h.dataOffset {
		return nil, fmt.Errorf("ids: %d bytes do not fit before the data at byte %d", total, h.dataOffset)
	}
	blob := string(file[base : base+total]) // one allocation; the ids are substrings of it
	ids := make([]string, h.count)
	prev := uint64(0)
	if le.Uint64(tab) != 0 {
		return nil, errors.New("ids: offsets table does not start at 0")
	}
	for i := range ids {
		next := le.Uint64(tab[8*(i+1):])
		if next < prev || next > uint64(total) {
			return nil, fmt.Errorf("ids: offset %d of row %d out of order", next, i)
		}
		ids[i] = blob[prev:next]
		if ids[i] == "" {
			return nil, fmt.Errorf("ids: row %d has an empty id", i)
		}
		prev = next
	}
	if !utf8.ValidString(blob) {
		return nil, errors.New("ids: invalid UTF-8")
	}
	return ids, nil
}

// float32ToHalf rounds f to the nearest IEEE 754 half-precision value, ties to even; values
// beyond the half range become ±Inf (the writer rejects them first), NaN stays NaN.
func float32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp > 127+15: // overflow
		return sign | 0x7c00
	case exp >= 127-14: // normal half
		// 13 bits are dropped; round to nearest even on them.
		h := uint32(exp-127+15)<<10 | man>>13
		rest := man & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++ // may carry into the exponent, up to Inf: still correct
		}
		return sign | uint16(h)
	case exp >= 127-25: // subnormal half (or rounds up to the smallest normal)
		m := man | 0x800000 // implicit bit
		shift := uint32(127 - 14 - exp + 13)
		h := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	default: // underflows to zero
		return sign
	}
}

// halfToFloat32 returns the float32 equal to the half-precision value h (exact).
func halfToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: man · 2^-24, exact in float32
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// quantize8 is round(x/s) clamped to [-127, 127], 0 when s is 0.
func quantize8(x, s float32) int8 {
	if s == 0 {
		return 0
	}
	r := math.Round(float64(x / s))
	return int8(max(-127, min(127, r)))
}
