package configs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/BurntSushi/toml"

	"github.com/ragtrain/ragtrain/internal/bounded"
)

// Load reads the recipe at path: it decodes the TOML over Defaults(), rejects
// unknown keys and values of the wrong type, fills name from the file name
// when unset, resolves relative paths against the recipe's directory, and
// validates every value. Errors name the file as given, the line and the key:
//
//	recipes/x.toml:12: unknown key "train.stpes" (did you mean "train.steps"?)
//	recipes/x.toml:40: train.batch_size: must be >= 2, got 1
//
// The line is left out when the key is not in the file (a required key, or a
// default that conflicts with another key).
func Load(path string) (*Recipe, error) {
	src, err := bounded.ReadFile(path, bounded.Recipe)
	if err != nil {
		return nil, fmt.Errorf("recipe: %w", err)
	}
	// keyLines assumes a document that parses; its lines are used only after
	// the parser accepted the text (syntax errors carry their own position).
	l := &loader{path: path, lines: keyLines(string(src))}
	r := Defaults()
	md, err := toml.Decode(string(src), r)
	if err != nil {
		return nil, l.decodeError(err)
	}
	l.defined = md.IsDefined
	undecoded, err := l.decodeOwn(r, string(src), md.Undecoded())
	if err != nil {
		return nil, err
	}
	if len(undecoded) > 0 {
		return nil, l.unknownKey(undecoded)
	}
	l.resolved = strings.HasPrefix(string(src), resolvedHeader)
	if err := l.checkKind(r, l.resolved); err != nil {
		return nil, err
	}
	l.keepOwn(r)
	if r.Name == "" {
		r.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	if r.Name == "." || r.Name == ".." || strings.ContainsAny(r.Name, `/\`) {
		return nil, l.errf("name", "%q cannot name a run directory (no path separators, not . or ..)", r.Name)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l.dir = dir
	if err := l.resolve(r, dir); err != nil {
		return nil, err
	}
	if err := l.validate(r); err != nil {
		return nil, err
	}
	r.Path, r.Lines = path, l.lines
	return r, nil
}

// decodeOwn decodes the tables of src that kinds own (KindSpec.Own) through their
// registrations into r.sections, and returns the keys of undecoded (those the shared schema
// lacks) that no section decoded either: the unknown keys.
func (l *loader) decodeOwn(r *Recipe, src string, undecoded []toml.Key) ([]toml.Key, error) {
	own := ownSections()
	if len(undecoded) == 0 || len(own) == 0 {
		return undecoded, nil
	}
	var raw map[string]toml.Primitive
	md, err := toml.Decode(src, &raw)
	if err != nil {
		return nil, l.decodeError(err)
	}
	r.sections = map[string]any{}
	for _, s := range own {
		p, ok := raw[s.Name]
		if !ok {
			continue
		}
		v := s.New()
		if err := md.PrimitiveDecode(p, v); err != nil {
			return nil, l.decodeError(err)
		}
		r.sections[s.Name] = v
	}
	left := map[string]bool{}
	for _, k := range md.Undecoded() {
		left[k.String()] = true
	}
	var unknown []toml.Key
	for _, k := range undecoded {
		// a top-level table is decoded whole into a Primitive: it is unknown unless a kind owns it
		if _, owned := r.sections[k[0]]; (len(k) == 1 && !owned) || (len(k) > 1 && left[k.String()]) {
			unknown = append(unknown, k)
		}
	}
	return unknown, nil
}

// keepOwn leaves in r.sections the sections r's kind owns, each the file's table or its
// defaults (a legacy resolved file may hold other kinds' tables at their defaults).
func (l *loader) keepOwn(r *Recipe) {
	spec, _ := LookupKind(r.Kind)
	if len(spec.Own) == 0 {
		r.sections = nil
		return
	}
	kept := map[string]any{}
	for _, s := range spec.Own {
		if v, ok := r.sections[s.Name]; ok {
			kept[s.Name] = v
		} else {
			kept[s.Name] = s.New()
		}
	}
	r.sections = kept
}

// loader carries what error messages need: the path as given and key lines.
type loader struct {
	dir      string // the recipe file's directory, absolute
	path     string
	lines    map[string]int
	defined  func(key ...string) bool
	resolved bool // a recipe.resolved.toml (every default written out)
}

// lineOf returns the line defining key, else that of its nearest enclosing
// table or key, else 0.
func (l *loader) lineOf(key string) int {
	for k := key; k != ""; {
		if n, ok := l.lines[k]; ok {
			return n
		}
		i := strings.LastIndex(k, ".")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

// errf returns "path:line: key: message", without the line when key has none.
func (l *loader) errf(key, format string, args ...any) error {
	n, msg, key := l.lineOf(key), oneLine(fmt.Sprintf(format, args...)), oneLine(key)
	if n > 0 {
		return fmt.Errorf("%s:%d: %s: %s", l.path, n, key, msg)
	}
	return fmt.Errorf("%s: %s: %s", l.path, key, msg)
}

// isSet reports whether the file sets the dotted key.
func (l *loader) isSet(key string) bool {
	return l.defined != nil && l.defined(strings.Split(key, ".")...)
}

var (
	// decodeErrRE matches the plain errors of BurntSushi/toml's decoder
	// (type mismatches), which carry the line only in their text.
	decodeErrRE = regexp.MustCompile(`^toml: (?:line (\d+) )?\(last key "([^"]*)"\): (.*)$`)
	badTypeRE   = regexp.MustCompile(`^incompatible types: TOML value has type (.+); destination has type (.+)$`)
	notTableRE  = regexp.MustCompile(`^type mismatch for .*: expected table but found (.+)$`)
)

// decodeError turns a BurntSushi/toml error into "path:line: key: message".
func (l *loader) decodeError(err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg := oneLine(pe.Message)
		if pe.LastKey != "" {
			return fmt.Errorf("%s:%d: %s: %s", l.path, pe.Position.Line, oneLine(pe.LastKey), msg)
		}
		return fmt.Errorf("%s:%d: %s", l.path, pe.Position.Line, msg)
	}
	m := decodeErrRE.FindStringSubmatch(oneLine(err.Error()))
	if m == nil {
		return fmt.Errorf("%s: %s", l.path, oneLine(err.Error()))
	}
	line, key, msg := m[1], m[2], m[3]
	if t := badTypeRE.FindStringSubmatch(msg); t != nil {
		msg = fmt.Sprintf("wrong type: got %s, want %s", tomlTypeName(t[1]), tomlTypeName(t[2]))
	} else if t := notTableRE.FindStringSubmatch(msg); t != nil {
		msg = fmt.Sprintf("wrong type: got %s, want a table", tomlTypeName(t[1]))
	}
	if line == "" {
		return l.errf(key, "%s", msg)
	}
	return fmt.Errorf("%s:%s: %s: %s", l.path, line, key, msg)
}

