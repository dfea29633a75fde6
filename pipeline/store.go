package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// Encoding says what encoded a committed output and how: the file encoding-<version>.json
// beside the manifest (package index/shard's manifest.json, which names the version, model
// hash, dim and dtype). Every field but the paths goes into the version's name (Version), so
// two encodings that could differ in one bit never share a shard file.
type Encoding struct {
	IndexVersion string `json:"index_version"` // the caller's label (a run's "train-300", a refresh's "step-1200")
	ModelHash    string `json:"model_hash"`    // indexrefresh.HashParams of the passage tower (16 hex digits)
	Model        string `json:"model"`         // the model directory, as given (for the record)
	Dim          int    `json:"dim"`           // H, values per row
	DType        string `json:"dtype"`         // shard.DType: float32, float16, int8-per-vector, int8-per-dim
	Similarity   string `json:"similarity"`    // "cosine" (rows L2-normalised) or "dot"
	MaxLength    int    `json:"max_length"`    // tokens per passage, [CLS] and [SEP] included
	Dynamic      bool   `json:"dynamic_padding"`
	TitleField   bool   `json:"title_field"`   // passage = title + " " + text
	Corpus       string `json:"corpus"`        // corpus.jsonl, as given
	CorpusSHA256 string `json:"corpus_sha256"` // of corpus.jsonl
	Count        int    `json:"count"`         // passages in the corpus
	ShardRows    int    `json:"shard_rows"`    // passages per shard (the last may have fewer)
}

// Truncation is what cutting the passages to MaxLength tokens cut, over the corpus.
type Truncation struct {
	Cut           int64 `json:"passages_cut"`   // passages longer than MaxLength
	Tokens        int64 `json:"tokens"`         // tokens of the cut passages before truncation
	TokensDropped int64 `json:"tokens_dropped"` // of those, the tokens dropped
}

func (t *Truncation) add(o Truncation) {
	t.Cut, t.Tokens, t.TokensDropped = t.Cut+o.Cut, t.Tokens+o.Tokens, t.TokensDropped+o.TokensDropped
}

// String reads "12 of 960 passages cut (3.1% of their tokens dropped)" for count passages.
func (t Truncation) String(count int) string {
	share := 0.0
	if t.Tokens > 0 {
		share = 100 * float64(t.TokensDropped) / float64(t.Tokens)
	}
	return fmt.Sprintf("%d of %d passages cut (%.1f%% of their tokens dropped)", t.Cut, count, share)
}

// encodingFile is encoding-<version>.json: the Encoding and what truncation cut.
type encodingFile struct {
	Encoding
	Truncation Truncation `json:"truncation"`
}

// doneRecord is .done-<version>/<k>.json: a written shard's entry and its truncation counts.
type doneRecord struct {
	Entry      shard.ShardEntry `json:"entry"`
	Truncation Truncation       `json:"truncation"`
}

