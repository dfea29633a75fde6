package shard

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// FormatName is the manifest's "format" member.
const FormatName = "ragtrain-embedding-shards/1"

// Manifest describes one committed version of a shard directory (manifest.json).
type Manifest struct {
	Format    string       `json:"format"` // FormatName
	ModelHash string       `json:"model_hash"`
	Version   string       `json:"version"`
	Dim       int          `json:"dim"`
	DType     string       `json:"dtype"` // DType.String()
	Count     int64        `json:"count"` // passages over all shards
	Shards    []ShardEntry `json:"shards"`
}

// ShardEntry is one shard as the manifest lists it.
type ShardEntry struct {
	File   string `json:"file"` // name inside the directory, ShardFile(version, i)
	Count  int64  `json:"count"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"` // hex
}

// Meta returns the manifest's meta.
func (m *Manifest) Meta() (Meta, error) {
	t, err := ParseDType(m.DType)
	if err != nil {
		return Meta{}, err
	}
	return Meta{ModelHash: m.ModelHash, Version: m.Version, Dim: m.Dim, DType: t}, nil
}

// WriteShard writes shard i of version meta.Version to dir/ShardFile(meta.Version, i)
// atomically (temporary file, sync, rename; dir is created if need be): the N = len(ids) passages ids, in order, whose
// embeddings are the rows of vecs (N×meta.Dim, row-major float32), stored as meta.DType. N may
// be 0. Writing the same shard again replaces it whole. It returns the entry CommitManifest
// will list for it. It fails when meta is invalid, i < 0, len(vecs) != N·Dim, an id is empty,
// repeated within the shard or not UTF-8, or a value is NaN, infinite or (for float16) beyond
// ±65504; nothing is written then.
func WriteShard(dir string, meta Meta, i int, ids []string, vecs []float32) (ShardEntry, error) {
	name := ShardFile(meta.Version, i)
	fail := func(format string, args ...any) (ShardEntry, error) {
		return ShardEntry{}, fmt.Errorf("shard: write %s: %s", filepath.Join(dir, name), fmt.Sprintf(format, args...))
	}
	if err := meta.check(); err != nil {
		return fail("%v", err)
	}
	if i < 0 || i > math.MaxInt32 {
		return fail("shard index %d out of range", i)
	}
	dim := meta.Dim
	if _, err := index.CheckRows(ids, vecs, dim); err != nil {
		return fail("%v", err)
	}
	var idBytes int64
	for r, id := range ids {
		if !utf8.ValidString(id) {
			return fail("id at row %d is not valid UTF-8", r)
		}
		idBytes += int64(len(id))
	}
	for j, v := range vecs {
		if meta.DType == Float16 && math.Abs(float64(v)) > 65504 {
			return fail("row %d (id %q) column %d = %v is beyond float16's range ±65504", j/dim, ids[j/dim], j%dim, v)
		}
	}
	h := layout(meta, i, int64(len(ids)), idBytes)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ShardEntry{}, fmt.Errorf("shard: %w", err)
	}
	path := filepath.Join(dir, name)
	sum := sha256.New()
	err := atomicfile.Write(path, func(w io.Writer) error {
		cw := &countWriter{w: io.MultiWriter(w, sum)}
		bw := bufio.NewWriterSize(cw, 1<<16)
		if err := writeBody(bw, h, ids, vecs); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if cw.n != h.fileSize {
			return fmt.Errorf("wrote %d bytes, layout says %d", cw.n, h.fileSize)
		}
		return nil
	})
	if err != nil {
		return ShardEntry{}, fmt.Errorf("shard: %w", err)
	}
	return ShardEntry{File: name, Count: h.count, Bytes: h.fileSize, SHA256: hex.EncodeToString(sum.Sum(nil))}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeBody writes the whole shard file described by h.
