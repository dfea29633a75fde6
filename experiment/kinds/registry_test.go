package kinds

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
)

func TestKindsRegister(t *testing.T) {
	want := []string{"atlas", "colbert", "fusion", "rag", "reader_lm", "realm", "replug", "replug_lm", "reranker", "retriever", "scifact_verify", "selfrag", "splade"}
	if got := experiment.Kinds(); !slices.Equal(got, want) {
		t.Errorf("Kinds() = %v, want %v", got, want)
	}
	rec := &configs.Recipe{Kind: "colpali", OutputDir: t.TempDir()}
	if _, err := experiment.Run(context.Background(), rec, experiment.Options{}); err == nil || !strings.Contains(err.Error(), `"colpali" is not implemented`) {
		t.Errorf("unknown kind: %v", err)
	}
}
