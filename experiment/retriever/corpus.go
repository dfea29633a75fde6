package retriever

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// corpus is a retriever run's passages, loaded into memory (loadedCorpus) or streamed from
// corpus.jsonl onto the run directory (streamedCorpus, index.stream_above): the stages ask it for
// what they need and never branch on which it is.
type corpus interface {
	// load reads the judged splits of data.dir, prepares the tokenizer (trained on the passages,
	// or the resumed run's) and indexes every passage with BM25.
	load(rec *configs.Recipe, o experiment.Options, splits []string) (*data.Dataset, *index.BM25, *tokenize.Tokenizer, error)
	// open writes what the corpus keeps in the run directory dir once it exists (a streamed
	// corpus's token store and texts); from then on Text serves every passage.
	open(rec *configs.Recipe, tok *tokenize.Tokenizer, dir string, out io.Writer) error
	// Len is the number of passages.
	Len() int
	// Text is the text of passage i (title + " " + text as data.title_field says).
	Text(i int) string
	// Texts is every passage text in memory, in corpus order; nil for a streamed corpus, which
	// refuses the features that need it (checkStreamable).
	Texts() []string
	// index encodes the corpus with the trained model m for the final evaluation: from memory,
	// or from the token store into embedding shards in the run directory dir.
	index(rec *configs.Recipe, m *model.BiEncoder, tok *tokenize.Tokenizer, cosine bool, dir string, progress io.Writer) (*biencoder.Searcher, error)
	// keep leaves the final index s of model m in the run directory dir as embedding shards
	// (<dir>/corpus/shards, a manifest with m's hash), which `train search` serves: a loaded
	// corpus writes them (biencoder.Searcher.WriteShards); a streamed corpus's index wrote them.
	keep(s *biencoder.Searcher, m *model.BiEncoder, dir string) error
	Close() error
}

// loadedCorpus is a corpus held in memory.
type loadedCorpus struct {
	ids, passages []string
}

func (c *loadedCorpus) load(rec *configs.Recipe, o experiment.Options, splits []string) (*data.Dataset, *index.BM25, *tokenize.Tokenizer, error) {
	ds, err := data.LoadJudged(rec.Data.Dir, splits...)
	if err != nil {
		return nil, nil, nil, err
	}
	c.ids, c.passages = ds.Corpus.IDs, make([]string, ds.Corpus.Len())
	for i := range c.passages {
		c.passages[i] = ds.Corpus.Passage(i, rec.Data.TitleField)
	}
	tok, err := experiment.PrepareTokenizer(rec, o.ResumeDir, c.passages, o.Out)
	if err != nil {
		return nil, nil, nil, err
	}
	start := time.Now()
	bm25 := index.NewBM25(ds.Corpus.IDs, c.passages, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	fmt.Fprintf(o.Out, "bm25: indexed %d passages in %.2fs\n", ds.Corpus.Len(), time.Since(start).Seconds())
	return ds, bm25, tok, nil
}

func (c *loadedCorpus) open(*configs.Recipe, *tokenize.Tokenizer, string, io.Writer) error {
	return nil
}
func (c *loadedCorpus) Len() int          { return len(c.passages) }
func (c *loadedCorpus) Text(i int) string { return c.passages[i] }
func (c *loadedCorpus) Texts() []string   { return c.passages }
func (c *loadedCorpus) Close() error      { return nil }

func (c *loadedCorpus) keep(s *biencoder.Searcher, m *model.BiEncoder, dir string) error {
	_, err := s.WriteShards(filepath.Join(dir, StreamDir, ShardsDir), shardMeta(m), StreamShardSize)
	return err
}

func (c *loadedCorpus) index(rec *configs.Recipe, m *model.BiEncoder, tok *tokenize.Tokenizer, cosine bool, _ string, progress io.Writer) (*biencoder.Searcher, error) {
	return newEvalSearcher(rec, m, tok, cosine, c.ids, c.passages, progress)
}

// load streams corpus.jsonl once for BM25 and the ids and once more to train the tokenizer;
// open streams it a third time into the run directory's token store and texts, which training
// batches and the final index read.
func (c *streamedCorpus) load(rec *configs.Recipe, o experiment.Options, splits []string) (*data.Dataset, *index.BM25, *tokenize.Tokenizer, error) {
	start := time.Now()
	b := index.NewBM25Builder(index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	ds, err := data.LoadStreamed(rec.Data.Dir, func(d data.Document) error { b.Add(d.ID, d.Passage(rec.Data.TitleField)); return nil }, splits...)
	if err != nil {
		return nil, nil, nil, err
	}
	bm25 := b.Build()
	c.ids = ds.Corpus.IDs
	fmt.Fprintf(o.Out, "bm25: streamed and indexed %d passages in %.2fs (index.stream_above = %d)\n", ds.Corpus.Len(), time.Since(start).Seconds(), rec.Index.StreamAbove)
	texts, textErr := corpusTexts(filepath.Join(rec.Data.Dir, "corpus.jsonl"), rec.Data.TitleField)
	tok, err := experiment.PrepareTokenizerSeq(rec, o.ResumeDir, texts, o.Out)
	if err == nil {
		err = textErr()
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return ds, bm25, tok, nil
}

func (c *streamedCorpus) open(rec *configs.Recipe, tok *tokenize.Tokenizer, dir string, out io.Writer) error {
	start := time.Now()
	if err := c.write(rec, tok, dir); err != nil {
		return err
	}
	fmt.Fprintf(out, "stream: tokenized %d passages into %s in %.1fs\n", c.Tokens.Len(), filepath.Join(dir, StreamDir), time.Since(start).Seconds())
	return nil
}

func (c *streamedCorpus) keep(*biencoder.Searcher, *model.BiEncoder, string) error { return nil }
func (c *streamedCorpus) Len() int                                                 { return len(c.ids) }
func (c *streamedCorpus) Texts() []string                                          { return nil }

// index encodes the token store into embedding shards in the run directory and searches them
// shard by shard, or, from index.ann_threshold passages on, reads them back into an HNSW graph
// in memory (biencoder.NewShardSearcher).
func (c *streamedCorpus) index(rec *configs.Recipe, m *model.BiEncoder, tok *tokenize.Tokenizer, cosine bool, dir string, _ io.Writer) (*biencoder.Searcher, error) {
	opt := biencoder.SearchOptions{Len: biencoder.Lengths{Query: rec.Tokenizer.QueryLength(), Passage: rec.Tokenizer.MaxLength},
		Cosine: cosine, Dynamic: rec.Tokenizer.DynamicPadding, ANNThreshold: rec.Index.ANNThreshold, ANN: annParams(rec)}
	return biencoder.NewShardSearcher(m, tok, opt, c.Tokens, filepath.Join(dir, StreamDir, ShardsDir), shardMeta(m), StreamShardSize)
}
