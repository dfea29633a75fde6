// Command featuretable prints one table of finished retriever runs against the first
// (the plain InfoNCE fine-tune): test nDCG@10 and Recall@100 of the fine-tuned model, the
// difference in nDCG@10, dev nDCG@10 (the split that chose the checkpoint: a test gain that dev
// does not show is not one to trust), training wall time and the process's peak memory.
//
//	go run ./tools/featuretable runs/scifact-minilm-... runs/scifact-minilm-dense-refresh-... ...
//
// Each argument is a run directory (metrics.json, recipe.resolved.toml). Peak memory is read
// from RUN/time.txt, the output of `/usr/bin/time -v` of the run's command, when it is there
// (the run itself does not measure it); "-" otherwise. The commit a run was made at is read from
// RUN/commit.txt (written by study.sh) when it is there. Issue 16's table:
// docs/results/scifact-minilm-features.md.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
)

type row struct {
	name, loss, negatives, batch string
	ndcg, recall, seconds        float64
	dev                          float64 // dev nDCG@10; NaN when the run did not evaluate dev
	peakMiB                      float64 // < 0 when unknown
	extra                        []string
}

func main() {
	system := flag.String("system", "finetuned", "system of metrics.json to tabulate")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: featuretable [-system S] RUN...  (the first run is the baseline)")
		flag.PrintDefaults()
	}
	flag.Parse()
	cli.Need(flag.NArg() > 0)
	var rows []row
	for _, d := range flag.Args() {
		r, err := load(d, *system)
		cli.Check("featuretable", err)
		rows = append(rows, r)
	}
	fmt.Println("| run | loss | negatives | batch (mini), lr | test nDCG@10 | vs first | test Recall@100 | dev nDCG@10 | training s | peak RSS GiB | notes |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		peak := "-"
		if r.peakMiB >= 0 {
			peak = fmt.Sprintf("%.1f", r.peakMiB/1024)
		}
		dev := "-"
		if !math.IsNaN(r.dev) {
			dev = fmt.Sprintf("%.4f", r.dev)
		}
		fmt.Printf("| %s | %s | %s | %s | %.4f | %+.4f | %.4f | %s | %.0f | %s | %s |\n",
			r.name, r.loss, r.negatives, r.batch, r.ndcg, r.ndcg-rows[0].ndcg, r.recall, dev, r.seconds, peak, strings.Join(r.extra, "; "))
	}
}

func load(dir, system string) (row, error) {
	var r row
	m, err := experiment.ReadMetrics(dir)
	if err != nil {
		return r, err
	}
	need := func(k string) (float64, error) {
		v, ok := m[k]
		if !ok {
			return 0, fmt.Errorf("%s: no %q (is the run finished, and is %q one of its systems?)", filepath.Join(dir, "metrics.json"), k, system)
		}
		return v, nil
	}
	if r.ndcg, err = need(system + "/nDCG@10"); err != nil {
		return r, err
	}
	if r.recall, err = need(system + "/Recall@100"); err != nil {
		return r, err
	}
	if r.seconds, err = need("train/seconds"); err != nil {
		return r, err
	}
	r.dev = math.NaN()
	if v, ok := m[system+".dev/nDCG@10"]; ok {
		r.dev = v
	} else if v, ok := m["select/dev/nDCG@10"]; ok { // the chosen checkpoint's, when dev is not an eval split
		r.dev = v
	}
	// The recipe's own type, not a copy of some of its keys: a key missing from the file is zero.
	var rec configs.Recipe
	p := filepath.Join(dir, "recipe.resolved.toml")
	if _, err := toml.DecodeFile(p, &rec); err != nil {
		return r, fmt.Errorf("%s: %w", p, err)
	}
	r.name, r.loss = rec.Name, rec.Loss.Name
	if w := rec.Loss.InfoNCEWeight; w > 0 {
		r.loss += fmt.Sprintf(" + %g infonce", w)
	}
	if w := rec.Loss.TeacherBM25Weight; w > 0 {
		r.loss += fmt.Sprintf(" (teacher + %g bm25)", w)
	}
	r.negatives = rec.Sampler.NegativeSource
	if rec.Sampler.RefreshEvery > 0 {
		r.negatives += fmt.Sprintf(" every %d", rec.Sampler.RefreshEvery)
	}
	if rec.Sampler.NegativeMargin > 0 {
		r.negatives += fmt.Sprintf(", margin %g", rec.Sampler.NegativeMargin)
	}
	if rec.Sampler.NegativeRelative > 0 {
		r.negatives += fmt.Sprintf(", relative %g", rec.Sampler.NegativeRelative)
	}
	if n := rec.Sampler.HardNegatives; n > 1 {
		r.negatives += fmt.Sprintf(", %d per query", n)
	}
	r.batch = fmt.Sprintf("%d x %d steps", rec.Train.BatchSize, rec.Train.Steps)
	if rec.Train.MiniBatchSize > 0 {
		r.batch = fmt.Sprintf("%d (%d) x %d steps", rec.Train.BatchSize, rec.Train.MiniBatchSize, rec.Train.Steps)
	}
	if rec.Train.LR > 0 { // 8e-5, not Go's 8e-05
		r.batch += ", lr " + strings.Replace(strconv.FormatFloat(rec.Train.LR, 'e', -1, 64), "e-0", "e-", 1)
	}
	for _, k := range []string{"mining/dropped_margin", "mining/dropped_relative", "mining/refreshes", "select/step"} {
		if v, ok := m[k]; ok {
			r.extra = append(r.extra, fmt.Sprintf("%s %g", strings.TrimPrefix(k, "mining/"), v))
		}
	}
	for _, d := range rec.Loss.Dims[min(1, len(rec.Loss.Dims)):] {
		if v, ok := m[fmt.Sprintf("%s@%d/nDCG@10", system, d)]; ok {
			r.extra = append(r.extra, fmt.Sprintf("@%d %.4f", d, v))
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "commit.txt")); err == nil {
		c := strings.TrimSpace(string(b))
		r.extra = append(r.extra, "commit "+c[:min(len(c), 7)])
	} else if !errors.Is(err, fs.ErrNotExist) {
		return r, err
	}
	r.peakMiB, err = peakRSS(filepath.Join(dir, "time.txt"))
	return r, err
}

// peakRSS reads "Maximum resident set size (kbytes): N" from GNU time's -v output; -1 when the
// file is absent.
func peakRSS(path string) (float64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Maximum resident set size (kbytes):"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("%s:%d: maximum resident set size: %w", path, line, err)
			}
			return kb / 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no \"Maximum resident set size\" line (want the output of /usr/bin/time -v)", path)
}
