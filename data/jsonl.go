package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"unicode/utf8"

	"github.com/ragtrain/ragtrain/internal/bounded"
)

// record is one JSON line of corpus.jsonl or queries.jsonl.
type record struct {
	ID    string
	Title string
	Text  string
	Line  int // 1-based line number in the file
}

// readJSONL reads a BEIR JSON-lines file. allowed lists the string members a
// line may have besides "_id" (and the ignored "metadata"). Blank lines are
// skipped; every other line must be one JSON object.
func readJSONL(path string, allowed ...string) ([]record, error) {
	r, err := openJSONL(path, allowed...)
	if err != nil {
		return nil, err
	}
	defer r.close()
	var recs []record
	for {
		rec, err := r.next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
}

// jsonlReader yields the records of a BEIR JSON-lines file one at a time: readJSONL and the
// streaming readers share it, so their errors are the same.
type jsonlReader struct {
	path    string
	allowed []string
	f       *os.File
	r       *bufio.Reader
	line    int   // last line read
	done    bool  // EOF or an error was returned
	off     int64 // byte offset of the next line in the file
	recOff  int64 // byte offset of the line of the record next returned last
}

func openJSONL(path string, allowed ...string) (*jsonlReader, error) {
	f, err := bounded.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	return &jsonlReader{path: path, allowed: allowed, f: f, r: bufio.NewReaderSize(f, 1<<16)}, nil
}

// next returns the next record, io.EOF after the last, or the error of the first bad line
// (then io.EOF).
func (j *jsonlReader) next() (record, error) {
	for !j.done {
		j.line++
		line := j.line
		b, err := j.r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			j.done = true
			return record{}, fmt.Errorf("%s:%d: %w", j.path, line, err)
		}
		j.recOff, j.off = j.off, j.off+int64(len(b))
		if len(b) == 0 && err != nil {
			break
		}
		if err != nil { // io.EOF after a last line without newline
			j.done = true
		}
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // UTF-8 byte-order mark
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		rec, perr := parseRecord(b, j.allowed)
		if perr != nil {
			j.done = true
			return record{}, fmt.Errorf("%s:%d: %w", j.path, line, perr)
		}
		rec.Line = line
		return rec, nil
	}
	j.done = true
	return record{}, io.EOF
}

func (j *jsonlReader) close() error { return j.f.Close() }

func parseRecord(b []byte, allowed []string) (record, error) {
	if !utf8.Valid(b) {
		return record{}, errors.New("invalid UTF-8")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return record{}, fmt.Errorf("invalid JSON: line is a JSON %s, want an object", te.Value)
		}
		return record{}, fmt.Errorf("invalid JSON: %v", err)
	}
	var rec record
	raw, ok := members["_id"]
	if !ok {
		return record{}, errors.New(`missing field "_id"`)
	}
	if err := stringField("_id", raw, &rec.ID); err != nil {
		return record{}, err
	}
	if rec.ID == "" {
		return record{}, errors.New(`field "_id" is empty`)
	}
	for _, name := range slices.Sorted(maps.Keys(members)) {
		raw := members[name]
		switch {
		case name == "_id" || name == "metadata":
		case name == "title" && slices.Contains(allowed, name):
			if err := stringField(name, raw, &rec.Title); err != nil {
				return record{}, err
			}
		case name == "text" && slices.Contains(allowed, name):
			if err := stringField(name, raw, &rec.Text); err != nil {
				return record{}, err
			}
		default:
			return record{}, fmt.Errorf("unknown field %q (want %q, %v or \"metadata\")", name, "_id", allowed)
		}
	}
	return rec, nil
}

// stringField decodes a member that must be a JSON string; null, which encoding/json would
// leave as "", is an error like any other non-string.
func stringField(name string, raw json.RawMessage, dst *string) error {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, dst) != nil {
		return fmt.Errorf("field %q: want a string, got %s", name, jsonKind(raw))
	}
	return nil
}

// jsonKind names the JSON type of a raw value for error messages.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}
