package garden

import (
	"fmt"
	"math"
)

// Config sizes a garden world. Every field is a key of a recipe's [world] table (the toml tag);
// DefaultConfig gives the values of docs/garden-world.md.
type Config struct {
	// Seed drives every random choice: the same Config gives byte-identical output.
	Seed uint64 `toml:"seed" json:"seed"`

	Gardeners  int `toml:"gardeners" json:"gardeners"`     // number of gardeners, >= 2
	FirstNames int `toml:"first_names" json:"first_names"` // size of the shared first-name pool
	Towns      int `toml:"towns" json:"towns"`             // values of "lives in", >= 3
	Plants     int `toml:"plants" json:"plants"`           // values of "grows", >= 3
	Animals    int `toml:"animals" json:"animals"`         // values of "keeps", >= 3

	// ZipfExponent s: the gardener of popularity rank r is picked (for a biography or a news
	// item) with probability proportional to r^-s. Must be > 0.
	ZipfExponent float64 `toml:"zipf_exponent" json:"zipf_exponent"`
	// TopTownShare is the fraction of gardeners living in the largest town, in [1/Towns, 1).
	// Town sizes follow a power law in the town's rank whose exponent gives this share;
	// 1/Towns makes towns equal.
	TopTownShare float64 `toml:"top_town_share" json:"top_town_share"`

	Biographies int     `toml:"biographies" json:"biographies"` // pretraining biographies
	News        int     `toml:"news" json:"news"`               // pretraining news items
	NewsRepeat  float64 `toml:"news_repeat" json:"news_repeat"` // fraction of news that repeat their sentence, in [0, 1]

	Coverage      float64 `toml:"coverage" json:"coverage"`             // fraction of gardeners with a datastore entry, in [0, 1]
	DatastoreNews int     `toml:"datastore_news" json:"datastore_news"` // news items copied into the datastore, <= News
	WindowWords   int     `toml:"window_words" json:"window_words"`     // words per chunk of the "window" chunking, >= 1

	// Changes over time, written beside the world as world-updated/ and world-poisoned/:
	// the fraction of gardeners that move town (Updated) and of entries that state a wrong
	// value (Poisoned), each in [0, 1]; 0 writes no variant.
	UpdatedFraction  float64 `toml:"updated_fraction" json:"updated_fraction"`
	PoisonedFraction float64 `toml:"poisoned_fraction" json:"poisoned_fraction"`
}

// DefaultConfig returns the sizes of docs/garden-world.md with seed 1.
func DefaultConfig() Config {
	return Config{
		Seed:             1,
		Gardeners:        400,
		FirstNames:       20,
		Towns:            16,
		Plants:           35,
		Animals:          8,
		ZipfExponent:     1.2,
		TopTownShare:     0.20,
		Biographies:      18000,
		News:             24000,
		NewsRepeat:       0.5,
		Coverage:         0.85,
		DatastoreNews:    3000,
		WindowWords:      8,
		UpdatedFraction:  0.1,
		PoisonedFraction: 0.1,
	}
}

// KeyError is an impossible Config value. Key is the recipe key, e.g. "world.coverage", so that
// a recipe loader can point at the line that set it.
type KeyError struct {
	Key string
	Msg string
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

// Validate returns the first impossible value as a *KeyError naming its recipe key, or nil.
func (c Config) Validate() error {
	ints := []struct {
		key    string
		val    int
		lo, hi int
	}{
		{"world.gardeners", c.Gardeners, 2, maxGardeners},
		{"world.first_names", c.FirstNames, 1, len(firstNamePool)},
		{"world.towns", c.Towns, 3, len(townPool)},
		{"world.plants", c.Plants, 3, len(plantPool)},
		{"world.animals", c.Animals, 3, len(animalPool)},
		{"world.biographies", c.Biographies, 0, math.MaxInt32},
		{"world.news", c.News, 0, math.MaxInt32},
		{"world.datastore_news", c.DatastoreNews, 0, c.News},
		{"world.window_words", c.WindowWords, 1, math.MaxInt32},
	}
	for _, f := range ints {
		switch {
		case f.val < f.lo:
			return &KeyError{f.key, fmt.Sprintf("must be >= %d, got %d", f.lo, f.val)}
		case f.val > f.hi && f.key == "world.datastore_news":
			return &KeyError{f.key, fmt.Sprintf("must be <= world.news = %d, got %d", f.hi, f.val)}
		case f.val > f.hi:
			return &KeyError{f.key, fmt.Sprintf("must be <= %d (the names available), got %d", f.hi, f.val)}
		}
	}
	if !finite(c.ZipfExponent) || c.ZipfExponent <= 0 {
		return &KeyError{"world.zipf_exponent", fmt.Sprintf("must be a finite number > 0, got %v", c.ZipfExponent)}
	}
	closed := []struct {
		key string
		val float64
	}{{"world.coverage", c.Coverage}, {"world.news_repeat", c.NewsRepeat},
		{"world.updated_fraction", c.UpdatedFraction}, {"world.poisoned_fraction", c.PoisonedFraction}}
	for _, f := range closed {
		if !finite(f.val) || f.val < 0 || f.val > 1 {
			return &KeyError{f.key, fmt.Sprintf("must be in [0, 1], got %v", f.val)}
		}
	}
	lo := 1 / float64(c.Towns)
	if !finite(c.TopTownShare) || c.TopTownShare < lo-1e-12 || c.TopTownShare >= 1 {
		return &KeyError{"world.top_town_share", fmt.Sprintf("must be in [1/world.towns, 1) = [%.4g, 1), got %v", lo, c.TopTownShare)}
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// checkFraction validates the fraction argument of Updated and Poisoned.
func checkFraction(op string, f float64) error {
	if !finite(f) || f < 0 || f > 1 {
		return fmt.Errorf("%s: fraction must be in [0, 1], got %v", op, f)
	}
	return nil
}
