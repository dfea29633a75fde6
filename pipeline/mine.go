package pipeline

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/index/shard"
)

func init() {
	register.DoFn3x1[context.Context, queryBlock, func(queryHits), error](&searchBlockFn{})
	register.DoFn3x1[context.Context, int, func(*queryHits) bool, error](&writeRunFn{})
	register.Emitter1[queryHits]()
	register.Iter1[queryHits]()
	beam.RegisterType(reflect.TypeFor[queryBlock]())
	beam.RegisterType(reflect.TypeFor[queryHits]())
}

// DefaultQueryBlock is the number of queries a mining worker encodes and searches at a time.
const DefaultQueryBlock = 1000

// MineConfig is one dense mining job: the top K passages of every query in a committed
// encoding output, as a TREC run (the candidates hard negatives are drawn from).
type MineConfig struct {
	Model      string // the model directory whose passage tower encoded Embeddings
	Queries    string // a BEIR queries.jsonl
	Embeddings string // a committed output of Encode
	Out        string // the TREC run file to write
	K          int    // hits per query (> 0)
	// MaxLength is the queries' length in tokens (tokenizer.query_max_length); 0: the
	// encoding's max length. Dynamic pads each query batch to its longest query.
	MaxLength int
	Dynamic   bool
	Block     int    // queries per task (DefaultQueryBlock when 0)
	Tag       string // the run's tag (TREC's last column; "dense" when "")
}

// queryBlock is the work of one mining task.
type queryBlock struct {
	Index int
	IDs   []string
	Texts []string
}

// queryHits is one query's top K.
type queryHits struct {
	QID    string
	DocIDs []string
	Scores []float64
}

// MinePlan is a planned mining job.
type MinePlan struct {
	Config   MineConfig
	Encoding Encoding // of the embeddings searched
	Version  string   // their committed version, which every worker must find
	Blocks   []queryBlock
}

// PlanMine checks a mining job before any worker starts: the queries load (data.LoadQueries's
// errors), the embeddings are committed, and the model's passage tower is the one that encoded
// them (same parameter hash), so its query tower belongs with them; every shard's sha256 is
// checked against the manifest (shard.OpenVerified), naming the shard that differs.
func PlanMine(cfg MineConfig) (*MinePlan, error) {
	if cfg.Block == 0 {
		cfg.Block = DefaultQueryBlock
	}
	if cfg.Tag == "" {
		cfg.Tag = "dense"
	}
	if cfg.K < 1 || cfg.Block < 1 || cfg.Model == "" || cfg.Queries == "" || cfg.Embeddings == "" || cfg.Out == "" {
		return nil, fmt.Errorf("pipeline: mine: model %q, queries %q, embeddings %q, out %q, k %d and block %d: all are required (k, block >= 1)",
			cfg.Model, cfg.Queries, cfg.Embeddings, cfg.Out, cfg.K, cfg.Block)
	}
	man, e, err := ReadEncoding(cfg.Embeddings)
	if err != nil {
		return nil, err
	}
	if cfg.MaxLength == 0 {
		cfg.MaxLength = e.MaxLength
	}
	enc, err := OpenQueryEncoder(cfg.Model, cfg.MaxLength, e.Similarity, cfg.Dynamic)
	if err != nil {
		return nil, err
	}
	enc.Close()
	if enc.Hash != e.ModelHash || enc.Dim != e.Dim {
		return nil, fmt.Errorf("pipeline: mine: %s's passage tower hashes to %s (dim %d); %s was encoded by %s (dim %d)", cfg.Model, enc.Hash, enc.Dim, cfg.Embeddings, e.ModelHash, e.Dim)
	}
	r, err := shard.OpenVerified(cfg.Embeddings) // as compare does: a corrupted shard stops the job before any worker
	if err != nil {
		return nil, fmt.Errorf("pipeline: mine: %w", err)
	}
	r.Close()
	q, err := data.LoadQueries(cfg.Queries)
	if err != nil {
		return nil, err
	}
	p := &MinePlan{Config: cfg, Encoding: e, Version: man.Version}
	for lo := 0; lo < q.Len(); lo += cfg.Block {
		hi := min(lo+cfg.Block, q.Len())
		p.Blocks = append(p.Blocks, queryBlock{Index: len(p.Blocks), IDs: q.IDs[lo:hi], Texts: q.Texts[lo:hi]})
	}
	return p, nil
}

// searchBlockFn encodes a block of queries with the query tower and searches the committed
// shards exactly (shard.Reader.SearchBatch: index.Flat's hits, one shard mapped at a time).
type searchBlockFn struct {
	Model, Embeddings, Version string
	ModelHash, Similarity      string
	MaxLength, K               int
	Dynamic                    bool

	enc *PassageEncoder
	r   *shard.Reader
}

