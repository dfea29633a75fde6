package eval

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// WriteTREC writes run to path in the TREC run format, one line per hit:
//
//	qid Q0 docid rank score tag
//
// Queries come in SortQueryIDs order; each query's hits in the order given, ranked 1, 2, ...
// (runs from package index are already sorted best first). Scores are written with the fewest
// digits that read back to the same float64. The file is written to a temporary file and
// renamed, so path never holds a partial run. It fails when tag, a query id or a doc id is
// empty or holds white space, or a score is NaN.
func WriteTREC(path string, run Run, tag string) error {
	if err := checkField("tag", tag); err != nil {
		return fmt.Errorf("eval: WriteTREC %s: %w", path, err)
	}
	qids := make([]string, 0, len(run))
	for q, hits := range run {
		if err := checkField("query id", q); err != nil {
			return fmt.Errorf("eval: WriteTREC %s: %w", path, err)
		}
		for _, h := range hits {
			if err := checkField("doc id", h.DocID); err != nil {
				return fmt.Errorf("eval: WriteTREC %s: query %q: %w", path, q, err)
			}
			if math.IsNaN(h.Score) {
				return fmt.Errorf("eval: WriteTREC %s: query %q: doc %q has a NaN score", path, q, h.DocID)
			}
		}
		qids = append(qids, q)
	}
	SortQueryIDs(qids)
	return atomicfile.Write(path, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		for _, q := range qids {
			for i, h := range run[q] {
				fmt.Fprintf(bw, "%s Q0 %s %d %s %s\n", q, h.DocID, i+1,
					strconv.FormatFloat(h.Score, 'g', -1, 64), tag)
			}
		}
		return bw.Flush()
	})
}

func checkField(what, s string) error {
	if s == "" {
		return fmt.Errorf("empty %s", what)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' }) {
		return fmt.Errorf("%s %q holds white space", what, s)
	}
	return nil
}

// SortQueryIDs sorts query ids numerically when both are non-negative integers ("2" before
// "10"), else in byte order, integers first.
func SortQueryIDs(qids []string) {
	slices.SortFunc(qids, func(a, b string) int {
		na, ea := strconv.ParseUint(a, 10, 64)
		nb, eb := strconv.ParseUint(b, 10, 64)
		switch {
		case ea == nil && eb == nil && na != nb:
			if na < nb {
				return -1
			}
			return 1
		case ea == nil && eb != nil:
			return -1
		case ea != nil && eb == nil:
			return 1
		}
		return strings.Compare(a, b)
	})
}

// ReadTREC reads a TREC run file (`qid Q0 docid rank score tag`, fields separated by white
// space; the second field and the tag are not checked). Each query's hits are returned in rank
// order (file order for equal ranks); note that Evaluate re-sorts by score as trec_eval does.
// Blank lines are skipped. It fails, naming file and line, on a line without six fields, a
// rank that is not a positive integer, a score that is not a finite number, or a doc id
// listed twice for one query.
func ReadTREC(path string) (Run, error) {
	f, err := bounded.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("eval: ReadTREC: %w", err)
	}
	defer f.Close()
	type ranked struct {
		hit  index.Hit
		rank int
	}
	lists := make(map[string][]ranked)
	seen := make(map[[2]string]int) // (qid, docid) -> line
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 6 {
			return nil, fmt.Errorf("%s:%d: run: want 6 fields (qid Q0 docid rank score tag), got %d", path, line, len(fields))
		}
		q, doc := fields[0], fields[2]
		rank, err := strconv.Atoi(fields[3])
		if err != nil || rank < 1 {
			return nil, fmt.Errorf("%s:%d: run: rank %q is not a positive integer", path, line, fields[3])
		}
		score, err := strconv.ParseFloat(fields[4], 64)
		if err != nil || math.IsNaN(score) || math.IsInf(score, 0) {
			return nil, fmt.Errorf("%s:%d: run: score %q is not a finite number", path, line, fields[4])
		}
		key := [2]string{q, doc}
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s:%d: run: query %q lists doc %q again (first on line %d)", path, line, q, doc, first)
		}
		seen[key] = line
		lists[q] = append(lists[q], ranked{index.Hit{DocID: doc, Score: score}, rank})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: run: %w", path, line+1, err)
	}
	run := make(Run, len(lists))
	for q, l := range lists {
		slices.SortStableFunc(l, func(a, b ranked) int { return a.rank - b.rank })
		hits := make([]index.Hit, len(l))
		for i, r := range l {
			hits[i] = r.hit
		}
		run[q] = hits
	}
	return run, nil
}
