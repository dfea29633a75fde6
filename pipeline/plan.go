package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// DefaultShardRows is the number of passages in a shard when EncodeConfig.ShardRows is 0.
const DefaultShardRows = 10000

// EncodeConfig is one corpus-encoding job.
type EncodeConfig struct {
	Model  string // model directory (OpenPassageEncoder's layouts)
	Corpus string // a BEIR corpus.jsonl
	Out    string // output directory (package shards' layout)
	// ShardRows is the number of passages per shard (DefaultShardRows when 0): the unit of work
	// a worker encodes, writes and, after a failure, encodes again.
	ShardRows int
	// MaxLength and Similarity override the model directory's (0, "": the directory's).
	MaxLength  int
	Similarity string
	Dynamic    bool // dynamic padding (tokenizer.dynamic_padding)
	// DType is how the shards store the vectors (index/shard: "float32", "float16",
	// "int8-per-vector", "int8-per-dim"); "" is float32, the only one bit-identical to the
	// in-process encoder.
	DType      string
	TitleField bool // passage = title + " " + text (data.title_field)
	// IndexVersion labels the encoding (e.g. a run's "train-300"): 1 to 47 characters of
	// [A-Za-z0-9._-]; "" is "enc". The shards' version is IndexVersion-<key> (Encoding.Version).
	IndexVersion string
}

// shardTask is the work of one shard: corpus rows First..First+Rows-1, the bytes
// [Offset, End) of the corpus file, the first of them on line Line.
type shardTask struct {
	Index, First, Rows int
	Offset, End        int64
	Line               int
	SHA256             string // of the shard's bytes of the corpus file
}

// EncodePlan is a planned encoding job: what every shard will carry and the work of each.
type EncodePlan struct {
	Config   EncodeConfig
	Encoding Encoding
	Tasks    []shardTask
	Empty    int // documents whose title and text are both empty (kept, encoded as empty passages)
}

// Plan checks an encoding job before any worker starts: it loads the model (its hash,
// dimension, similarity and length), reads the corpus once as data.LoadCorpus checks it (the
// same errors, naming file and line; duplicate ids too) without holding its text, and cuts it
// into shards of ShardRows passages, recording each shard's byte range and checksum so that
// a worker reads exactly the bytes planned.
func Plan(cfg EncodeConfig) (*EncodePlan, error) {
	if cfg.ShardRows == 0 {
		cfg.ShardRows = DefaultShardRows
	}
	if cfg.ShardRows < 1 || cfg.Model == "" || cfg.Corpus == "" || cfg.Out == "" {
		return nil, fmt.Errorf("pipeline: encode: model %q, corpus %q, out %q and shard rows %d: all are required (rows >= 1)", cfg.Model, cfg.Corpus, cfg.Out, cfg.ShardRows)
	}
	if cfg.DType == "" {
		cfg.DType = shard.Float32.String()
	}
	if _, err := shard.ParseDType(cfg.DType); err != nil {
		return nil, fmt.Errorf("pipeline: encode: %w", err)
	}
	if cfg.IndexVersion == "" {
		cfg.IndexVersion = "enc"
	}
	if !labelRE.MatchString(cfg.IndexVersion) {
		return nil, fmt.Errorf("pipeline: encode: index version %q: want 1 to 47 characters of [A-Za-z0-9._-]", cfg.IndexVersion)
	}
	enc, err := OpenPassageEncoder(cfg.Model, cfg.MaxLength, cfg.Similarity, cfg.Dynamic)
	if err != nil {
		return nil, err
	}
	enc.Close()
	p := &EncodePlan{Config: cfg}
	lines := map[string]int{}
	var t *shardTask
	err = data.ScanCorpus(cfg.Corpus, 0, 1, 0, func(d data.Document, offset int64) error {
		if first, dup := lines[d.ID]; dup {
			return fmt.Errorf("%s:%d: duplicate _id %q (first at line %d)", cfg.Corpus, d.Line, d.ID, first)
		}
		lines[d.ID] = d.Line
		if d.Title == "" && d.Text == "" {
			p.Empty++
		}
		if t == nil || t.Rows == cfg.ShardRows {
			if t != nil {
				t.End = offset
			}
			p.Tasks = append(p.Tasks, shardTask{Index: len(p.Tasks), First: len(lines) - 1, Offset: offset, Line: d.Line})
			t = &p.Tasks[len(p.Tasks)-1]
		}
		t.Rows++
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, fmt.Errorf("%s: no documents", cfg.Corpus)
	}
	corpusSum, err := p.checksums()
	if err != nil {
		return nil, err
	}
	p.Config = cfg
	p.Encoding = Encoding{
		IndexVersion: cfg.IndexVersion, ModelHash: enc.Hash, Model: cfg.Model, Dim: enc.Dim, DType: cfg.DType,
		Similarity: enc.Similarity, MaxLength: enc.MaxLength, Dynamic: cfg.Dynamic, TitleField: cfg.TitleField,
		Corpus: cfg.Corpus, CorpusSHA256: corpusSum, Count: len(lines), ShardRows: cfg.ShardRows,
	}
	return p, nil
}

// checksums reads the corpus file once more: the SHA-256 of each shard's bytes (the last
// shard's run to the end of the file) and of the whole file.
func (p *EncodePlan) checksums() (string, error) {
	f, err := bounded.OpenRegular(p.Config.Corpus)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	p.Tasks[len(p.Tasks)-1].End = st.Size()
	whole := sha256.New()
	if _, err := io.Copy(whole, io.NewSectionReader(f, 0, p.Tasks[0].Offset)); err != nil {
		return "", fmt.Errorf("%s: %w", p.Config.Corpus, err)
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(h, whole), io.NewSectionReader(f, t.Offset, t.End-t.Offset)); err != nil {
			return "", fmt.Errorf("%s: %w", p.Config.Corpus, err)
		}
		t.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return hex.EncodeToString(whole.Sum(nil)), nil
}

// readShard reads the passages of t from the corpus, after checking that its bytes are the
// ones planned (a corpus changed since Plan is an error, not a mixed encoding).
func readShard(corpus string, t shardTask, withTitle bool) ([]string, []string, error) {
	f, err := bounded.OpenRegular(corpus)
	if err != nil {
		return nil, nil, err
	}
	h := sha256.New()
	_, err = io.Copy(h, io.NewSectionReader(f, t.Offset, t.End-t.Offset))
	f.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", corpus, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != t.SHA256 {
		return nil, nil, fmt.Errorf("%s: bytes %d..%d (lines from %d, shard %d) changed since the plan (sha256 %s, planned %s)", corpus, t.Offset, t.End, t.Line, t.Index, got, t.SHA256)
	}
	ids, passages := make([]string, 0, t.Rows), make([]string, 0, t.Rows)
	err = data.ScanCorpus(corpus, t.Offset, t.Line, t.Rows, func(d data.Document, _ int64) error {
		ids, passages = append(ids, d.ID), append(passages, d.Passage(withTitle))
		return nil
	})
	if err == nil && len(ids) != t.Rows {
		err = errors.New("fewer documents than planned")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("shard %d: %w", t.Index, err)
	}
	return ids, passages, nil
}
