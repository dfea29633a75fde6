// Command train runs a TOML recipe: it trains a retriever, reranker or reader as the recipe says,
// evaluates it, and prints the run directory as the last line of its output.
//
//	train -recipe recipes/retriever-cranfield.toml
//	train -recipe recipes/retriever-cranfield.toml -resume runs/retriever-cranfield-20261129-170000
//	train export -run runs/retriever-cranfield-20261129-170000 -out exports/cranfield
//	train generate -model pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf -prompts prompts.jsonl -chat
//	train verify -run runs/scifact-verify-20261205-040000 -claims claims.jsonl -out predictions.jsonl
//	train -h                 (also --help, help, train export -h, train generate -h: usage and flags, exit status 0)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"

	// Every recipe kind, registered with experiment.Run and configs.Load.
	_ "github.com/ragtrain/ragtrain/experiment/kinds"
)

// usage is the help of `train -h`, `train --help` and `train help`; the flags of every
// subcommand follow it.
const usage = `train runs a TOML recipe (a retriever, reranker or reader, as its kind says), evaluates it,
and prints the run directory as the last line of its output.

Usage:
  train -recipe R [-resume DIR]    train and evaluate recipe R (keys: configs/doc.go); with -resume, continue the run in DIR from its latest checkpoint
  train export -run RUN -out DIR   write the latest checkpoint of run RUN into DIR in its model kind's serving layout
  train generate -model M -prompts FILE [-max-new-tokens N] [-chat] [-temperature T -top-p P -seed S]
                                   continue each {"prompt": ...} line of FILE with the LLaMA GGUF model M (greedy unless
                                   -temperature > 0); one JSON line {"prompt", "text", "tokens"} per prompt on stdout
  train verify -run RUN -claims FILE -out FILE [-reader selfrag|plain]
                                   verify each {"id", "claim"} line of FILE with the reader a scifact_verify run trained
                                   (BM25 over the run's corpus); SciFact-format predictions in -out
  train search -index DIR -queries FILE -out RUN.trec [-k N]
                                   rank every query of a BEIR queries.jsonl with a saved index (a SPLADE run's index/splade,
                                   a ColBERT run's plaid, a retriever run's corpus/shards) or, given a run
                                   directory, BM25 over its corpus; write a TREC run
  train help                       print this help (also -h, --help; train export -h, train generate -h for one subcommand's flags)
`

func main() {
	os.Exit(mainArgs(os.Args[1:]))
}

// mainArgs runs the command line args (without the program name) and returns the exit status.
func mainArgs(args []string) int {
	cmd := run
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			printHelp(os.Stdout)
			return 0
		case "export":
			cmd, args = runExport, args[1:]
		case "generate":
			cmd, args = runGenerate, args[1:]
		case "verify":
			cmd, args = runVerify, args[1:]
		case "search":
			cmd, args = runSearch, args[1:]
		}
	}
	if err := cmd(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "train:", err)
		return 1
	}
	return 0
}

// printHelp writes the usage and the flags of every subcommand.
func printHelp(w io.Writer) {
	fmt.Fprint(w, usage)
	for _, fs := range []*flag.FlagSet{runFlags(new(runArgs)), exportFlags(new(exportArgs)), generateFlags(new(generateArgs)), verifyFlags(new(verifyArgs)), searchFlags(new(searchArgs))} {
		fmt.Fprintf(w, "\nFlags of %s:\n", fs.Name())
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// parse parses args into fs. -h prints fs's help to stdout (the exit status is then 0: the
// error is flag.ErrHelp); any other error prints it to stderr.
func parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
	} else {
		fs.SetOutput(os.Stderr)
	}
	if err != nil {
		fs.Usage()
	}
	return err
}

// parseSub parses a subcommand's args into fs (see parse); when the flags miss what the
// subcommand needs (ok, called after parsing, returns false) or arguments are left over, it
// prints fs's usage and returns the error missing.
func parseSub(fs *flag.FlagSet, args []string, ok func() bool, missing string) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	if !ok() || fs.NArg() > 0 {
		fs.Usage()
		return errors.New(missing)
	}
	return nil
}

// subUsage makes fs's usage message: synopsis (the usage lines and what the subcommand
// prints), then fs's flags.
func subUsage(fs *flag.FlagSet, synopsis string) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nFlags of %s:\n", synopsis, fs.Name())
		fs.PrintDefaults()
	}
}

// runArgs are the flags of `train`.
type runArgs struct{ recipe, resume string }

func runFlags(a *runArgs) *flag.FlagSet {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.StringVar(&a.recipe, "recipe", "", "TOML recipe to run (see configs/doc.go for every key)")
	fs.StringVar(&a.resume, "resume", "", "run directory to continue from its latest checkpoint (its recipe.resolved.toml is used when -recipe is not given)")
	fs.Usage = func() { printHelp(fs.Output()) }
	return fs
}

// optionsHook, when set, adjusts the options of the run: only this command's tests set it, in
// a child process (see TestMain), never the command itself.
var optionsHook func(*experiment.Options)

func run(args []string) error {
	var a runArgs
	fs := runFlags(&a)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q (subcommands: export, generate, verify, search, help)", fs.Arg(0))
	}
	recipe, resume := &a.recipe, &a.resume
	rec, err := loadRecipe(*recipe, *resume)
	if err != nil {
		if *recipe == "" && *resume == "" {
			fs.Usage()
		}
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	recipePath := *recipe
	if recipePath == "" {
		recipePath = filepath.Join(*resume, experiment.ResolvedRecipeFile)
	}
	opts := experiment.Options{ResumeDir: *resume, RecipePath: recipePath, Out: os.Stdout, Progress: os.Stderr}
	if optionsHook != nil {
		optionsHook(&opts)
	}
	dir, err := experiment.Run(ctx, rec, opts)
	if err != nil {
		if dir != "" {
			fmt.Fprintln(os.Stderr, "train: run directory:", dir)
		}
		return err
	}
	fmt.Println(dir)
	return nil
}

// loadRecipe loads the recipe to run. A resumed run always runs its own recipe.resolved.toml;
// a -recipe given with -resume must resolve to the same recipe, or the run directory would no
// longer describe what was trained.
func loadRecipe(recipe, resume string) (*configs.Recipe, error) {
	if resume == "" {
		if recipe == "" {
			return nil, errors.New("-recipe is required")
		}
		return configs.Load(recipe)
	}
	resolved := filepath.Join(resume, experiment.ResolvedRecipeFile)
	if _, err := os.Stat(resolved); err != nil {
		return nil, fmt.Errorf("-resume %s: not a run directory (no %s)", resume, experiment.ResolvedRecipeFile)
	}
	rec, err := configs.Load(resolved)
	if err != nil || recipe == "" {
		return rec, err
	}
	given, err := configs.Load(recipe)
	if err != nil {
		return nil, err
	}
	given.OutputDir = rec.OutputDir // where runs go does not change what was trained
	diff, err := rec.Diff(given)
	if err != nil {
		return nil, err
	}
	if diff != "" {
		return nil, fmt.Errorf("-resume %s: %s differs from the run's %s (%s); resume without -recipe to continue the run as it was started", resume, recipe, experiment.ResolvedRecipeFile, diff)
	}
	return rec, nil
}