func (f *searchBlockFn) Setup() error {
	enc, err := OpenQueryEncoder(f.Model, f.MaxLength, f.Similarity, f.Dynamic)
	if err != nil {
		return err
	}
	if enc.Hash != f.ModelHash {
		enc.Close()
		return fmt.Errorf("pipeline: mine: %s now hashes to %s; the job was planned with %s", f.Model, enc.Hash, f.ModelHash)
	}
	r, err := shard.OpenVerified(f.Embeddings)
	if err != nil {
		enc.Close()
		return err
	}
	if v := r.Meta().Version; v != f.Version {
		enc.Close()
		r.Close()
		return fmt.Errorf("pipeline: mine: %s now serves version %s; the job was planned with %s", f.Embeddings, v, f.Version)
	}
	f.enc, f.r = enc, r
	return nil
}

func (f *searchBlockFn) ProcessElement(ctx context.Context, b queryBlock, emit func(queryHits)) error {
	qv, err := f.enc.Encode(b.Texts)
	if err != nil {
		return fmt.Errorf("queries %s..%s: %w", b.IDs[0], b.IDs[len(b.IDs)-1], err)
	}
	res, err := f.r.SearchBatch(qv, f.K)
	if err != nil {
		return err
	}
	for i, hits := range res {
		h := queryHits{QID: b.IDs[i], DocIDs: make([]string, len(hits)), Scores: make([]float64, len(hits))}
		for j, x := range hits {
			h.DocIDs[j], h.Scores[j] = x.DocID, x.Score
		}
		emit(h)
	}
	mineQueries.Inc(ctx, int64(len(b.IDs)))
	return nil
}

func (f *searchBlockFn) Teardown() error {
	if f.r != nil {
		f.r.Close()
	}
	if f.enc != nil {
		return f.enc.Close()
	}
	return nil
}

// writeRunFn receives every query's hits (one key) and writes the TREC run, atomically.
type writeRunFn struct {
	Out, Tag string
	Queries  int
}

func (f *writeRunFn) ProcessElement(ctx context.Context, _ int, all func(*queryHits) bool) error {
	run := eval.Run{}
	var h queryHits
	for all(&h) {
		hits := make([]index.Hit, len(h.DocIDs))
		for j := range hits {
			hits[j] = index.Hit{DocID: h.DocIDs[j], Score: h.Scores[j]}
		}
		if prev, dup := run[h.QID]; dup && !slices.Equal(prev, hits) {
			return fmt.Errorf("pipeline: mine: query %q searched twice with different hits", h.QID)
		}
		run[h.QID] = hits
	}
	if len(run) != f.Queries {
		return fmt.Errorf("pipeline: mine: %d queries searched, want %d", len(run), f.Queries)
	}
	return eval.WriteTREC(f.Out, run, f.Tag)
}

var mineQueries = beam.NewCounter("ragtrain", "queries_searched")

// MineDense adds the mining pipeline of plan to s: the query blocks reshuffled over the
// workers, each encoded and searched against every shard, and one writer of the run.
func MineDense(s beam.Scope, plan *MinePlan) {
	s = s.Scope("MineDense")
	c := plan.Config
	blocks := beam.Reshuffle(s, beam.CreateList(s, plan.Blocks))
	hits := beam.ParDo(s, &searchBlockFn{
		Model: c.Model, Embeddings: c.Embeddings, Version: plan.Version, ModelHash: plan.Encoding.ModelHash,
		Similarity: plan.Encoding.Similarity, MaxLength: c.MaxLength, K: c.K, Dynamic: c.Dynamic,
	}, blocks)
	n := 0
	for _, b := range plan.Blocks {
		n += len(b.IDs)
	}
	beam.ParDo0(s, &writeRunFn{Out: c.Out, Tag: c.Tag, Queries: n}, beam.GroupByKey(s, beam.AddFixedKey(s, hits)))
}

// Mine plans the job (PlanMine) and runs its pipeline on runner ("" or "prism": the embedded
// Prism runner; others as Encode says).
func Mine(ctx context.Context, cfg MineConfig, runner string) (*MinePlan, error) {
	plan, err := PlanMine(cfg)
	if err != nil {
		return nil, err
	}
	p, s := beam.NewPipelineWithRoot()
	MineDense(s, plan)
	if _, err := run(ctx, runner, p); err != nil {
		return nil, fmt.Errorf("pipeline: mine %s on %s: %w", cfg.Queries, runner, err)
	}
	return plan, nil
}
