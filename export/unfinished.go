package export

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// An export is written into a hidden temporary sibling ".<out>.tmp-<pid>-<random>" and renamed
// to out when complete (writeDir). A killed export leaves that directory behind: the openers
// refuse it (checkUnfinished), and the next export into the same parent removes every one whose
// process is gone (removeStale).

// tmpPrefix is the name prefix of the temporary directories of an export into out.
func tmpPrefix(out string) string { return "." + filepath.Base(out) + ".tmp-" }

// checkUnfinished refuses a directory named as an export's temporary directory.
func checkUnfinished(dir string) error {
	base := filepath.Base(filepath.Clean(dir))
	if strings.HasPrefix(base, ".") && strings.Contains(base, ".tmp-") {
		return fmt.Errorf("%s: the temporary directory of an export that did not finish (killed?): not a model; export again (the next export into %s removes it)", dir, filepath.Dir(filepath.Clean(dir)))
	}
	return nil
}

// removeStale removes the temporary directories of earlier exports into out whose process no
// longer runs (and those of releases that did not put the pid in the name).
func removeStale(out string) error {
	parent, prefix := filepath.Dir(out), tmpPrefix(out)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil // the parent is created later; nothing to clean
	}
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		if pidText, _, hasPid := strings.Cut(rest, "-"); hasPid {
			pid, err := strconv.Atoi(pidText)
			if err == nil && pid > 0 && !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
				continue // its export may still be running
			}
		}
		if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