func writeBody(w *bufio.Writer, h header, ids []string, vecs []float32) error {
	le := binary.LittleEndian
	w.Write(h.encode())
	var b8 [8]byte
	var off uint64
	w.Write(b8[:]) // offset 0
	for _, id := range ids {
		off += uint64(len(id))
		le.PutUint64(b8[:], off)
		w.Write(b8[:])
	}
	for _, id := range ids {
		w.WriteString(id)
	}
	pos := h.idsOffset + 8*(h.count+1) + int64(off)
	for ; pos < h.dataOffset; pos++ {
		w.WriteByte(0)
	}
	dim := int(h.dim)
	var b4 [4]byte
	putF32 := func(f float32) {
		le.PutUint32(b4[:], math.Float32bits(f))
		w.Write(b4[:])
	}
	switch h.dtype {
	case Float32:
		for _, v := range vecs {
			putF32(v)
		}
	case Float16:
		var b2 [2]byte
		for _, v := range vecs {
			le.PutUint16(b2[:], float32ToHalf(v))
			w.Write(b2[:])
		}
	case Int8PerVector:
		scales := vectorScales(vecs, dim)
		for _, s := range scales {
			putF32(s)
		}
		for r, s := range scales {
			for _, v := range vecs[r*dim : (r+1)*dim] {
				w.WriteByte(byte(quantize8(v, s)))
			}
		}
	case Int8PerDim:
		scales := dimScales(vecs, dim)
		for _, s := range scales {
			putF32(s)
		}
		for j, v := range vecs {
			w.WriteByte(byte(quantize8(v, scales[j%dim])))
		}
	}
	_, err := w.Write(nil)
	return err
}

// vectorScales returns max|x|/127 of every dim-wide row.
func vectorScales(vecs []float32, dim int) []float32 {
	s := make([]float32, len(vecs)/dim)
	for r := range s {
		var m float32
		for _, v := range vecs[r*dim : (r+1)*dim] {
			m = max(m, float32(math.Abs(float64(v))))
		}
		s[r] = m / 127
	}
	return s
}

// dimScales returns max|x|/127 of every column.
func dimScales(vecs []float32, dim int) []float32 {
	s := make([]float32, dim)
	for j, v := range vecs {
		s[j%dim] = max(s[j%dim], float32(math.Abs(float64(v))))
	}
	for j := range s {
		s[j] /= 127
	}
	return s
}

// CommitManifest makes shards 0..nShards-1 of meta.Version in dir the directory's current
// version: it checks that every one exists, is a complete shard file (its size is the one its
// header announces) of meta (model hash, version, dim, dtype) with its own index, that no
// passage id occurs in two shards, and that dir holds no other shard file of that version; it
// hashes every file (sha256) and then writes dir/manifest.json through a temporary file and a
// rename, so a reader sees the previous manifest or this one, whole. It returns the manifest
// written. The first problem found is the error, naming the file; the manifest is left as it
// was. It reads every shard once and keeps every id in memory (for the duplicate check).
func CommitManifest(dir string, meta Meta, nShards int) (*Manifest, error) {
	return commit(dir, meta, nShards, nil)
}

// CommitShards is CommitManifest for the shards whose entries, as WriteShard returned them,
// the workers reported: entries[i] must be shard i, and each file must still have the count,
// size and sha256 its writer reported. A shard replaced since (a repeated worker that wrote
// other bytes) or corrupted is an error naming the file.
func CommitShards(dir string, meta Meta, entries []ShardEntry) (*Manifest, error) {
	if len(entries) == 0 {
		return nil, fmt.Errorf("shard: commit %s: no shards", dir)
	}
	for i, e := range entries {
		if e.File != ShardFile(meta.Version, i) {
			return nil, fmt.Errorf("shard: commit %s: entry %d is %q, want %q", dir, i, e.File, ShardFile(meta.Version, i))
		}
	}
	return commit(dir, meta, len(entries), entries)
}

