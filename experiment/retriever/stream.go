package retriever

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"iter"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/edsrzf/mmap-go"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/tokenize/tokstore"
)

// The files of a streamed corpus (index.stream_above) in the run directory.
const (
	// StreamDir holds them: <run>/corpus.
	StreamDir = "corpus"
	// TokensFile is the tokenized passage store (tokenize/tokstore), in corpus order.
	TokensFile = "tokens.tok"
	// PassagesFile holds the passage texts (title + " " + text as data.title_field says), one
	// after the other in corpus order, read through a memory map as training batches need them.
	PassagesFile = "passages.txt"
	// ShardsDir holds the trained model's passage embeddings (index/shard, version
	// ShardVersion), searched shard by shard.
	ShardsDir    = "shards"
	ShardVersion = "final"
	// StreamShardSize is the number of passages of an embedding shard (at H = 384, 48 MB of
	// float32 vectors).
	StreamShardSize = 1 << 15
)

// streaming reports whether the recipe streams the corpus of data.dir: index.stream_above > 0
// and corpus.jsonl has more non-blank lines than that.
func streaming(rec *configs.Recipe) (bool, int, error) {
	if rec.Index.StreamAbove <= 0 {
		return false, 0, nil
	}
	n, err := countLines(filepath.Join(rec.Data.Dir, "corpus.jsonl"))
	return n > rec.Index.StreamAbove, n, err
}

