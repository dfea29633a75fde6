// Package teachercache reads and writes a distillation teacher's cached scores
// (teacher_scores.tsv): one header line
//
//	# ragtrain teacher scores; teacher_sha256 <hex>; max_length <L>; pairs <N>; content_sha256 <hex>; teacher <dir>
//
// then N lines "query-id TAB passage-id TAB score" (float32 in its shortest round-trip form),
// sorted by query and passage id. teacher_sha256 names the teacher (weights, tokenizer, length)
// the scores are of; content_sha256 is the SHA-256 of the N lines after the header, each with
// its "\n", so that a file cut short, inside a number or between lines, or edited is refused
// before any score of it is used. Read also refuses a pair given twice and a score that is not
// a finite float32, naming the file and line.
package teachercache

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// Magic starts the header line.
const Magic = "# ragtrain teacher scores"

// maxLine bounds one line (two ids and a number; the header with the teacher's path).
const maxLine = 1 << 20

// Header is what the first line says.
type Header struct {
	TeacherSHA256 string // the teacher's hash, hex
	MaxLength     int    // the pairs' length in tokens
	Teacher       string // the teacher's directory, for the record
}

// Pair is (query id, passage id).
type Pair = [2]string

// Read reads the cache at path and adds its scores to scores, returning how many pairs it
// holds; a missing file adds nothing and is no error. A file of another teacher (its
// teacher_sha256 is not wantHash) is refused; so is every damage Parse detects. Nothing is added
// unless the whole file verifies.
func Read(path, wantHash string, scores map[Pair]float32) (int, error) {
	f, _, err := bounded.Open(path, bounded.TeacherCache)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	defer f.Close()
	h, got, err := Parse(path, f)
	if err != nil {
		return 0, err
	}
	if h.TeacherSHA256 != wantHash {
		return 0, fmt.Errorf("%s: holds the scores of teacher sha256 %s, but loss.teacher has sha256 %s (another teacher, tokenizer or max_length): refused; remove the file or name the teacher it was scored with", path, h.TeacherSHA256, wantHash)
	}
	for k, v := range got {
		scores[k] = v
	}
	return len(got), nil
}

// Parse reads a cache from r (name names it in errors) and verifies it: the header, every
// line's three fields, each score a finite float32 written as Write writes it, no pair twice,
// and the line count and content_sha256 of the header.
func Parse(name string, r io.Reader) (Header, map[Pair]float32, error) {
	var h Header
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), maxLine)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return h, nil, fmt.Errorf("%s:1: %w", name, err)
		}
		return h, nil, fmt.Errorf("%s: empty teacher scores file", name)
	}
	head := sc.Text()
	fields, ok := headerFields(head)
	if !ok || fields["teacher_sha256"] == "" {
		return h, nil, fmt.Errorf("%s:1: not a teacher scores file (want %q)", name, Magic+"; teacher_sha256 ...")
	}
	h.TeacherSHA256, h.Teacher = fields["teacher_sha256"], fields["teacher"]
	wantSum := fields["content_sha256"]
	nPairs, err := strconv.Atoi(fields["pairs"])
	if wantSum == "" || err != nil || nPairs < 0 {
		return h, nil, fmt.Errorf("%s:1: the header gives no pairs count and content_sha256 (a file written before content checksums, or damaged): refused; remove it and the teacher scores the pairs again", name)
	}
	if h.MaxLength, err = strconv.Atoi(fields["max_length"]); err != nil || h.MaxLength < 1 {
		return h, nil, fmt.Errorf("%s:1: max_length %q, want a length >= 1", name, fields["max_length"])
	}
	sum := sha256.New()
	scores := map[Pair]float32{}
	lineOf := map[Pair]int{}
	line := 1
	for sc.Scan() {
		line++
		text := sc.Text()
		sum.Write([]byte(text))
		sum.Write([]byte{'\n'})
		parts := strings.Split(text, "\t")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
			return h, nil, fmt.Errorf("%s:%d: want query-id TAB passage-id TAB score", name, line)
		}
		v, err := strconv.ParseFloat(parts[2], 32)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || FormatScore(float32(v)) != parts[2] {
			return h, nil, fmt.Errorf("%s:%d: score %q is not a finite float32 in its shortest form", name, line, parts[2])
		}
		k := Pair{parts[0], parts[1]}
		if first, dup := lineOf[k]; dup {
			return h, nil, fmt.Errorf("%s:%d: query %q, passage %q given again (first at line %d)", name, line, k[0], k[1], first)
		}
		lineOf[k] = line
		scores[k] = float32(v)
	}
	if err := sc.Err(); err != nil {
		return h, nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(scores) != nPairs {
		return h, nil, fmt.Errorf("%s:%d: %d pairs, the header says %d (truncated?)", name, line, len(scores), nPairs)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != wantSum {
		return h, nil, fmt.Errorf("%s: content sha256 %s, the header says %s (the file was cut or edited): refused", name, got, wantSum)
	}
	return h, scores, nil
}

// headerFields splits a header line into its "key value" fields; teacher, the last, takes the
// rest of the line.
func headerFields(line string) (map[string]string, bool) {
	rest, ok := strings.CutPrefix(line, Magic+"; ")
	if !ok {
		return nil, false
	}
	out := map[string]string{}
	for rest != "" {
		if v, ok := strings.CutPrefix(rest, "teacher "); ok {
			out["teacher"] = v
			break
		}
		f, tail, _ := strings.Cut(rest, "; ")
		k, v, ok := strings.Cut(f, " ")
		if !ok {
			return nil, false
		}
		out[k] = v
		rest = tail
	}
	return out, true
}

// FormatScore is a score as the file holds it.
func FormatScore(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }

// Write writes scores to path atomically (a temporary file renamed over it), sorted by query
// and passage id, with the header's pairs count and content_sha256.
func Write(path string, h Header, scores map[Pair]float32) error {
	keys := make([]Pair, 0, len(scores))
	for k := range scores {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Pair) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	var body strings.Builder
	for _, k := range keys {
		if strings.ContainsAny(k[0]+k[1], "\t\n") {
			return fmt.Errorf("%s: query %q, passage %q: an id holds a tab or a newline", path, k[0], k[1])
		}
		body.WriteString(k[0] + "\t" + k[1] + "\t" + FormatScore(scores[k]) + "\n")
	}
	sum := sha256.Sum256([]byte(body.String()))
	return atomicfile.Write(path, func(w io.Writer) error {
		if _, err := fmt.Fprintf(w, "%s; teacher_sha256 %s; max_length %d; pairs %d; content_sha256 %s; teacher %s\n",
			Magic, h.TeacherSHA256, h.MaxLength, len(keys), hex.EncodeToString(sum[:]), h.Teacher); err != nil {
			return err
		}
		_, err := io.WriteString(w, body.String())
		return err
	})
}