// labelRE is what an IndexVersion may hold: index/shard's version characters, leaving room for
// the key Version appends.
var labelRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,47}$`)

// Key returns the first 16 hex digits of the SHA-256 of e's JSON without its paths (Model,
// Corpus), which do not change a bit of the output.
func (e Encoding) Key() string {
	e.Model, e.Corpus = "", ""
	b, _ := json.Marshal(e) // strings, ints and bools always marshal
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

// Version is the index/shard version of e: IndexVersion + "-" + Key(), e.g.
// "train-300-3fa2c81e9b0d4e11". The shard files are named by it.
func (e Encoding) Version() string { return e.IndexVersion + "-" + e.Key() }

// Shards is the number of shards of Count passages in shards of ShardRows.
func (e Encoding) Shards() int { return (e.Count + e.ShardRows - 1) / e.ShardRows }

// Rows is the number of passages of shard k.
func (e Encoding) Rows(k int) int { return min(e.ShardRows, e.Count-k*e.ShardRows) }

// ShardMeta is the index/shard Meta of e's shards.
func (e Encoding) ShardMeta() (shard.Meta, error) {
	t, err := shard.ParseDType(e.DType)
	if err != nil {
		return shard.Meta{}, err
	}
	return shard.Meta{ModelHash: e.ModelHash, Version: e.Version(), Dim: e.Dim, DType: t}, nil
}

// EncodingFile is the name of e's description in the output directory.
func EncodingFile(version string) string { return "encoding-" + version + ".json" }

// shardStore is where the encoding pipeline writes its shards and commits them: package
// index/shard on a directory every worker sees (a local disk for Prism, a shared file system on
// a cluster).
type shardStore interface {
	// Write writes shard k (its ids and len(ids) x Dim vectors, and what truncation cut of
	// them) atomically and returns its record.
	Write(e Encoding, k int, ids []string, vecs []float32, t Truncation) (doneRecord, error)
	// Existing returns the record of shard k when a complete copy is there from an earlier
	// attempt (its record and its file's size and checksum agree).
	Existing(e Encoding, k int) (doneRecord, bool)
	// Commit checks the shards reported (one per shard) against the files, then writes e's
	// description and commits the manifest, last.
	Commit(e Encoding, done map[int]doneRecord) (*shard.Manifest, error)
}

type dirStore struct{ dir string }

func openStore(dir string) shardStore { return dirStore{dir: dir} }

// doneFile is the record of a written shard, from which a rerun knows it need not encode it
// again: .done-<version>/<k>.json, written after the shard file.
func (s dirStore) doneFile(e Encoding, k int) string {
	return filepath.Join(s.dir, ".done-"+e.Version(), fmt.Sprintf("%05d.json", k))
}

func (s dirStore) Write(e Encoding, k int, ids []string, vecs []float32, t Truncation) (doneRecord, error) {
	meta, err := e.ShardMeta()
	if err != nil {
		return doneRecord{}, err
	}
	if err := os.MkdirAll(filepath.Dir(s.doneFile(e, k)), 0o755); err != nil {
		return doneRecord{}, err
	}
	entry, err := shard.WriteShard(s.dir, meta, k, ids, vecs)
	if err != nil {
		return doneRecord{}, err
	}
	rec := doneRecord{Entry: entry, Truncation: t}
	b, _ := json.Marshal(rec)
	return rec, atomicfile.WriteFile(s.doneFile(e, k), append(b, '\n'))
}

func (s dirStore) Existing(e Encoding, k int) (doneRecord, bool) {
	var rec doneRecord
	b, err := bounded.ReadFile(s.doneFile(e, k), bounded.SmallFile)
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Entry.File != shard.ShardFile(e.Version(), k) || rec.Entry.Count != int64(e.Rows(k)) {
		return doneRecord{}, false
	}
	sum, size, err := fileSHA256(filepath.Join(s.dir, rec.Entry.File))
	return rec, err == nil && sum == rec.Entry.SHA256 && size == rec.Entry.Bytes
}

func (s dirStore) Commit(e Encoding, done map[int]doneRecord) (*shard.Manifest, error) {
	meta, err := e.ShardMeta()
	if err != nil {
		return nil, err
	}
	n := e.Shards()
	list := make([]shard.ShardEntry, n)
	var trunc Truncation
	for k := range n {
		rec, ok := done[k]
		want := rec.Entry
		if !ok {
			return nil, fmt.Errorf("pipeline: commit %s: shard %d of %d was not written", s.dir, k, n)
		}
		if want.Count != int64(e.Rows(k)) {
			return nil, fmt.Errorf("pipeline: commit %s: shard %d holds %d passages, want %d", s.dir, k, want.Count, e.Rows(k))
		}
		list[k] = want
		trunc.add(rec.Truncation)
	}
	if len(done) != n {
		return nil, fmt.Errorf("pipeline: commit %s: %d shards reported, want %d", s.dir, len(done), n)
	}
	if err := atomicfile.WriteJSON(filepath.Join(s.dir, EncodingFile(e.Version())), encodingFile{Encoding: e, Truncation: trunc}); err != nil {
		return nil, err
	}
	// CommitShards checks every file against its worker's report (count, size, sha256), the
	// headers against meta and the ids for duplicates, then writes the manifest last.
	return shard.CommitShards(s.dir, meta, list)
}

// ReadEncoding reads the committed version of an encoding output directory: index/shard's
// manifest and the version's encoding-<version>.json, checked against each other.
func ReadEncoding(dir string) (*shard.Manifest, Encoding, error) {
	man, f, err := readEncodingFile(dir)
	return man, f.Encoding, err
}

// ReadTruncation returns what truncation cut of the committed version's passages.
func ReadTruncation(dir string) (Truncation, error) {
	_, f, err := readEncodingFile(dir)
	return f.Truncation, err
}

func readEncodingFile(dir string) (*shard.Manifest, encodingFile, error) {
	man, err := shard.ReadManifest(dir)
	if err != nil {
		return nil, encodingFile{}, err
	}
	var f encodingFile
	path := filepath.Join(dir, EncodingFile(man.Version))
	b, err := bounded.ReadFile(path, bounded.ConfigJSON)
	if err != nil {
		return nil, encodingFile{}, err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, encodingFile{}, fmt.Errorf("%s: %w", path, err)
	}
	e := f.Encoding
	if e.Version() != man.Version || e.ModelHash != man.ModelHash || e.Dim != man.Dim || e.DType != man.DType || int64(e.Count) != man.Count {
		return nil, encodingFile{}, fmt.Errorf("%s: does not describe %s (version %s, model hash %s, %d x %d %s)",
			path, filepath.Join(dir, shard.ManifestFile), man.Version, man.ModelHash, man.Count, man.Dim, man.DType)
	}
	return man, f, nil
}

// ReadEmbeddings reads the committed version of dir whole: every shard checked against the
// manifest's checksums (shard.Reader.Verify), its ids and vectors (decoded to float32)
// concatenated in corpus order, Count x Dim values. For a corpus too large for memory, search
// it with shard.Open instead.
func ReadEmbeddings(dir string) ([]string, []float32, Encoding, error) {
	_, e, err := ReadEncoding(dir)
	if err != nil {
		return nil, nil, Encoding{}, err
	}
	r, err := shard.Open(dir)
	if err != nil {
		return nil, nil, Encoding{}, err
	}
	defer r.Close()
	if err := r.Verify(); err != nil {
		return nil, nil, Encoding{}, err
	}
	ids := make([]string, 0, r.Len())
	vecs := make([]float32, 0, r.Len()*r.Dim())
	err = r.ForEach(func(_ int, sids []string, v []float32) error {
		ids, vecs = append(ids, sids...), append(vecs, v...)
		return nil
	})
	if err != nil {
		return nil, nil, Encoding{}, err
	}
	return ids, vecs, e, nil
}

func fileSHA256(path string) (string, int64, error) {
	f, err := bounded.OpenRegular(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
