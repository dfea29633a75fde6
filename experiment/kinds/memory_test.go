package kinds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/readerlm"
	"github.com/ragtrain/ragtrain/experiment/reranker"
	"github.com/ragtrain/ragtrain/experiment/scifactverify"
	"github.com/ragtrain/ragtrain/internal/membudget"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// withLimit makes membudget read a cgroup memory.max of limit bytes and a MemAvailable above it
// for the rest of the test.
func withLimit(t *testing.T, limit int64) string {
	dir := t.TempDir()
	oldMax, oldInfo := membudget.CgroupMax, membudget.MemInfo
	t.Cleanup(func() { membudget.CgroupMax, membudget.MemInfo = oldMax, oldInfo })
	membudget.CgroupMax, membudget.MemInfo = filepath.Join(dir, "memory.max"), filepath.Join(dir, "meminfo")
	if err := os.WriteFile(membudget.CgroupMax, []byte(fmt.Sprintln(limit)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(membudget.MemInfo, []byte(fmt.Sprintf("MemAvailable: %d kB\n", 2*limit/1024)), 0o644); err != nil {
		t.Fatal(err)
	}
	return membudget.CgroupMax
}

// TestShippedRecipesFitMemory: no shipped recipe is refused under today's machine limit of
// 24 GiB. Each recipe's parts are estimated as its kind estimates them, over the vocabulary
// it will have (model.init_from's tokenizer.json, tokenizer.file's, or tokenizer.vocab_size).
// A recipe whose model.init_from is not on this machine (tools/pretrained/get.sh) is skipped.
func TestShippedRecipesFitMemory(t *testing.T) {
	paths, err := filepath.Glob("../../recipes/*.toml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recipes: %v", err)
	}
	withLimit(t, 24<<30)
	for _, p := range paths {
		rec, err := configs.Load(p)
		if err != nil && strings.Contains(err.Error(), "/pretrained/") && strings.Contains(err.Error(), "no such file") { // not fetched here
			t.Logf("%s: skipped: %v", p, err)
			continue
		} else if err != nil {
			t.Errorf("%v", err)
			continue
		}
		vocab := rec.Tokenizer.VocabSize
		tokFile := rec.Tokenizer.File
		if rec.Model.InitFrom != "" {
			if err := experiment.ResolveInitFrom(rec, io.Discard); errors.Is(err, fs.ErrNotExist) {
				t.Logf("%s: skipped: %v", p, err)
				continue
			} else if err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			if tokFile == "" {
				tokFile = filepath.Join(rec.Model.InitFrom, "tokenizer.json")
			}
		}
		if tokFile != "" {
			tok, err := tokenize.Load(tokFile)
			if err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			vocab = tok.VocabSize()
		}
		if memory, ok := map[string]func(*configs.Recipe) (model.MemoryEstimate, string, error){
			readerlm.Kind: readerlm.Memory, scifactverify.Kind: scifactverify.Memory}[rec.Kind]; ok { // a LLaMA from a GGUF: its own estimate, from the file's header
			e, keys, err := memory(rec)
			if errors.Is(err, fs.ErrNotExist) {
				t.Logf("%s: skipped: %v", p, err)
				continue
			} else if err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			t.Logf("%s (%s): estimated %s", filepath.Base(p), rec.Kind, membudget.GiB(e.Total()))
			var out strings.Builder
			if err := experiment.CheckEstimate(rec, &out, e, keys); err != nil || out.Len() > 0 {
				t.Errorf("%s: refused under 24 GiB: %v %s", p, err, out.String())
			}
			continue
		}
		cfg := biencoder.EncoderConfig(rec, vocab)
		var parts []experiment.MemoryPart
		switch rec.Kind {
		case "retriever":
			parts = []experiment.MemoryPart{experiment.RetrieverMemory(rec, cfg)}
		case "reranker":
			parts = []experiment.MemoryPart{reranker.Memory(rec, cfg)}
		default:
			parts = experiment.GardenMemory(rec, biencoder.EncoderConfig(rec, vocab+2))
		}
		var total int64
		for _, part := range parts {
			total += model.EstimateTraining(part.Cfg, part.Shape).Total()
		}
		t.Logf("%s (%s): estimated %s", filepath.Base(p), rec.Kind, membudget.GiB(total))
		var out strings.Builder
		if err := experiment.CheckMemory(rec, &out, parts...); err != nil || out.Len() > 0 {
			t.Errorf("%s: refused under 24 GiB: %v %s", p, err, out.String())
		}
	}
}

// TestMemoryRefusedEveryKind: a shipped recipe of each kind but the retriever (whose own test is
// experiment/retriever's TestMemoryRefusedBeforeRunDir) run under a cgroup memory.max of 1 MiB is
// refused in one line naming its size keys, and leaves no run directory.
func TestMemoryRefusedEveryKind(t *testing.T) {
	limit := withLimit(t, 1<<20)
	for _, c := range []struct{ recipe, keys string }{
		{"reranker-cranfield.toml", "model.hidden = 128, model.layers = 2, model.ffn = 512, model.heads = 4, model.max_position = 128"},
		{"rag-garden.toml", "reader.hidden = 128, reader.layers = 2, reader.ffn = 512"},
		{"selfrag-garden.toml", "reader.hidden = "},
		{"replug-garden.toml", "reader.hidden = "},
		{"realm-garden.toml", "reader.hidden = "},
		{"atlas-garden.toml", "reader.hidden = "},
	} {
		rec, err := configs.Load(filepath.Join("../../recipes", c.recipe))
		if err != nil {
			t.Fatal(err)
		}
		rec.OutputDir = filepath.Join(t.TempDir(), "runs")
		_, err = experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
		kindKeys := "rerank.list_size"
		if rec.Kind != "reranker" {
			kindKeys = "rag.batch_size x rag.top_k"
		}
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), c.keys) || !strings.Contains(err.Error(), kindKeys) ||
			!strings.Contains(err.Error(), "above the 0.00 GiB this process may allocate (cgroup memory.max "+limit+")") {
			t.Errorf("%s: err = %v", c.recipe, err)
		}
		if entries, _ := os.ReadDir(rec.OutputDir); len(entries) > 0 {
			t.Errorf("%s: %s holds %d entries", c.recipe, rec.OutputDir, len(entries))
		}
	}
}
