package hybrid

import (
	"testing"

	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// TestDocTable: doc.go documents every [hybrid] key with its default, a fusion's keys with the
// defaults check fills in (rrf_k for rrf, grid for convex).
func TestDocTable(t *testing.T) {
	d := defaultConfig()
	testkit.DocTable(t, "hybrid.", &struct {
		Systems []string `toml:"systems"`
		Fuse    struct {
			Name Fuse `toml:"NAME"`
		} `toml:"fuse"`
		Depth        int      `toml:"depth"`
		MaxHits      int      `toml:"max_hits"`
		Metrics      []string `toml:"metrics"`
		SelectMetric string   `toml:"select_metric"`
		Table        []string `toml:"table"`
	}{Systems: d.Systems, Fuse: struct {
		Name Fuse `toml:"NAME"`
	}{Fuse{Systems: []string{}, RRFK: DefaultRRFK, Grid: DefaultGrid()}}, Depth: d.Depth, MaxHits: d.MaxHits,
		Metrics: d.Metrics, SelectMetric: d.SelectMetric, Table: d.Table})
}
