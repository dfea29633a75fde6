package configs

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// DocTableErrors checks a key table of a package's documentation (the rows "//\t<key>
// <default> <meaning>" of doc, as configs/doc.go and each kind's doc.go write them) against
// the defaults of a section: every key of defaults (a struct, or a pointer to one, its keys
// prefix + toml tag) has a row starting with its default in TOML syntax, and no row with that
// prefix names a key the struct lacks. It returns one line per mismatch; a kind's test calls it
// on its own section.
func DocTableErrors(doc []byte, prefix string, defaults any) []string {
	rows := map[string]string{} // key -> rest of the row
	for _, line := range strings.Split(string(doc), "\n") {
		line, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.HasPrefix(fields[0], "recipes/") || fields[0] == "key" || !strings.HasPrefix(fields[0], prefix) {
			continue
		}
		rows[fields[0]] = strings.TrimSpace(strings.TrimPrefix(line, fields[0]))
	}
	v := reflect.ValueOf(defaults)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	keys := leafValues(v, prefix)
	var errs []string
	for key, val := range keys {
		rest, ok := rows[key]
		if !ok {
			errs = append(errs, fmt.Sprintf("no row for key %s", key))
			continue
		}
		if want := formatDefault(val); !strings.HasPrefix(rest, want+" ") {
			errs = append(errs, fmt.Sprintf("%s: row %q does not start with the default %s", key, rest, want))
		}
	}
	for key := range rows {
		if _, ok := keys[key]; !ok {
			errs = append(errs, fmt.Sprintf("row for %s, which is not a key", key))
		}
	}
	return errs
}

// leafValues maps each non-table key of the struct v to its value.
func leafValues(v reflect.Value, prefix string) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Tag.Get("toml")
		if name == "-" || name == "" {
			continue
		}
		if f := v.Field(i); f.Kind() == reflect.Struct {
			for k, x := range leafValues(f, prefix+name+".") {
				out[k] = x
			}
		} else {
			out[prefix+name] = f
		}
	}
	return out
}

// formatDefault writes a value as the doc table does (TOML syntax).
func formatDefault(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float64:
		s := strconv.FormatFloat(v.Float(), 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	case reflect.Slice, reflect.Array:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = formatDefault(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprintf("%v", v)
}
