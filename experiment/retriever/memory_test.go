package retriever

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/internal/membudget"
)

// TestMemoryRefusedBeforeRunDir: a model whose estimated training memory exceeds what the
// process may allocate (here a cgroup memory.max of 1 MiB) is refused in one line naming the
// size keys, before a run directory exists.
func TestMemoryRefusedBeforeRunDir(t *testing.T) {
	dir := testkit.NewSlice(t)
	rec := testkit.SmallRecipe(t, dir, "")
	limit := filepath.Join(t.TempDir(), "memory.max")
	os.WriteFile(limit, []byte("1048576\n"), 0o644)
	old := membudget.CgroupMax
	membudget.CgroupMax = limit
	defer func() { membudget.CgroupMax = old }()
	_, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "model.hidden = ") ||
		!strings.Contains(err.Error(), "above the 0.00 GiB this process may allocate (cgroup memory.max "+limit+")") {
		t.Fatalf("err = %v", err)
	}
	if entries, _ := os.ReadDir(rec.OutputDir); len(entries) > 0 {
		t.Errorf("%s holds %d entries", rec.OutputDir, len(entries))
	}
}
