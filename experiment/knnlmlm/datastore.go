package knnlmlm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/knnlm"
)

// DatastoreDir is the run directory's datastore: shard-NNNNN.bin files of knnlm_lm.shard_docs
// abstracts each and manifest.json, which lists the shards written so far with their SHA-256
// and the hash of what they are of (the LM file, the abstracts in order, the token bound and
// the precision). Each shard and then the manifest are written atomically (temporary file,
// rename), so a killed build leaves whole shards; a resumed run verifies them by their SHA-256
// and builds from the first shard the manifest lacks.
const DatastoreDir = "datastore"

// ManifestFile is the datastore's manifest.
const ManifestFile = "manifest.json"

// layoutVersion changes when the way an abstract becomes a datastore's pairs changes.
const layoutVersion = "knnlm_lm/1"

// shardMagic opens every shard file.
const shardMagic = "KNNLMDS1"

// shardHeader is the magic and three little-endian uint32: dim, pairs, bytes per key value.
const shardHeader = len(shardMagic) + 12

// maxManifest bounds manifest.json.
const maxManifest = 64 << 20

// manifest is the datastore's manifest.json.
type manifest struct {
	Version   string       `json:"version"`
	Hash      string       `json:"hash"` // what the shards are of (datastoreHash)
	Dim       int          `json:"dim"`
	Precision string       `json:"precision"`
	ShardDocs int          `json:"shard_docs"`
	Shards    []shardEntry `json:"shards"`
	LogBytes  int64        `json:"log_bytes"` // log.jsonl's length after the last shard's line
}

type shardEntry struct {
	File   string `json:"file"`
	Docs   int    `json:"docs"`
	Pairs  int    `json:"pairs"`
	SHA256 string `json:"sha256"`
}

// datastoreHash names what a datastore is of: the LM file's SHA-256, the layout, the token
// bound, the precision, the shard size and the abstracts' ids in order.
func datastoreHash(lmSHA string, c *Config, titleField bool, ids []string) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00abstract_tokens=%d\x00precision=%s\x00shard_docs=%d\x00title=%v\x00%s",
		layoutVersion, lmSHA, c.AbstractTokens, c.Precision, c.ShardDocs, titleField, strings.Join(ids, "\x00")))
	return hex.EncodeToString(h[:])
}

func shardName(i int) string { return fmt.Sprintf("shard-%05d.bin", i) }

// encodeShard is a store's bytes as a shard file: the header, the keys as stored (float32, or
// float16 bits), then the values as int32, all little-endian.
func encodeShard(s *knnlm.Store) []byte {
	per := 4
	if s.Precision == knnlm.Float16 {
		per = 2
	}
	var b bytes.Buffer
	b.Grow(shardHeader + s.Len()*(s.Dim*per+4))
	b.WriteString(shardMagic)
	for _, x := range []int{s.Dim, s.Len(), per} {
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(x)))
	}
	key := make([]float32, s.Dim)
	var buf [4]byte
	for i := range s.Len() {
		s.Key(i, key)
		for _, x := range key {
			if per == 2 {
				binary.LittleEndian.PutUint16(buf[:2], shard.Half(x))
			} else {
				binary.LittleEndian.PutUint32(buf[:4], math.Float32bits(x))
			}
			b.Write(buf[:per])
		}
	}
	for _, v := range s.Values {
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(v)))
	}
	return b.Bytes()
}

// decodeShard appends the pairs of a shard file's bytes to s, checking that the header
// matches s and the length the header implies (before anything is allocated).
func decodeShard(name string, b []byte, s *knnlm.Store) (int, error) {
	if len(b) < shardHeader || string(b[:len(shardMagic)]) != shardMagic {
		return 0, fmt.Errorf("%s: not a datastore shard", name)
	}
	dim := int(binary.LittleEndian.Uint32(b[8:]))
	n := int(binary.LittleEndian.Uint32(b[12:]))
	per := int(binary.LittleEndian.Uint32(b[16:]))
	want := 4
	if s.Precision == knnlm.Float16 {
		want = 2
	}
	if dim != s.Dim || per != want {
		return 0, fmt.Errorf("%s: keys of %d values of %d bytes, want %d of %d", name, dim, per, s.Dim, want)
	}
	if int64(len(b)) != int64(shardHeader)+int64(n)*int64(dim*per+4) {
		return 0, fmt.Errorf("%s: %d bytes, but its header says %d pairs of %d values (%d bytes)", name, len(b), n, dim,
			int64(shardHeader)+int64(n)*int64(dim*per+4))
	}
	keys, vals := b[shardHeader:shardHeader+n*dim*per], b[shardHeader+n*dim*per:]
	key := make([]float32, dim)
	for i := range n {
		for j := range key {
			o := (i*dim + j) * per
			if per == 2 {
				key[j] = shard.HalfValue(binary.LittleEndian.Uint16(keys[o:]))
			} else {
				key[j] = math.Float32frombits(binary.LittleEndian.Uint32(keys[o:]))
			}
		}
		if err := s.Add(key, int(int32(binary.LittleEndian.Uint32(vals[4*i:])))); err != nil {
			return 0, fmt.Errorf("%s: pair %d: %w", name, i, err)
		}
	}
	return n, nil
}

// readManifest reads dir's manifest (nil when there is none), refusing one of another
// datastore.
func readManifest(dir, hash string) (*manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	b, err := bounded.ReadFile(path, maxManifest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m.Version != layoutVersion || m.Hash != hash {
		return nil, fmt.Errorf("%s: a datastore of another LM, corpus, token bound, precision or shard size (hash %s, this run's %s); remove %s to build it again",
			path, m.Hash, hash, dir)
	}
	return &m, nil
}

// loadShard reads shard entry e of dir into s after checking its SHA-256 and pair count.
func loadShard(dir string, e shardEntry, s *knnlm.Store) error {
	path := filepath.Join(dir, e.File)
	b, err := bounded.ReadFile(path, int64(shardHeader)+int64(e.Pairs)*int64(s.Dim*4+4))
	if err != nil {
		return err
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != e.SHA256 {
		return fmt.Errorf("%s: SHA-256 %x, the manifest says %s (changed since it was written; remove %s to build it again)", path, sum, e.SHA256, dir)
	}
	n, err := decodeShard(path, b, s)
	if err == nil && n != e.Pairs {
		err = fmt.Errorf("%s: %d pairs, the manifest says %d", path, n, e.Pairs)
	}
	return err
}

// writeShard writes a built shard store as shard i of dir, atomically, and returns its entry.
func writeShard(dir string, i, docs int, st *knnlm.Store) (shardEntry, []byte, error) {
	b := encodeShard(st)
	e := shardEntry{File: shardName(i), Docs: docs, Pairs: st.Len()}
	sum := sha256.Sum256(b)
	e.SHA256 = hex.EncodeToString(sum[:])
	return e, b, atomicfile.WriteFile(filepath.Join(dir, e.File), b)
}

// writeManifest writes m atomically.
func writeManifest(dir string, m *manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, ManifestFile), append(b, '\n'))
}

// ensureDir makes dir.
func ensureDir(dir string) error { return os.MkdirAll(dir, 0o755) }
