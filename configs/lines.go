package configs

import (
	"strconv"
	"strings"
)

// keyLines maps every key defined in a TOML document to the 1-based line
// that defines it: "train.steps" for `steps = ...` under [train], "train" for
// the [train] header. BurntSushi/toml v1.6.0 keeps key positions private, so
// this scanner finds them. It assumes the document parses (Load decodes it
// first) and skips the contents of multi-line strings and arrays; keys inside
// inline tables are not listed (lineOf falls back to the enclosing key).
func keyLines(src string) map[string]int {
	lines := make(map[string]int)
	var (
		table string // current [table] prefix, "" at the top level
		depth int    // open brackets/braces carried over from earlier lines
		delim string // open multi-line string delimiter, "" when none
	)
	for n, line := range strings.Split(src, "\n") {
		rest := line
		if delim != "" {
			i := strings.Index(rest, delim)
			if i < 0 {
				continue
			}
			rest, delim = rest[i+len(delim):], ""
		} else if depth == 0 {
			trimmed := strings.TrimLeft(rest, " \t")
			switch {
			case strings.HasPrefix(trimmed, "["):
				name := strings.TrimLeft(trimmed, "[")
				if end := strings.Index(name, "]"); end >= 0 {
					table = joinKey(splitKey(name[:end]))
					record(lines, table, n+1)
				}
				continue
			case trimmed == "" || strings.HasPrefix(trimmed, "#"):
				continue
			}
			eq := keyEnd(trimmed)
			if eq < 0 {
				continue
			}
			key := joinKey(splitKey(trimmed[:eq]))
			if table != "" {
				key = table + "." + key
			}
			record(lines, key, n+1)
			rest = trimmed[eq+1:]
		}
		depth, delim = scanValue(rest, depth)
	}
	return lines
}

// record stores the first line of key and of each of its dotted prefixes.
func record(lines map[string]int, key string, line int) {
	for k := key; k != ""; {
		if _, ok := lines[k]; !ok {
			lines[k] = line
		}
		i := strings.LastIndex(k, ".")
		if i < 0 {
			break
		}
		k = k[:i]
	}
}

// keyEnd returns the index of the '=' ending the key at the start of s, or -1.
func keyEnd(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '=':
			return i
		case '"', '\'':
			j := strings.IndexByte(s[i+1:], s[i])
			if j < 0 {
				return -1
			}
			i += j + 1
		}
	}
	return -1
}

// splitKey splits a dotted TOML key into its unquoted parts.
func splitKey(s string) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '.':
			parts = append(parts, strings.TrimSpace(cur.String()))
			cur.Reset()
		case '"', '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 { // unterminated: cannot happen in a parsed document
				cur.WriteString(s[i:])
				return append(parts, strings.TrimSpace(cur.String()))
			}
			quoted := s[i : i+j+2]
			if c == '"' {
				if u, err := strconv.Unquote(quoted); err == nil {
					cur.WriteString(u)
				}
			} else {
				cur.WriteString(quoted[1 : len(quoted)-1])
			}
			i += j + 1
		default:
			cur.WriteByte(c)
		}
	}
	return append(parts, strings.TrimSpace(cur.String()))
}

// joinKey joins key parts the way toml.Key.String does for simple keys.
func joinKey(parts []string) string { return strings.Join(parts, ".") }

// scanValue follows the value text s, starting inside depth open brackets,
// and returns the depth at the end of the line and the delimiter of a
// multi-line string left open ("" if none).
func scanValue(s string, depth int) (int, string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '#':
			return depth, ""
		case '[', '{':
			depth++
		case ']', '}':
			if depth > 0 {
				depth--
			}
		case '"', '\'':
			q := string([]byte{c, c, c})
			if strings.HasPrefix(s[i:], q) {
				end := strings.Index(s[i+3:], q)
				if end < 0 {
					return depth, q
				}
				i += 3 + end + 2
				continue
			}
			for i++; i < len(s) && s[i] != c; i++ {
				if c == '"' && s[i] == '\\' {
					i++
				}
			}
		}
	}
	return depth, ""
}
