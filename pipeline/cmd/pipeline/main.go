// Command pipeline runs the toolkit's batch jobs as Apache Beam pipelines (package pipeline):
// on the embedded Prism runner by default, and unchanged on a portable runner (Flink, Spark,
// Dataflow) named by Beam's flags. It is a command of its own so that `train` does not link
// the Beam SDK.
//
//	pipeline encode -model RUN -corpus datasets/scifact/corpus.jsonl -out emb/scifact
//	pipeline compare -model RUN -corpus datasets/scifact/corpus.jsonl -out emb/scifact
//	pipeline encode ... --runner=flink --endpoint=localhost:8099 --environment_type=DOCKER
//
// See docs/pipeline.md. The same binary is the pipeline's worker: a runner that starts it with
// --worker (Beam's container boot does) finds its DoFns registered in it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"

	// The portable runners a job can be sent to besides the embedded Prism (package pipeline
	// registers it); -runner names one.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/spark"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"

	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/pipeline"
)

const usage = `pipeline runs the toolkit's batch jobs as Apache Beam pipelines, on the embedded Prism runner
unless --runner names another (flink, spark, dataflow, universal: see docs/pipeline.md).

Usage:
  pipeline encode -model DIR -corpus corpus.jsonl -out DIR [flags]
        encode the corpus with the model's passage tower into shards and commit their manifest
  pipeline compare -out DIR [-model DIR] [-corpus corpus.jsonl]
        encode the corpus in this process, as the retriever's evaluation does, with the settings
        the committed shards in -out record (encoding-<version>.json; -model and -corpus replace
        its paths), and compare them bit for bit (exit status 1 when any bit differs)
  pipeline mine -model DIR -queries queries.jsonl -embeddings DIR -out run.trec [flags]
        the top -k passages of every query in committed embeddings (exact, shard by shard), as a
        TREC run: the candidates dense hard negatives are drawn from
  pipeline help

Beam's flags (any of them, e.g. --runner, --endpoint, --environment_type, --environment_config,
--worker_binary, --job_name, --parallelism) may follow the subcommand's.
`

func main() { os.Exit(mainArgs(os.Args[1:], os.Stdout, os.Stderr)) }

