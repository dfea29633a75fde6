package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	// Prism, the default runner, embedded; a command registers the others it offers.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/tokenize"
)

func init() {
	register.DoFn2x2[context.Context, shardTask, shardDone, error](&encodeShardFn{})
	register.DoFn3x1[context.Context, int, func(*shardDone) bool, error](&commitFn{})
	register.Iter1[shardDone]()
	beam.RegisterType(reflect.TypeFor[shardTask]())
	beam.RegisterType(reflect.TypeFor[shardDone]())
}

// shardDone is what a worker reports of one shard it wrote (or found complete): its
// index/shard entry and what truncation cut of its passages.
type shardDone struct {
	Index                int
	File                 string
	Count                int64
	Bytes                int64
	SHA256               string
	Cut, Tokens, Dropped int64
}

func (d shardDone) record() doneRecord {
	return doneRecord{
		Entry:      shard.ShardEntry{File: d.File, Count: d.Count, Bytes: d.Bytes, SHA256: d.SHA256},
		Truncation: Truncation{Cut: d.Cut, Tokens: d.Tokens, TokensDropped: d.Dropped},
	}
}

func doneOf(k int, r doneRecord) shardDone {
	e, t := r.Entry, r.Truncation
	return shardDone{Index: k, File: e.File, Count: e.Count, Bytes: e.Bytes, SHA256: e.SHA256, Cut: t.Cut, Tokens: t.Tokens, Dropped: t.TokensDropped}
}

// shardHook, when set (by this package's tests only), runs before shard k is encoded: a test
// makes it panic to kill the pipeline midway.
var shardHook func(k int)

// encodeShardFn encodes one shard per element. Its fields travel to the workers as JSON; the
// model is loaded once per worker instance (Setup) and must hash to Encoding.ModelHash, so a
// model directory changed since the plan stops the job instead of mixing two models.
type encodeShardFn struct {
	Encoding Encoding
	Corpus   string
	Out      string

	enc   *PassageEncoder
	store shardStore
}

func (f *encodeShardFn) Setup() error {
	e := f.Encoding
	enc, err := OpenPassageEncoder(e.Model, e.MaxLength, e.Similarity, e.Dynamic)
	if err != nil {
		return err
	}
	if enc.Hash != e.ModelHash || enc.Dim != e.Dim {
		enc.Close()
		return fmt.Errorf("pipeline: %s now hashes to %s (dim %d); the job was planned with %s (dim %d)", e.Model, enc.Hash, enc.Dim, e.ModelHash, e.Dim)
	}
	f.enc, f.store = enc, openStore(f.Out)
	return nil
}

func (f *encodeShardFn) ProcessElement(ctx context.Context, t shardTask) (shardDone, error) {
	if rec, ok := f.store.Existing(f.Encoding, t.Index); ok {
		encodeReused.Inc(ctx, 1)
		return doneOf(t.Index, rec), nil
	}
	if shardHook != nil {
		shardHook(t.Index)
	}
	ids, passages, err := readShard(f.Corpus, t, f.Encoding.TitleField)
	if err != nil {
		return shardDone{}, err
	}
	var c tokenize.TruncCount
	vecs, err := f.enc.EncodeCounting(passages, &c)
	if err != nil {
		return shardDone{}, fmt.Errorf("shard %d (%s lines from %d): %w", t.Index, f.Corpus, t.Line, err)
	}
	_, cut, tokens, dropped := c.Counts()
	rec, err := f.store.Write(f.Encoding, t.Index, ids, vecs, Truncation{Cut: int64(cut), Tokens: int64(tokens), TokensDropped: int64(dropped)})
	if err != nil {
		return shardDone{}, err
	}
	encodePassages.Inc(ctx, int64(t.Rows))
	return doneOf(t.Index, rec), nil
}

func (f *encodeShardFn) Teardown() error {
	if f.enc != nil {
		return f.enc.Close()
	}
	return nil
}

// commitFn receives every shard's report (one key) and commits the manifest. A shard reported
// twice (a worker that ran twice) must be reported the same.
type commitFn struct {
	Encoding Encoding
	Out      string
}

