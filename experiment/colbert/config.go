package colbert

import (
	"github.com/ragtrain/ragtrain/configs"
)

// section is the [colbert] table, owned by this kind.
var section = configs.NewSection("colbert", defaultConfig, check)

// Of returns the [colbert] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "colbert") }

// Config is the [colbert] section: the late-interaction model's shape and text handling
// (PyLate's defaults) and the PLAID-style index's build and search settings.
type Config struct {
	// Dim is the width of a token vector after the projection (no bias); 1..4096. Default 128.
	Dim int `toml:"dim"`
	// QueryLength is the tokens of every query, [CLS] and [Q] included, padded with [MASK]
	// (query augmentation); 4..the encoder's positions. Default 32.
	QueryLength int `toml:"query_length"`
	// DocumentLength is the most tokens of a passage, [CLS] and [D] included. Default 180.
	DocumentLength int `toml:"document_length"`
	// AttendToExpansionTokens lets the encoder attend to a query's [MASK] padding. Default false.
	AttendToExpansionTokens bool `toml:"attend_to_expansion_tokens"`
	// EncodeBatch is the texts per forward pass when encoding the corpus and the queries. Default
	// 32; at most configs.MaxBatch (65536).
	EncodeBatch int `toml:"encode_batch"`
	// Plaid builds the PLAID-style index over the trained model's passage tokens and searches
	// with it beside exact MaxSim (system colbert_plaid). Default true.
	Plaid bool `toml:"plaid"`
	// NBits is the bits per dimension of a residual: 1 or 2. Default 2.
	NBits int `toml:"nbits"`
	// KMeansIters is the k-means iterations over the passage tokens (ColBERT's kmeans_niters);
	// 1..100. Default 4.
	KMeansIters int `toml:"kmeans_iters"`
	// NCells is the centroids probed per query token; >= 1. Default 4 (PLAID's setting for k > 100).
	NCells int `toml:"ncells"`
	// CentroidScoreThreshold prunes a passage token whose centroid scores below it with every
	// query token, in the first candidate scoring; default 0.4.
	CentroidScoreThreshold float64 `toml:"centroid_score_threshold"`
	// NDocs is the candidates kept after centroid interaction; a quarter of them are
	// decompressed and scored exactly. >= 4. Default 4096.
	NDocs int `toml:"ndocs"`
	// SelectNCells, SelectNDocs and SelectCentroidScoreThreshold, when any is set, make a grid
	// of PLAID-style search settings (an empty list: the single value above) searched on the
	// data.dev_split queries before any split is evaluated; the cheapest point (fewest ncells,
	// then fewest ndocs, then the highest threshold) whose dev nDCG@10 is within
	// SelectTolerance of exact MaxSim's is used for every split and by `train search`, else the
	// point of best dev nDCG@10 (select.go). At most 16 values each.
	SelectNCells                 []int     `toml:"select_ncells"`
	SelectNDocs                  []int     `toml:"select_ndocs"`
	SelectCentroidScoreThreshold []float64 `toml:"select_centroid_score_threshold"`
	// SelectTolerance is the dev nDCG@10 below exact MaxSim's a chosen point may lose; in
	// [0, 1]. Default 0.005 (issue 40's bound on the test split).
	SelectTolerance float64 `toml:"select_tolerance"`
}

// selecting reports whether the PLAID-style search settings are chosen on dev.
func (c *Config) selecting() bool {
	return len(c.SelectNCells)+len(c.SelectNDocs)+len(c.SelectCentroidScoreThreshold) > 0
}

func defaultConfig() Config {
	return Config{Dim: 128, QueryLength: 32, DocumentLength: 180, EncodeBatch: 32, Plaid: true, NBits: 2, KMeansIters: 4,
		NCells: 4, CentroidScoreThreshold: 0.4, NDocs: 4096, SelectTolerance: 0.005}
}

func check(v *configs.Checker, r *configs.Recipe, c *Config) {
	if c.Dim < 1 || c.Dim > 4096 {
		v.Fail("colbert.dim", "must be in 1..4096, got %d", c.Dim)
	}
	configs.AtLeast(v, "colbert.query_length", c.QueryLength, 4)
	configs.AtLeast(v, "colbert.document_length", c.DocumentLength, 4)
	configs.AtLeast(v, "colbert.encode_batch", c.EncodeBatch, 1)
	if c.EncodeBatch > configs.MaxBatch {
		v.Fail("colbert.encode_batch", "must be <= %d (configs.MaxBatch, as train.batch_size), got %d", configs.MaxBatch, c.EncodeBatch)
	}
	if c.NBits != 1 && c.NBits != 2 {
		v.Fail("colbert.nbits", "must be 1 or 2, got %d", c.NBits)
	}
	if c.KMeansIters < 1 || c.KMeansIters > 100 {
		v.Fail("colbert.kmeans_iters", "must be in 1..100, got %d", c.KMeansIters)
	}
	configs.AtLeast(v, "colbert.ncells", c.NCells, 1)
	v.Finite("colbert.centroid_score_threshold", c.CentroidScoreThreshold)
	configs.AtLeast(v, "colbert.ndocs", c.NDocs, 4)
	for name, n := range map[string]int{"colbert.select_ncells": len(c.SelectNCells), "colbert.select_ndocs": len(c.SelectNDocs),
		"colbert.select_centroid_score_threshold": len(c.SelectCentroidScoreThreshold)} {
		if n > maxSelectValues {
			v.Fail(name, "at most %d values, got %d", maxSelectValues, n)
		}
	}
	for _, n := range c.SelectNCells {
		configs.AtLeast(v, "colbert.select_ncells", n, 1)
	}
	for _, n := range c.SelectNDocs {
		configs.AtLeast(v, "colbert.select_ndocs", n, 4)
	}
	for _, x := range c.SelectCentroidScoreThreshold {
		v.Finite("colbert.select_centroid_score_threshold", x)
	}
	if !(c.SelectTolerance >= 0 && c.SelectTolerance <= 1) {
		v.Fail("colbert.select_tolerance", "must be in [0, 1], got %g", c.SelectTolerance)
	}
	if c.selecting() && !c.Plaid {
		v.Fail("colbert.select_ncells", "choosing the PLAID-style search settings on dev needs colbert.plaid = true")
	}
	if c.selecting() && r.Data.DevSplit == "" {
		v.Fail("colbert.select_ncells", "choosing the PLAID-style search settings on dev needs data.dev_split")
	}
}

// maxSelectValues bounds each select_* list of the dev grid.
const maxSelectValues = 16
