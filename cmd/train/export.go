package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/ragtrain/ragtrain/export"
)

// runExport is `train export`: it writes a run's latest checkpoint (or a checkpoint directory)
// in the serving layout of its model kind (package export) and prints the output directory.
func runExport(args []string) error {
	fs := flag.NewFlagSet("train export", flag.ContinueOnError)
	run := fs.String("run", "", "run directory (its latest checkpoint is exported) or checkpoint directory")
	out := fs.String("out", "", "new directory to write the export into (must not exist or be empty)")
	embeddings := fs.Bool("embeddings", true, "bi-encoders: also write the corpus embeddings (embeddings/: embeddings.npy, ids.txt, manifest.json)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *run == "" || *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("export: -run and -out are required, and nothing else")
	}
	if err := export.Export(*run, *out, export.Options{Embeddings: *embeddings, Log: os.Stderr}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	fmt.Println(*out)
	return nil
}
