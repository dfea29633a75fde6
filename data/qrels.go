package data

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/internal/bounded"
)

// Qrels are relevance judgements: query id -> document id -> graded score.
// A score > 0 means relevant (higher is more relevant); 0 or less means judged
// non-relevant. Pairs absent from the map are unjudged.
type Qrels map[string]map[string]int

// qrelsHeader is the first row of every BEIR qrels file.
var qrelsHeader = []string{"query-id", "corpus-id", "score"}

// LoadQrels reads a BEIR qrels file: a header row
// "query-id<TAB>corpus-id<TAB>score", then one judgement per row with an
// integer score. A row with other than three tab-separated columns, a
// non-integer score, an empty id, a pair judged twice, or (when corpus or
// queries is non-nil) an id missing from them is an error naming path, line
// and field. Blank lines are skipped; surrounding spaces of a field are
// trimmed.
func LoadQrels(path string, corpus *Corpus, queries *Queries) (Qrels, error) {
	f, err := bounded.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	q := make(Qrels)
	seen := make(map[[2]string]int) // (query, doc) -> line
	header := false
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if len(b) == 0 && err != nil {
			break
		}
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		if s := strings.TrimRight(string(b), "\r\n"); strings.TrimSpace(s) != "" {
			cols := strings.Split(s, "\t")
			for i := range cols {
				cols[i] = strings.TrimSpace(cols[i])
			}
			if !header {
				if !slices.Equal(cols, qrelsHeader) {
					return nil, fmt.Errorf("%s:%d: qrels: header is %q, want %q", path, line, s, strings.Join(qrelsHeader, "\t"))
				}
				header = true
			} else if perr := q.addRow(cols, line, seen, corpus, queries); perr != nil {
				return nil, fmt.Errorf("%s:%d: qrels: %w", path, line, perr)
			}
		}
		if err != nil {
			break
		}
	}
	if !header {
		return nil, fmt.Errorf("%s: qrels: empty file, want header %q", path, strings.Join(qrelsHeader, "\t"))
	}
	return q, nil
}

func (q Qrels) addRow(cols []string, line int, seen map[[2]string]int, corpus *Corpus, queries *Queries) error {
	if len(cols) != 3 {
		return fmt.Errorf("%d columns, want 3 (query-id, corpus-id, score separated by tabs)", len(cols))
	}
	qid, did := cols[0], cols[1]
	if qid == "" {
		return errors.New("empty query-id")
	}
	if did == "" {
		return errors.New("empty corpus-id")
	}
	score, err := strconv.Atoi(cols[2])
	if err != nil {
		return fmt.Errorf("score %q is not an integer", cols[2])
	}
	if queries != nil {
		if _, ok := queries.Index(qid); !ok {
			return fmt.Errorf("unknown query-id %q", qid)
		}
	}
	if corpus != nil {
		if _, ok := corpus.Index(did); !ok {
			return fmt.Errorf("unknown corpus-id %q", did)
		}
	}
	key := [2]string{qid, did}
	if first, dup := seen[key]; dup {
		return fmt.Errorf("query-id %q corpus-id %q judged twice (first at line %d)", qid, did, first)
	}
	seen[key] = line
	if q[qid] == nil {
		q[qid] = make(map[string]int)
	}
	q[qid][did] = score
	return nil
}

// Relevant returns the documents judged relevant (score > 0) to query qid,
// sorted by id (numerically when every id is an integer, else lexically).
func (q Qrels) Relevant(qid string) []string {
	var ids []string
	for did, s := range q[qid] {
		if s > 0 {
			ids = append(ids, did)
		}
	}
	sortIDs(ids)
	return ids
}

// IsRelevant reports whether document did is judged relevant (score > 0) to
// query qid.
func (q Qrels) IsRelevant(qid, did string) bool { return q[qid][did] > 0 }

// Grade returns the score of (qid, did) and whether the pair is judged.
func (q Qrels) Grade(qid, did string) (int, bool) {
	s, ok := q[qid][did]
	return s, ok
}

// QueryIDs returns the queries with at least one relevant document (score >
// 0), sorted numerically when every id is an integer, else lexically.
func (q Qrels) QueryIDs() []string {
	var ids []string
	for qid, docs := range q {
		for _, s := range docs {
			if s > 0 {
				ids = append(ids, qid)
				break
			}
		}
	}
	sortIDs(ids)
	return ids
}

// sortIDs sorts ids numerically when all parse as integers, else lexically.
func sortIDs(ids []string) {
	nums := make([]int64, len(ids))
	for i, id := range ids {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			slices.Sort(ids)
			return
		}
		nums[i] = n
	}
	idx := make([]int, len(ids))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if nums[a] != nums[b] {
			if nums[a] < nums[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(ids[a], ids[b]) // "7" before "07"
	})
	sorted := make([]string, len(ids))
	for i, j := range idx {
		sorted[i] = ids[j]
	}
	copy(ids, sorted)
}