func commit(dir string, meta Meta, nShards int, reported []ShardEntry) (*Manifest, error) {
	if err := meta.check(); err != nil {
		return nil, fmt.Errorf("shard: commit %s: %w", dir, err)
	}
	if nShards < 1 {
		return nil, fmt.Errorf("shard: commit %s: %d shards, want >= 1", dir, nShards)
	}
	if err := checkStray(dir, meta.Version, nShards); err != nil {
		return nil, err
	}
	m := &Manifest{Format: FormatName, ModelHash: meta.ModelHash, Version: meta.Version, Dim: meta.Dim, DType: meta.DType.String()}
	owner := make(map[string]int)
	for i := range nShards {
		e, err := checkShard(dir, meta, i, nShards, owner)
		if err != nil {
			return nil, err
		}
		if reported != nil && e != reported[i] {
			return nil, fmt.Errorf("shard: %s: %d passages, %d bytes, sha256 %s; its writer reported %d, %d, %s (replaced or corrupt since)",
				filepath.Join(dir, e.File), e.Count, e.Bytes, e.SHA256, reported[i].Count, reported[i].Bytes, reported[i].SHA256)
		}
		m.Shards = append(m.Shards, e)
		m.Count += e.Count
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, ManifestFile), m); err != nil {
		return nil, fmt.Errorf("shard: commit: %w", err)
	}
	return m, nil
}

// checkStray fails when dir holds a shard file of version with an index >= nShards.
func checkStray(dir, version string, nShards int) error {
	names, err := filepath.Glob(filepath.Join(dir, "emb-"+version+"-*.shard"))
	if err != nil {
		return err
	}
	want := make(map[string]bool, nShards)
	for i := range nShards {
		want[ShardFile(version, i)] = true
	}
	slices.Sort(names)
	for _, p := range names {
		if !want[filepath.Base(p)] {
			return fmt.Errorf("shard: commit %s: unexpected shard file %s of version %q (committing %d shards)",
				dir, p, version, nShards)
		}
	}
	return nil
}

