// Command snapshot compares a finished run directory with its entry in
// docs/results/seed42-snapshot.json, or records the run as that entry: metrics.json without
// its timing keys (names containing "seconds", "per_second" or "_ms") and the sha256 of every
// runs/*.trec. tools/snapshot/check.sh runs recipes and calls it; a change that must not move
// any number is checked with one command (issue 36).
//
//	go run ./tools/snapshot -name NAME -run RUNDIR [-command CMD] [-update] [-snapshot FILE]
//
// Exit status 0 when every metric and TREC hash is identical (or -update wrote the entry), 1
// when one differs (each difference printed), 2 on an error (unreadable run, missing entry).
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ragtrain/ragtrain/experiment"
)

// entry is one recipe of the snapshot.
type entry struct {
	Command    string             `json:"command"`
	Metrics    map[string]float64 `json:"metrics"`
	TRECSHA256 map[string]string  `json:"trec_sha256"`
}

// snapshot is the file's layout: "about" and the recipes by name.
type snapshot struct {
	About   string           `json:"about"`
	Recipes map[string]entry `json:"recipes"`
}

// load reads the snapshot file.
func load(file string) (snapshot, error) {
	var s snapshot
	b, err := os.ReadFile(file)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

// timing reports whether a metric is a timing key, left out of the snapshot.
func timing(key string) bool {
	return strings.Contains(key, "seconds") || strings.Contains(key, "per_second") || strings.Contains(key, "_ms")
}

// readRun reads a run directory into an entry.
func readRun(dir string) (entry, error) {
	e := entry{Metrics: map[string]float64{}, TRECSHA256: map[string]string{}}
	m, err := experiment.ReadMetrics(dir)
	if err != nil {
		return e, err
	}
	for k, v := range m {
		if !timing(k) {
			e.Metrics[k] = v
		}
	}
	trecs, err := filepath.Glob(filepath.Join(dir, "runs", "*.trec"))
	if err != nil {
		return e, err
	}
	if len(trecs) == 0 {
		return e, fmt.Errorf("%s: no runs/*.trec", dir)
	}
	for _, p := range trecs {
		f, err := os.Open(p)
		if err != nil {
			return e, err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return e, err
		}
		e.TRECSHA256[filepath.Base(p)] = hex.EncodeToString(h.Sum(nil))
	}
	return e, nil
}

// diff lists every difference between the recorded entry want and the run got.
func diff(want, got entry) []string {
	var out []string
	for _, k := range keys(want.Metrics, got.Metrics) {
		w, okw := want.Metrics[k]
		g, okg := got.Metrics[k]
		switch {
		case !okg:
			out = append(out, fmt.Sprintf("metric %s: missing (snapshot %v)", k, w))
		case !okw:
			out = append(out, fmt.Sprintf("metric %s: not in the snapshot (run %v)", k, g))
		case w != g:
			out = append(out, fmt.Sprintf("metric %s: snapshot %v, run %v", k, w, g))
		}
	}
	for _, k := range keys(want.TRECSHA256, got.TRECSHA256) {
		if w, g := want.TRECSHA256[k], got.TRECSHA256[k]; w != g {
			out = append(out, fmt.Sprintf("runs/%s: sha256 snapshot %q, run %q", k, w, g))
		}
	}
	return out
}

// keys is the sorted union of the keys of a and b.
func keys[V any](a, b map[string]V) []string {
	set := map[string]bool{}
	for k := range a {
		set[k] = true
	}
	for k := range b {
		set[k] = true
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func main() {
	name := flag.String("name", "", "the recipe's entry in the snapshot")
	run := flag.String("run", "", "the finished run directory")
	file := flag.String("snapshot", "docs/results/seed42-snapshot.json", "the snapshot file")
	update := flag.Bool("update", false, "record the run as the entry instead of comparing")
	command := flag.String("command", "", "with -update: the command that produced the run")
	list := flag.Bool("list", false, "print the snapshot's recipe names, one a line, and exit")
	flag.Parse()
	if *list {
		s, err := load(*file)
		if err != nil {
			fmt.Fprintln(os.Stderr, "snapshot:", err)
			os.Exit(2)
		}
		for _, k := range keys(s.Recipes, nil) {
			fmt.Println(k)
		}
		return
	}
	if *name == "" || *run == "" {
		fmt.Fprintln(os.Stderr, "snapshot: -name and -run are required")
		os.Exit(2)
	}
	s, err := load(*file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "snapshot:", err)
		os.Exit(2)
	}
	got, err := readRun(*run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "snapshot:", err)
		os.Exit(2)
	}
	if *update {
		if *command == "" {
			fmt.Fprintln(os.Stderr, "snapshot: -update needs -command")
			os.Exit(2)
		}
		got.Command = *command
		s.Recipes[*name] = got
		var out strings.Builder
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false) // metric names such as "EM.>=30" stay as written
		enc.SetIndent("", " ")
		if err := enc.Encode(s); err != nil {
			fmt.Fprintln(os.Stderr, "snapshot:", err)
			os.Exit(2)
		}
		tmp := *file + ".tmp"
		if err := os.WriteFile(tmp, []byte(out.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "snapshot:", err)
			os.Exit(2)
		}
		if err := os.Rename(tmp, *file); err != nil {
			fmt.Fprintln(os.Stderr, "snapshot:", err)
			os.Exit(2)
		}
		fmt.Printf("%s: recorded %d metrics and %d TREC hashes from %s\n", *name, len(got.Metrics), len(got.TRECSHA256), *run)
		return
	}
	want, ok := s.Recipes[*name]
	if !ok {
		fmt.Fprintf(os.Stderr, "snapshot: %s has no entry %q\n", *file, *name)
		os.Exit(2)
	}
	if d := diff(want, got); len(d) > 0 {
		for _, l := range d {
			fmt.Printf("%s: %s\n", *name, l)
		}
		fmt.Printf("%s: DIFFERENT (%d differences)\n", *name, len(d))
		os.Exit(1)
	}
	fmt.Printf("%s: identical (%d metrics, %d TREC files)\n", *name, len(want.Metrics), len(want.TRECSHA256))
}
