package configs

import (
	"bytes"
	"fmt"

	"github.com/ragtrain/ragtrain/internal/atomicfile"

	"github.com/BurntSushi/toml"
)

// resolvedHeader opens every file written by WriteResolved.
const resolvedHeader = "# Resolved recipe: every key with its value (defaults filled in), paths absolute.\n" +
	"# Written by ragtrain; configs.Load reads it back to the same recipe.\n\n"

// WriteResolved writes r as TOML to path, every key present, atomically: the
// text goes to a temporary file in the same directory, which is synced and
// renamed over path. Loading the file gives a recipe equal to r when r came
// from Load.
func (r *Recipe) WriteResolved(path string) error {
	var buf bytes.Buffer
	buf.WriteString(resolvedHeader)
	enc := toml.NewEncoder(&buf)
	enc.Indent = ""
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("recipe: encode: %w", err)
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}
