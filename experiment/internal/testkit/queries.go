package testkit

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/data"
)

// SplitQueries writes the queries of a split's qrels (those a run evaluates) as a BEIR
// queries.jsonl at path, in reverse order (a TREC file must not depend on the file's order).
func SplitQueries(t *testing.T, dataDir, split, path string) {
	t.Helper()
	ds, err := data.LoadJudged(dataDir, split)
	if err != nil {
		t.Fatal(err)
	}
	ids := ds.Qrels[split].QueryIDs()
	var b strings.Builder
	for i := len(ids) - 1; i >= 0; i-- {
		text, _ := ds.Queries.Text(ids[i])
		line, _ := json.Marshal(map[string]string{"_id": ids[i], "text": text})
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
