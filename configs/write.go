package configs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

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
	return writeAtomic(path, buf.Bytes())
}

// writeAtomic writes data to a temporary file beside path, syncs it and
// renames it to path, so readers see the old file or the new one, never part.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil { // persist the rename; best effort
		d.Sync()
		d.Close()
	}
	return nil
}
