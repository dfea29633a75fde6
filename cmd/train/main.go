// Command train runs a TOML recipe: it trains a retriever, reranker or reader as the recipe says,
// evaluates it, and prints the run directory as the last line of its output.
//
//	train -recipe recipes/retriever-cranfield.toml
//	train -recipe recipes/retriever-cranfield.toml -resume runs/retriever-cranfield-20261129-170000
//	train export -run runs/retriever-cranfield-20261129-170000 -out exports/cranfield
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
	cmd := run
	if len(os.Args) > 1 && os.Args[1] == "export" {
		cmd = runExport
		os.Args = os.Args[1:]
	}
	if err := cmd(os.Args[1:]); err != nil {
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
	dir, err := experiment.Run(ctx, rec, experiment.Options{ResumeDir: *resume, RecipePath: recipePath, Out: os.Stdout, Progress: os.Stderr})
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