// countLines counts the lines of path that hold something other than spaces, tabs and CRs.
func countLines(path string) (int, error) {
	f, err := bounded.OpenRegular(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	n, word := 0, false
	for {
		k, err := f.Read(buf)
		for _, c := range buf[:k] {
			switch c {
			case '\n':
				if word {
					n++
				}
				word = false
			case ' ', '\t', '\r':
			default:
				word = true
			}
		}
		if err == io.EOF {
			if word {
				n++
			}
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
	}
}

// checkStreamable refuses what a streamed corpus does not serve: every passage text in memory
// (the model before training ranking the corpus, checkpoint selection, a teacher, Matryoshka
// prefixes) or a resumed run.
func checkStreamable(rec *configs.Recipe, o experiment.Options, n int, teacher bool) error {
	why := ""
	switch {
	case o.ResumeDir != "":
		why = "-resume"
	case rec.Train.Steps > 0 && rec.Sampler.NegativeSource != "bm25":
		why = fmt.Sprintf("sampler.negative_source = %q (only \"bm25\")", rec.Sampler.NegativeSource)
	case rec.Eval.SelectMetric != "":
		why = "eval.select_metric"
	case slices.Contains(rec.Eval.Systems, "zeroshot"):
		why = "the zeroshot system"
	case teacher:
		why = "a distillation loss (loss.teacher)"
	case rec.Loss.Name == "matryoshka_infonce":
		why = "loss.name = \"matryoshka_infonce\""
	}
	if why == "" {
		return nil
	}
	return rec.KeyError("index.stream_above", "the corpus has %d passages, more than %d, so it is streamed, which does not serve %s yet; raise index.stream_above to load it",
		n, rec.Index.StreamAbove, why)
}

// corpusTexts returns the passages of corpus.jsonl in file order, as sequence read once, and a
// function returning the error that stopped it (nil after a complete read).
func corpusTexts(path string, title bool) (iter.Seq[string], func() error) {
	var err error
	seq := func(yield func(string) bool) {
		r, e := data.OpenCorpus(path)
		if e != nil {
			err = e
			return
		}
		defer r.Close()
		for {
			d, e := r.Next()
			if e == io.EOF {
				return
			}
			if e != nil {
				err = e
				return
			}
			if !yield(d.Passage(title)) {
				return
			}
		}
	}
	return seq, func() error { return err }
}

// streamedCorpus is a corpus on disk: its ids (from load), then (from open) its tokenized
// passages and its texts, memory-mapped.
type streamedCorpus struct {
	ids    []string
	Tokens *tokstore.Store
	text   mmap.MMap
	f      *os.File
	off    []int64 // passage i is text[off[i]:off[i+1]]
}

// write streams corpus.jsonl of data.dir into <runDir>/corpus: the token store (tok.Encode of
// each passage) and the texts. The file must still hold the ids load read, in order.
func (c *streamedCorpus) write(rec *configs.Recipe, tok *tokenize.Tokenizer, runDir string) error {
	ids := c.ids
	dir := filepath.Join(runDir, StreamDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(rec.Data.Dir, "corpus.jsonl")
	tw, err := tokstore.Create(filepath.Join(dir, TokensFile), tok.VocabSize())
	if err != nil {
		return err
	}
	textPath := filepath.Join(dir, PassagesFile)
	tf, err := os.CreateTemp(dir, "."+PassagesFile+".tmp-*")
	if err != nil {
		tw.Abort()
		return err
	}
	fail := func(err error) error {
		tw.Abort()
		tf.Close()
		os.Remove(tf.Name())
		return err
	}
	bw := bufio.NewWriterSize(tf, 1<<20)
	off := make([]int64, 1, len(ids)+1)
	r, err := data.OpenCorpus(path)
	if err != nil {
		return fail(err)
	}
	defer r.Close()
	for i := 0; ; i++ {
		d, err := r.Next()
		if err == io.EOF {
			if i != len(ids) {
				return fail(fmt.Errorf("%s: %d passages, %d when it was first read (changed during the run)", path, i, len(ids)))
			}
			break
		}
		if err != nil {
			return fail(err)
		}
		if i >= len(ids) || d.ID != ids[i] {
			return fail(fmt.Errorf("%s:%d: passage %d is %q, not what the first read found (changed during the run)", path, d.Line, i, d.ID))
		}
		text := d.Passage(rec.Data.TitleField)
		if err := tw.Add(d.ID, tok.Encode(text)); err != nil {
			return fail(fmt.Errorf("%s:%d: %w", path, d.Line, err))
		}
		if _, err := bw.WriteString(text); err != nil {
			return fail(err)
		}
		off = append(off, off[len(off)-1]+int64(len(text)))
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := tf.Sync(); err != nil {
		return fail(err)
	}
	if err := tf.Close(); err != nil {
		return fail(err)
	}
	if err := tw.Close(); err != nil {
		os.Remove(tf.Name())
		return err
	}
	if err := os.Rename(tf.Name(), textPath); err != nil {
		return err
	}
	return c.mapFiles(dir, off)
}

// mapFiles opens the token store and memory-maps the texts written into dir.
func (c *streamedCorpus) mapFiles(dir string, off []int64) error {
	store, err := tokstore.Open(filepath.Join(dir, TokensFile))
	if err != nil {
		return err
	}
	c.Tokens, c.off = store, off
	if off[len(off)-1] == 0 { // nothing to map: every passage is empty
		return nil
	}
	textPath := filepath.Join(dir, PassagesFile)
	if c.f, err = bounded.OpenRegular(textPath); err != nil {
		return err // Close closes the store
	}
	if c.text, err = mmap.Map(c.f, mmap.RDONLY, 0); err != nil {
		return fmt.Errorf("%s: %w", textPath, err)
	}
	return nil
}

// Text returns the text of passage i.
func (c *streamedCorpus) Text(i int) string {
	if c.off[i] == c.off[i+1] {
		return ""
	}
	return string(c.text[c.off[i]:c.off[i+1]])
}

// Close unmaps the texts and closes the token store (what open opened).
func (c *streamedCorpus) Close() error {
	var err error
	if c.Tokens != nil {
		err = c.Tokens.Close()
		c.Tokens = nil
	}
	if c.text != nil {
		if e := c.text.Unmap(); err == nil {
			err = e
		}
		c.text = nil
	}
	if c.f != nil {
		if e := c.f.Close(); err == nil {
			err = e
		}
		c.f = nil
	}
	return err
}

// modelHash is the hex sha256 of the parameters of m (names, shapes and float32 values), which
// names the encoder of a shard set.
func modelHash(m *model.BiEncoder) string {
	h := sha256.New()
	var b [4]byte
	for _, p := range m.Params() {
		h.Write([]byte(p.Name))
		for _, d := range p.Value.Shape() {
			binary.LittleEndian.PutUint32(b[:], uint32(d))
			h.Write(b[:])
		}
		vals, _ := p.Value.Data().([]float32)
		for _, v := range vals {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// shardMeta is the embedding shards' Meta of the trained model m.
func shardMeta(m *model.BiEncoder) shard.Meta {
	return shard.Meta{ModelHash: modelHash(m), Version: ShardVersion, Dim: m.Passage.Dim(), DType: shard.Float32}
}