// oneLine escapes the line breaks and other control characters that BurntSushi/toml copies
// from the input into its messages (e.g. "not a binary number: '0b\n'"), so that an error
// stays one line naming the file.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// tomlTypeName names a Go type from BurntSushi/toml's messages as TOML does.
func tomlTypeName(goType string) string {
	switch goType {
	case "string":
		return "a string"
	case "int64", "integer":
		return "an integer"
	case "float64", "float":
		return "a float"
	case "bool", "boolean":
		return "a boolean"
	case "map[string]any", "map":
		return "a table"
	case "[]any", "[]map[string]any", "slice":
		return "an array"
	case "time.Time", "toml.LocalDate", "toml.LocalTime", "toml.LocalDatetime":
		return "a date-time"
	}
	return goType
}

// unknownKey reports the first key the schema does not know.
func (l *loader) unknownKey(keys []toml.Key) error {
	k := keys[0].String()
	msg := fmt.Sprintf("unknown key %q", k)
	if s := suggest(k); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	if len(keys) > 1 {
		msg += fmt.Sprintf(" and %d more unknown keys", len(keys)-1)
	}
	if n := l.lineOf(k); n > 0 {
		return fmt.Errorf("%s:%d: %s", l.path, n, msg)
	}
	return fmt.Errorf("%s: %s", l.path, msg)
}

// suggest returns the schema key closest to k within edit distance 2, or "".
func suggest(k string) string {
	best, bestD := "", 3
	for _, known := range schemaKeys() {
		if d := editDistance(k, known); d < bestD {
			best, bestD = known, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// schemaKeys returns every key of the schema in declaration order, tables as
// "section" and their keys as "section.key".
func schemaKeys() []string {
	var keys []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := f.Tag.Get("toml")
			if name == "" || name == "-" {
				continue
			}
			keys = append(keys, prefix+name)
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, prefix+name+".")
			}
		}
	}
	walk(reflect.TypeOf(Recipe{}), "")
	for _, s := range ownSections() {
		keys = append(keys, s.Name)
		walk(reflect.TypeOf(s.New()).Elem(), s.Name+".")
	}
	return keys
}

