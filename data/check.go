package data

import (
	"fmt"
	"path/filepath"
	"slices"
)

// LoadJudged is Load followed by CheckJudged: what a training run reads, where a split that
// judges nothing relevant can neither train nor be evaluated.
func LoadJudged(dir string, splits ...string) (*Dataset, error) {
	d, err := Load(dir, splits...)
	if err != nil {
		return nil, err
	}
	if err := d.CheckJudged(); err != nil {
		return nil, err
	}
	return d, nil
}

// CheckJudged checks that the qrels of every loaded split judge at least one document relevant
// (score > 0). The error names the qrels file:
//
//	/abs/data/qrels/test.tsv: no query has a relevant document (12 rows, all scores <= 0)
func (d *Dataset) CheckJudged() error {
	splits := make([]string, 0, len(d.Qrels))
	for s := range d.Qrels {
		splits = append(splits, s)
	}
	slices.Sort(splits)
	for _, s := range splits {
		rows := 0
		relevant := false
		for _, docs := range d.Qrels[s] {
			rows += len(docs)
			for _, score := range docs {
				relevant = relevant || score > 0
			}
		}
		if relevant {
			continue
		}
		path := filepath.Join(d.Dir, "qrels", s+".tsv")
		if rows == 0 {
			return fmt.Errorf("%s: no query has a relevant document (no judgement rows, only the header)", path)
		}
		if rows == 1 {
			return fmt.Errorf("%s: no query has a relevant document (1 row, its score <= 0)", path)
		}
		return fmt.Errorf("%s: no query has a relevant document (%d rows, all scores <= 0)", path, rows)
	}
	return nil
}
