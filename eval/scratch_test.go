package eval_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
)

func TestScratch(t *testing.T) {
	for _, a := range luceneAnchors {
		run, _ := eval.ReadTREC(filepath.Join("testdata", "lucene-bm25-english-"+a.coll+".run"))
		qrels := readQrels(t, filepath.Join("..", "datasets", a.coll, "qrels", a.split+".tsv"))
		// variant: break ties by rank order: perturb scores
		for name, f := range map[string]func([]index.Hit) []index.Hit{
			"given": func(h []index.Hit) []index.Hit {
				o := slices.Clone(h)
				for i := range o { o[i].Score = float64(len(o) - i) }
				return o
			},
			"numdesc": func(h []index.Hit) []index.Hit {
				o := slices.Clone(h)
				slices.SortStableFunc(o, func(x, y index.Hit) int {
					if float32(x.Score) != float32(y.Score) { if x.Score > y.Score {return -1}; return 1 }
					a, _ := strconv.Atoi(x.DocID); b, _ := strconv.Atoi(y.DocID); return b - a })
				for i := range o { o[i].Score = float64(len(o) - i) }
				return o
			},
			"trec": func(h []index.Hit) []index.Hit { return h },
		} {
			r2 := eval.Run{}
			for q, h := range run { r2[q] = f(h) }
			got, _ := eval.Evaluate(r2, qrels, metrics)
			fmt.Printf("%s %s %-8s", a.coll, a.split, name)
			for _, m := range metrics { fmt.Printf(" %s %.5f (%.4f)", m, got[m], a.want[m]) }
			fmt.Println()
		}
	}
}