// mainArgs runs the command line args (without the program name) and returns the exit status.
func mainArgs(args []string, stdout, stderr io.Writer) int {
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	var cfg pipeline.EncodeConfig
	var mcfg pipeline.MineConfig
	fs := flag.NewFlagSet("pipeline "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	ownFlags := func(fs *flag.FlagSet) {
		switch sub {
		case "encode":
			encodeFlags(fs, &cfg)
		case "compare":
			fs.StringVar(&cfg.Out, "out", "", "a committed output of pipeline encode")
			fs.StringVar(&cfg.Model, "model", "", "model directory; default: the one the output records")
			fs.StringVar(&cfg.Corpus, "corpus", "", "corpus.jsonl; default: the one the output records (its SHA-256 must match)")
		case "mine":
			mineFlags(fs, &mcfg)
		}
	}
	ownFlags(fs)
	// Beam's flags are the flag package's globals: the same values, set through this set.
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if fs.Lookup(f.Name) == nil {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		if sub == "encode" || sub == "compare" || sub == "mine" {
			fmt.Fprintf(fs.Output(), "\nFlags of %s:\n", fs.Name())
			own := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
			own.SetOutput(fs.Output())
			ownFlags(own)
			own.PrintDefaults()
		}
	}
	if sub == "help" {
		fs.SetOutput(stdout)
		fs.Usage()
		return 0
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if !beam.Initialized() {
		beam.Init() // a worker started by a runner (--worker) runs here and exits
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch sub {
	case "encode":
		err = encode(ctx, cfg, stdout)
	case "compare":
		err = compare(cfg, stdout)
	case "mine":
		err = mine(ctx, mcfg, stdout)
	default:
		fs.Usage()
		if sub == "" {
			fmt.Fprintln(stderr, "pipeline: a subcommand is required (encode, compare, mine, help)")
		} else {
			fmt.Fprintf(stderr, "pipeline: unknown subcommand %q (encode, compare, mine, help)\n", sub)
		}
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "pipeline %s: %v\n", sub, err)
		return 1
	}
	return 0
}

func encodeFlags(fs *flag.FlagSet, c *pipeline.EncodeConfig) {
	fs.StringVar(&c.Model, "model", "", "model directory: a run or checkpoint directory, an export, or a Hugging Face / sentence-transformers model (model.init_from's layouts)")
	fs.StringVar(&c.Corpus, "corpus", "", "BEIR corpus.jsonl to encode")
	fs.StringVar(&c.Out, "out", "", "output directory of the shards and their manifest.json (seen by every worker)")
	fs.IntVar(&c.ShardRows, "shard-rows", pipeline.DefaultShardRows, "passages per shard: the unit a worker encodes and, after a failure, encodes again")
	fs.IntVar(&c.MaxLength, "max-length", 0, "tokens per passage, [CLS] and [SEP] included (tokenizer.max_length); 0: the model directory's")
	fs.StringVar(&c.Similarity, "similarity", "", `"cosine" (rows L2-normalised) or "dot"; "": the model directory's`)
	fs.BoolVar(&c.Dynamic, "dynamic", false, "dynamic padding (tokenizer.dynamic_padding): each batch padded to its longest passage")
	fs.BoolVar(&c.TitleField, "title", true, `passage = title + " " + text (data.title_field)`)
	fs.StringVar(&c.IndexVersion, "version", "enc", "index version label (e.g. train-300); the shards' version is LABEL-<hash of the encoding's settings>")
	fs.StringVar(&c.DType, "dtype", "float32", "how shards store the vectors: float32, float16, int8-per-vector or int8-per-dim (index/shard; only float32 is bit-identical)")
}

func mineFlags(fs *flag.FlagSet, c *pipeline.MineConfig) {
	fs.StringVar(&c.Model, "model", "", "model directory whose passage tower encoded -embeddings (its query tower encodes the queries)")
	fs.StringVar(&c.Queries, "queries", "", "BEIR queries.jsonl")
	fs.StringVar(&c.Embeddings, "embeddings", "", "a committed output of pipeline encode")
	fs.StringVar(&c.Out, "out", "", "TREC run file to write (qid Q0 docid rank score tag)")
	fs.IntVar(&c.K, "k", 100, "passages per query")
	fs.IntVar(&c.MaxLength, "max-length", 0, "tokens per query (tokenizer.query_max_length); 0: the encoding's max length")
	fs.BoolVar(&c.Dynamic, "dynamic", false, "dynamic padding of the query batches")
	fs.IntVar(&c.Block, "block", pipeline.DefaultQueryBlock, "queries per task")
	fs.StringVar(&c.Tag, "tag", "dense", "the run's tag")
}

func mine(ctx context.Context, cfg pipeline.MineConfig, out io.Writer) error {
	start := time.Now()
	plan, err := pipeline.Mine(ctx, cfg, *runners.Runner)
	if err != nil {
		return err
	}
	n := 0
	for _, b := range plan.Blocks {
		n += len(b.IDs)
	}
	fmt.Fprintf(out, "mine: top %d of %d passages (version %s) for %d queries in %d blocks, %.1f s\n", cfg.K, plan.Encoding.Count, plan.Version, n, len(plan.Blocks), time.Since(start).Seconds())
	fmt.Fprintln(out, cfg.Out)
	return nil
}

func encode(ctx context.Context, cfg pipeline.EncodeConfig, out io.Writer) error {
	start := time.Now()
	res, err := pipeline.Encode(ctx, cfg, *runners.Runner)
	if err != nil {
		return err
	}
	m := res.Manifest
	fmt.Fprintf(out, "encode: %d passages (%d empty) x %d %s in %d shards of %d: %d passages encoded, %d shards reused; model hash %s, version %s, %.1f s\n",
		m.Count, res.Plan.Empty, m.Dim, m.DType, len(m.Shards), res.Plan.Encoding.ShardRows, res.Encoded, res.Reused, m.ModelHash, m.Version, time.Since(start).Seconds())
	fmt.Fprintf(out, "encode: truncation to %d tokens: %s\n", res.Plan.Encoding.MaxLength, res.Truncation.String(int(m.Count)))
	fmt.Fprintln(out, cfg.Out)
	return nil
}

func compare(flags pipeline.EncodeConfig, out io.Writer) error {
	if flags.Out == "" {
		return errors.New("-out is required")
	}
	ids, got, man, err := pipeline.ReadEmbeddings(flags.Out)
	if err != nil {
		return err
	}
	cfg := pipeline.EncodeConfig{Model: man.Model, Corpus: man.Corpus, Out: flags.Out, MaxLength: man.MaxLength,
		Similarity: man.Similarity, Dynamic: man.Dynamic, TitleField: man.TitleField}
	if flags.Model != "" {
		cfg.Model = flags.Model
	}
	if flags.Corpus != "" {
		cfg.Corpus = flags.Corpus
	}
	if sum, err := bounded.SHA256(cfg.Corpus); err != nil {
		return err
	} else if sum != man.CorpusSHA256 {
		return fmt.Errorf("%s has sha256 %s; %s was encoded from %s", cfg.Corpus, sum, flags.Out, man.CorpusSHA256)
	}
	if man.DType != "float32" {
		return fmt.Errorf("%s holds %s vectors; compare checks float32 shards bit for bit", cfg.Out, man.DType)
	}
	start := time.Now()
	wantIDs, want, err := pipeline.EncodeInProcess(cfg)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	if len(ids) != len(wantIDs) || len(got) != len(want) {
		return fmt.Errorf("%s holds %d rows, the corpus encoded in process %d", cfg.Out, len(ids), len(wantIDs))
	}
	rows, first, maxDiff := 0, -1, 0.0
	for r := range ids {
		if ids[r] != wantIDs[r] {
			return fmt.Errorf("%s: row %d is %q, the corpus's %q", cfg.Out, r, ids[r], wantIDs[r])
		}
		differs := false
		for j := r * man.Dim; j < (r+1)*man.Dim; j++ {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				differs = true
				maxDiff = max(maxDiff, math.Abs(float64(got[j])-float64(want[j])))
			}
		}
		if differs {
			rows++
			if first < 0 {
				first = r
			}
		}
	}
	if rows > 0 {
		return fmt.Errorf("%d of %d rows differ from the in-process encoding (first: row %d, %q; largest difference %.3g)", rows, len(ids), first, ids[first], maxDiff)
	}
	fmt.Fprintf(out, "compare: %d rows x %d of %s (model hash %s, version %s) are bit-identical to the in-process encoding of %s with %s (%.1f s in process)\n", len(ids), man.Dim, cfg.Out, man.ModelHash, man.Version(), cfg.Corpus, cfg.Model, secs)
	return nil
}