// resolve makes the recipe's paths absolute against dir, the recipe's
// directory, and checks that the inputs exist.
func (l *loader) resolve(r *Recipe, dir string) error {
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(dir, p)
	}
	if r.OutputDir == "" {
		return l.errf("output_dir", "must not be empty")
	}
	r.OutputDir = abs(r.OutputDir)

	switch {
	case generatesWorld(r.Kind) && r.Data.Dir != "":
		return l.errf("data.dir", `kind = %q generates its data from the [world] table; remove data.dir`, r.Kind)
	case readsSection(r.Kind, "data"):
		if err := l.resolveData(r, abs); err != nil {
			return err
		}
	}

	t := &r.Tokenizer
	switch {
	case !readsSection(r.Kind, "tokenizer"):
		// a kind whose model brings its tokenizer (reader_lm: the GGUF's)
	case t.File != "" && t.Train:
		return l.errf("tokenizer.file", "set either file or train = true, not both")
	case t.File == "" && !t.Train && r.Model.InitFrom != "":
		// the model.init_from directory's tokenizer (its weights' vocabulary)
	case t.File == "" && !t.Train:
		return l.errf("tokenizer", `set file = "path/to/tokenizer.json" or train = true (or model.init_from, whose tokenizer is used)`)
	case t.File != "":
		t.File = abs(t.File)
		if err := isFile(t.File); err != nil {
			return l.errf("tokenizer.file", "%v", err)
		}
	}

	if r.Model.InitFrom != "" {
		r.Model.InitFrom = abs(r.Model.InitFrom)
		if err := isDir(r.Model.InitFrom); err != nil {
			return l.errf("model.init_from", "%v", err)
		}
	}
	if r.Loss.Teacher != "" {
		r.Loss.Teacher = abs(r.Loss.Teacher)
		if err := isDir(r.Loss.Teacher); err != nil {
			return l.errf("loss.teacher", "%v", err)
		}
	}
	if r.Loss.TeacherCache != "" {
		r.Loss.TeacherCache = abs(r.Loss.TeacherCache)
	}
	if r.Reader.InitFrom != "" {
		r.Reader.InitFrom = abs(r.Reader.InitFrom)
		if err := isDir(r.Reader.InitFrom); err != nil {
			return l.errf("reader.init_from", "%v", err)
		}
	}
	return nil
}

// resolveData makes data.dir absolute and checks the BEIR files of every split named.
func (l *loader) resolveData(r *Recipe, abs func(string) string) error {
	if r.Data.Dir == "" {
		return l.errf("data.dir", "required: the BEIR directory (corpus.jsonl, queries.jsonl, qrels/)")
	}
	r.Data.Dir = abs(r.Data.Dir)
	if err := isDir(r.Data.Dir); err != nil {
		return l.errf("data.dir", "%v", err)
	}
	for _, f := range []string{"corpus.jsonl", "queries.jsonl"} {
		if err := isFile(filepath.Join(r.Data.Dir, f)); err != nil {
			return l.errf("data.dir", "%v", err)
		}
	}
	splits := []struct {
		key, name string
	}{{"data.train_split", r.Data.TrainSplit}, {"data.dev_split", r.Data.DevSplit}, {"data.test_split", r.Data.TestSplit}}
	for _, s := range splits {
		if s.name == "" {
			if s.key == "data.train_split" {
				return l.errf(s.key, "must not be empty")
			}
			continue
		}
		if err := isFile(filepath.Join(r.Data.Dir, "qrels", s.name+".tsv")); err != nil {
			return l.errf(s.key, "%v", err)
		}
	}
	for _, s := range r.Eval.Splits {
		if s == "" {
			return l.errf("eval.splits", "empty split name")
		}
		if err := isFile(filepath.Join(r.Data.Dir, "qrels", s+".tsv")); err != nil {
			return l.errf("eval.splits", "%v", err)
		}
	}
	return nil
}

func isDir(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", p)
	}
	return nil
}

func isFile(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory, want a file", p)
	}
	return nil
}