// checkShard reads shard i fully, checks it against meta and returns its manifest entry.
// owner maps every id seen so far to its shard.
func checkShard(dir string, meta Meta, i, nShards int, owner map[string]int) (ShardEntry, error) {
	name := ShardFile(meta.Version, i)
	path := filepath.Join(dir, name)
	fail := func(format string, args ...any) (ShardEntry, error) {
		return ShardEntry{}, fmt.Errorf("shard: %s: %s", path, fmt.Sprintf(format, args...))
	}
	f, err := bounded.OpenRegular(path)
	if err != nil {
		if os.IsNotExist(err) {
			return fail("missing (shard %d of the %d of version %q)", i, nShards, meta.Version)
		}
		return ShardEntry{}, fmt.Errorf("shard: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ShardEntry{}, fmt.Errorf("shard: %w", err)
	}
	sum := sha256.New()
	r := bufio.NewReaderSize(io.TeeReader(f, sum), 1<<16)
	head, _ := r.Peek(headerSize + 128 + 64)
	h, err := decodeHeader(head, st.Size())
	if err != nil {
		return fail("%v", err)
	}
	if err := h.matches(meta, i); err != nil {
		return fail("%v", err)
	}
	// ids: read the header, the offsets table and the bytes.
	pre := make([]byte, h.dataOffset)
	if _, err := io.ReadFull(r, pre); err != nil {
		return fail("read: %v", err)
	}
	ids, err := decodeIDs(pre, h)
	if err != nil {
		return fail("%v", err)
	}
	for _, id := range ids {
		if j, dup := owner[id]; dup {
			if j == i {
				return fail("id %q twice", id)
			}
			return fail("id %q is also in shard %s", id, ShardFile(meta.Version, j))
		}
		owner[id] = i
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fail("read: %v", err)
	}
	return ShardEntry{File: name, Count: h.count, Bytes: h.fileSize, SHA256: hex.EncodeToString(sum.Sum(nil))}, nil
}

// matches checks a decoded header against the meta and index it should have.
func (h header) matches(meta Meta, i int) error {
	switch {
	case h.modelHash != meta.ModelHash:
		return fmt.Errorf("model hash %q, want %q", h.modelHash, meta.ModelHash)
	case h.version != meta.Version:
		return fmt.Errorf("version %q, want %q", h.version, meta.Version)
	case h.dim != int64(meta.Dim):
		return fmt.Errorf("dim %d, want %d", h.dim, meta.Dim)
	case h.dtype != meta.DType:
		return fmt.Errorf("dtype %v, want %v", h.dtype, meta.DType)
	case h.shard != int64(i):
		return fmt.Errorf("header says shard %d, file name says %d", h.shard, i)
	}
	return nil
}

// RemoveStale deletes the shard files in dir (emb-*.shard) that the current manifest does not
// list, and returns their names. Call it only when no Reader of an older version is open.
func RemoveStale(dir string) ([]string, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	keep := make(map[string]bool, len(m.Shards))
	for _, e := range m.Shards {
		keep[e.File] = true
	}
	names, err := filepath.Glob(filepath.Join(dir, "emb-*.shard"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var removed []string
	for _, p := range names {
		if keep[filepath.Base(p)] {
			continue
		}
		if err := os.Remove(p); err != nil {
			return removed, fmt.Errorf("shard: %w", err)
		}
		removed = append(removed, filepath.Base(p))
	}
	return removed, nil
}

// ReadManifest reads and checks dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	b, err := bounded.ReadFile(path, bounded.ConfigJSON)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("shard: %s: %v", path, err)
	}
	if m.Format != FormatName {
		return nil, fmt.Errorf("shard: %s: format %q, want %q", path, m.Format, FormatName)
	}
	meta, err := m.Meta()
	if err == nil {
		err = meta.check()
	}
	if err != nil {
		return nil, fmt.Errorf("shard: %s: %v", path, err)
	}
	var total int64
	for i, e := range m.Shards {
		if e.File != ShardFile(m.Version, i) {
			return nil, fmt.Errorf("shard: %s: shard %d is %q, want %q", path, i, e.File, ShardFile(m.Version, i))
		}
		total += e.Count
	}
	if len(m.Shards) == 0 || total != m.Count {
		return nil, fmt.Errorf("shard: %s: %d shards holding %d passages, manifest says %d", path, len(m.Shards), total, m.Count)
	}
	return &m, nil
}

// WriteAll writes the N = len(ids) passages as shards of at most shardSize rows (shard i holds
// rows i·shardSize up to (i+1)·shardSize-1; one empty shard when N = 0) and commits them: what
// an in-process encoder does with its N×H output, and what WriteShard and CommitManifest do
// when the shards come from separate workers. It fails when shardSize < 1, or as they do.
func WriteAll(dir string, meta Meta, ids []string, vecs []float32, shardSize int) (*Manifest, error) {
	if shardSize < 1 {
		return nil, fmt.Errorf("shard: write %s: shard size %d, want >= 1", dir, shardSize)
	}
	if err := meta.check(); err != nil {
		return nil, fmt.Errorf("shard: write %s: %w", dir, err)
	}
	if len(vecs) != len(ids)*meta.Dim {
		return nil, fmt.Errorf("shard: write %s: %d values for %d ids × dim %d (want %d)", dir, len(vecs), len(ids), meta.Dim, len(ids)*meta.Dim)
	}
	n := max(1, (len(ids)+shardSize-1)/shardSize)
	for i := range n {
		lo, hi := min(i*shardSize, len(ids)), min((i+1)*shardSize, len(ids))
		if _, err := WriteShard(dir, meta, i, ids[lo:hi], vecs[lo*meta.Dim:hi*meta.Dim]); err != nil {
			return nil, err
		}
	}
	return CommitManifest(dir, meta, n)
}
