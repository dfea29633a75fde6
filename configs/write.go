package configs

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ragtrain/ragtrain/internal/atomicfile"

	"github.com/BurntSushi/toml"
)

// resolvedHeader opens every file written by WriteResolved.
const resolvedHeader = "# Resolved recipe: every key with its value (defaults filled in), paths absolute.\n" +
	"# Written by ragtrain; configs.Load reads it back to the same recipe.\n\n"

// WriteResolved writes r as TOML to path, every key present, atomically: the
// text goes to a temporary file in the same directory, which is synced and
// renamed over path. Only the sections r's kind reads are written (all of them
// when the kind is not registered), so the file loads back; loading it gives a
// recipe equal to r when r came from Load.
func (r *Recipe) WriteResolved(path string) error {
	text, err := r.Resolved()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, text)
}

// Resolved returns the text WriteResolved writes.
func (r *Recipe) Resolved() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(resolvedHeader)
	enc := toml.NewEncoder(&buf)
	enc.Indent = ""
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("recipe: encode: %w", err)
	}
	for _, s := range ownSections() { // the kind's own sections, after the shared ones
		v, ok := r.sections[s.Name]
		if !ok {
			v = s.New() // defaults; dropUnread drops the sections the kind does not read
		}
		if err := enc.Encode(map[string]any{s.Name: v}); err != nil {
			return nil, fmt.Errorf("recipe: encode [%s]: %w", s.Name, err)
		}
	}
	return dropUnread(buf.Bytes(), r.Kind), nil
}

// dropUnread removes from an encoded recipe the tables (with their sub-tables)
// of the sections kind does not read. The encoder writes every value on one
// line after its table header, so a header line starts a table's text.
func dropUnread(text []byte, kind string) []byte {
	var out bytes.Buffer
	keep := true
	for _, line := range strings.SplitAfter(string(text), "\n") {
		if strings.HasPrefix(line, "[") {
			name := strings.TrimLeft(strings.TrimSpace(line), "[")
			if i := strings.IndexAny(name, ".]"); i >= 0 {
				name = name[:i]
			}
			keep = readsSection(kind, name)
		}
		if keep {
			out.WriteString(line)
		}
	}
	return out.Bytes()
}

// Diff returns the first key whose value differs between r and other, as "key: a != b" with
// the resolved TOML values, or "" when the recipes are equal.
func (r *Recipe) Diff(other *Recipe) (string, error) {
	a, err := r.Resolved()
	if err != nil {
		return "", err
	}
	b, err := other.Resolved()
	if err != nil {
		return "", err
	}
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	table := ""
	for i := 0; i < len(la) || i < len(lb); i++ {
		x, y := "", ""
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if strings.HasPrefix(x, "[") {
			table = strings.Trim(x, "[]") + "."
		}
		if x != y {
			key, va, _ := strings.Cut(x, " = ")
			_, vb, _ := strings.Cut(y, " = ")
			return fmt.Sprintf("%s%s: %s != %s", table, key, va, vb), nil
		}
	}
	return "", nil
}
