package experiment

import (
	"context"
	"fmt"
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

// Register makes a recipe kind available to Run by name (as database/sql.Register does
// drivers and image.RegisterFormat image formats): each kind registers itself from its own
// file, so adding a kind adds a file and one Register call, and Run names no kind. It panics
// when the kind is registered twice or run is nil.
func Register(kind string, run RunFunc) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if run == nil {
		panic("experiment.Register: nil RunFunc for kind " + kind)
	}
	if _, dup := kinds[kind]; dup {
		panic("experiment.Register: kind " + kind + " registered twice")
	}
	kinds[kind] = run
}

// Kinds returns the registered recipe kinds, sorted.
func Kinds() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
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
