package experiment

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/ragtrain/ragtrain/configs"
)

// RunFunc runs a recipe of one kind and returns its run directory (also with an error, once
// the directory exists).
type RunFunc func(ctx context.Context, rec *configs.Recipe, o Options) (string, error)

var (
	kindsMu sync.RWMutex
	kinds   = map[string]RunFunc{}
)

// Register makes a recipe kind available to Run and to configs.Load by name, in one call (as
// database/sql.Register does drivers and image.RegisterFormat image formats): run is how it
// runs, spec what it reads from a recipe — the shared sections, the losses it trains, the
// keys of shared sections only some kinds read, and the sections it owns, whose struct,
// defaults and validation live in the kind's package (configs.Section). Each kind registers
// itself from an init in its own package, so adding a kind adds a package and one Register
// call; neither Run nor configs names a kind. It panics when the kind is registered twice,
// run is nil or spec is not one configs.RegisterKind accepts.
func Register(kind string, run RunFunc, spec configs.KindSpec) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if run == nil {
		panic("experiment.Register: nil RunFunc for kind " + kind)
	}
	if _, dup := kinds[kind]; dup {
		panic("experiment.Register: kind " + kind + " registered twice")
	}
	configs.RegisterKind(kind, spec)
	kinds[kind] = run
}

// Kinds returns the registered recipe kinds, sorted.
func Kinds() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	return slices.Sorted(maps.Keys(kinds))
}

func lookupKind(kind string) (RunFunc, error) {
	kindsMu.RLock()
	run, ok := kinds[kind]
	kindsMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("recipe kind %q is not implemented (registered: %s)", kind, strings.Join(Kinds(), ", "))
	}
	return run, nil
}
