// Command train runs a TOML recipe: it trains a retriever, reranker or reader as the recipe says,
// evaluates it, and prints the run directory as the last line of its output.
//
//	train -recipe recipes/retriever-cranfield.toml
//	train -recipe recipes/retriever-cranfield.toml -resume runs/retriever-cranfield-20261129-170000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	recipe := fs.String("recipe", "", "TOML recipe to run (see configs/doc.go for every key)")
	resume := fs.String("resume", "", "run directory to continue from its latest checkpoint (its recipe.resolved.toml is used when -recipe is not given)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *recipe == "" && *resume != "" {
		*recipe = filepath.Join(*resume, experiment.ResolvedRecipeFile)
	}
	if *recipe == "" {
		fs.Usage()
		return errors.New("-recipe is required")
	}
	rec, err := configs.Load(*recipe)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := experiment.Run(ctx, rec, experiment.Options{ResumeDir: *resume, Out: os.Stdout, Progress: os.Stderr})
	if err != nil {
		if dir != "" {
			fmt.Fprintln(os.Stderr, "train: run directory:", dir)
		}
		return err
	}
	fmt.Println(dir)
	return nil
}
