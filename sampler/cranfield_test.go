package sampler

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// cranfield is the real collection shipped in datasets/cranfield, read here without package data
// (kept independent), with a deterministic word-overlap ranking standing in for BM25.
type cranfield struct {
	queries  map[string]string
	docIDs   []string
	docTexts []string
	train    map[string]map[string]int
	ranking  map[string][]string // top 100 by word overlap, for every training query
}

var (
	cranOnce sync.Once
	cran     *cranfield
	cranErr  error
)

const cranDir = "../datasets/cranfield/"

func loadCranfield(t *testing.T) *cranfield {
	t.Helper()
	cranOnce.Do(func() { cran, cranErr = readCollection(cranDir) })
	if cranErr != nil {
		t.Fatal(cranErr)
	}
	return cran
}

// readCollection reads a BEIR directory (datasets/cranfield or datasets/cisi) and its train qrels.
func readCollection(dir string) (*cranfield, error) {
	c := &cranfield{queries: map[string]string{}, train: map[string]map[string]int{}, ranking: map[string][]string{}}
	type rec struct{ ID, Title, Text string }
	readJSONL := func(path string, f func(r rec)) error {
		fh, err := os.Open(path)
		if err != nil {
			return err
		}
		defer fh.Close()
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r struct {
				ID    string `json:"_id"`
				Title string `json:"title"`
				Text  string `json:"text"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				return err
			}
			f(rec{r.ID, r.Title, r.Text})
		}
		return sc.Err()
	}
	if err := readJSONL(dir+"queries.jsonl", func(r rec) { c.queries[r.ID] = r.Text }); err != nil {
		return nil, err
	}
	if err := readJSONL(dir+"corpus.jsonl", func(r rec) {
		c.docIDs = append(c.docIDs, r.ID)
		c.docTexts = append(c.docTexts, strings.TrimSpace(r.Title+" "+r.Text))
	}); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(dir + "qrels/train.tsv")
	if err != nil {
		return nil, err
	}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if i == 0 {
			continue
		}
		f := strings.Split(line, "\t")
		score, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, err
		}
		if c.train[f[0]] == nil {
			c.train[f[0]] = map[string]int{}
		}
		c.train[f[0]][f[1]] = score
	}

	// rank by the number of distinct shared words longer than 3 letters, ties by corpus order
	sets := make([]map[string]bool, len(c.docTexts))
	for i, t := range c.docTexts {
		sets[i] = map[string]bool{}
		for _, w := range strings.Fields(t) {
			if len(w) > 3 {
				sets[i][w] = true
			}
		}
	}
	for q := range c.train {
		var qw []string
		for _, w := range strings.Fields(c.queries[q]) {
			if len(w) > 3 && !slices.Contains(qw, w) {
				qw = append(qw, w)
			}
		}
		score := make([]int, len(c.docIDs))
		order := make([]int, len(c.docIDs))
		for i := range order {
			order[i] = i
			for _, w := range qw {
				if sets[i][w] {
					score[i]++
				}
			}
		}
		slices.SortStableFunc(order, func(a, b int) int { return score[b] - score[a] })
		for _, i := range order[:100] {
			c.ranking[q] = append(c.ranking[q], c.docIDs[i])
		}
	}
	return c, nil
}

func (c *cranfield) collection() Collection {
	return Collection{Queries: c.queries, DocIDs: c.docIDs, DocTexts: c.docTexts, Qrels: c.train}
}

func TestCranfieldFixture(t *testing.T) {
	c := loadCranfield(t)
	pairs, zero := 0, 0
	for _, rel := range c.train {
		for _, s := range rel {
			if s > 0 {
				pairs++
			} else {
				zero++
			}
		}
	}
	// datasets/cranfield/README.md: 1400 documents, 225 queries, 112 training queries;
	// qrels/train.tsv: 814 rows with score > 0 and 112 with score 0
	if len(c.docIDs) != 1400 || len(c.queries) != 225 || len(c.train) != 112 || pairs != 814 || zero != 112 {
		t.Fatalf("docs %d queries %d train queries %d relevant pairs %d zero rows %d", len(c.docIDs), len(c.queries), len(c.train), pairs, zero)
	}
}