func (f *commitFn) ProcessElement(ctx context.Context, _ int, reports func(*shardDone) bool) error {
	done := map[int]doneRecord{}
	var d shardDone
	for reports(&d) {
		if prev, dup := done[d.Index]; dup && prev != d.record() {
			return fmt.Errorf("pipeline: commit %s: shard %d reported twice with different contents (%+v, %+v)", f.Out, d.Index, prev, d.record())
		}
		done[d.Index] = d.record()
	}
	_, err := openStore(f.Out).Commit(f.Encoding, done)
	return err
}

var (
	encodePassages = beam.NewCounter("ragtrain", "passages_encoded")
	encodeReused   = beam.NewCounter("ragtrain", "shards_reused")
)

// EncodeCorpus adds the corpus-encoding pipeline of plan to s: the shard tasks, reshuffled so
// that a runner spreads them over its workers; each shard read, encoded and written
// atomically (or found complete from an earlier run); then, once every shard is written, one
// commit that verifies them all and writes the manifest.
func EncodeCorpus(s beam.Scope, plan *EncodePlan) {
	s = s.Scope("EncodeCorpus")
	tasks := beam.Reshuffle(s, beam.CreateList(s, plan.Tasks))
	done := beam.ParDo(s, &encodeShardFn{Encoding: plan.Encoding, Corpus: plan.Config.Corpus, Out: plan.Config.Out}, tasks)
	beam.ParDo0(s, &commitFn{Encoding: plan.Encoding, Out: plan.Config.Out}, beam.GroupByKey(s, beam.AddFixedKey(s, done)))
}

// run is beam.Run on runner ("" is Prism). The Go SDK leaves an empty placeholder file,
// beamloopbackworker-*, in the temporary directory on every loopback run (apache/beam issue
// 27569; the file is never read in loopback mode): run removes the empty ones the run created.
func run(ctx context.Context, runner string, p *beam.Pipeline) (beam.PipelineResult, error) {
	if runner == "" {
		runner = "prism"
	}
	pattern := filepath.Join(os.TempDir(), "beamloopbackworker-*")
	before, _ := filepath.Glob(pattern)
	res, err := beam.Run(ctx, runner, p)
	after, _ := filepath.Glob(pattern)
	for _, f := range after {
		if st, serr := os.Stat(f); serr == nil && st.Size() == 0 && !slices.Contains(before, f) {
			os.Remove(f)
		}
	}
	return res, err
}

// EncodeResult is what Encode did.
type EncodeResult struct {
	Manifest   *shard.Manifest
	Plan       *EncodePlan
	Truncation Truncation // what cutting the passages to MaxLength cut, over the corpus
	// Encoded counts the passages this run encoded, Reused the shards found complete from an
	// earlier run and kept. Both are read from the output directory (the shards whose done
	// records existed before the run), not from the runner's metrics, which a runner may
	// deliver late or not at all (Prism under load did).
	Encoded, Reused int64
}

// Encode plans the job (Plan), runs its pipeline on runner ("" or "prism": the embedded Prism
// runner; "flink", "spark", "dataflow", "universal": the job service the Beam flags name) and
// returns the committed manifest. A failed run commits nothing (the previous manifest, if any,
// still names its version); running it again encodes only the shards that are missing.
func Encode(ctx context.Context, cfg EncodeConfig, runner string) (*EncodeResult, error) {
	plan, err := Plan(cfg)
	if err != nil {
		return nil, err
	}
	var encoded, reused int64
	store := openStore(cfg.Out)
	for _, t := range plan.Tasks {
		if _, ok := store.Existing(plan.Encoding, t.Index); ok {
			reused++
		} else {
			encoded += int64(t.Rows)
		}
	}
	p, s := beam.NewPipelineWithRoot()
	EncodeCorpus(s, plan)
	_, err = run(ctx, runner, p)
	if err != nil {
		return nil, fmt.Errorf("pipeline: encode %s on %s: %w", cfg.Corpus, runner, err)
	}
	man, _, err := ReadEncoding(cfg.Out)
	if err != nil {
		return nil, err
	}
	if man.Version != plan.Encoding.Version() {
		return nil, fmt.Errorf("pipeline: %s: the committed version is %s, this job's %s", cfg.Out, man.Version, plan.Encoding.Version())
	}
	trunc, err := ReadTruncation(cfg.Out)
	if err != nil {
		return nil, err
	}
	return &EncodeResult{Manifest: man, Plan: plan, Truncation: trunc, Encoded: encoded, Reused: reused}, nil
}
