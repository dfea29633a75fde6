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
	if got, want := experiment.Kinds(), shippedKinds(t); !slices.Equal(got, want) {
		t.Errorf("Kinds() = %v, want %v", got, want)
	}
	rec := &configs.Recipe{Kind: "colpali", OutputDir: t.TempDir()}
	if _, err := experiment.Run(context.Background(), rec, experiment.Options{}); err == nil || !strings.Contains(err.Error(), `"colpali" is not implemented`) {
		t.Errorf("unknown kind: %v", err)
	}
}
