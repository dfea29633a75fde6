package experiment

import (
	"fmt"
	"slices"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/sampler"
)

// JudgedSplits is data.train_split followed by extra and eval.splits, each once, in that order:
// the splits a training kind loads with data.LoadJudged.
func JudgedSplits(rec *configs.Recipe, extra ...string) []string {
	splits := []string{rec.Data.TrainSplit}
	for _, s := range append(slices.Clone(extra), rec.Eval.Splits...) {
		if !slices.Contains(splits, s) {
			splits = append(splits, s)
		}
	}
	return splits
}

// LoadPassages reads the judged splits of data.dir (JudgedSplits) and every passage's text
// (with its title when data.title_field), in corpus order.
func LoadPassages(rec *configs.Recipe, extra ...string) (*data.Dataset, []string, error) {
	ds, err := data.LoadJudged(rec.Data.Dir, JudgedSplits(rec, extra...)...)
	if err != nil {
		return nil, nil, err
	}
	passages := make([]string, ds.Corpus.Len())
	for i := range passages {
		passages[i] = ds.Corpus.Passage(i, rec.Data.TitleField)
	}
	return ds, passages, nil
}

// RankFunc returns the ids of the n best passages for a query, best first.
type RankFunc func(qid, text string, n int) ([]string, error)

// BM25Rank ranks by bm25.
func BM25Rank(bm25 *index.BM25) RankFunc {
	return func(_, text string, n int) ([]string, error) {
		hits := bm25.Search(text, n)
		ids := make([]string, len(hits))
		for i, h := range hits {
			ids[i] = h.DocID
		}
		return ids, nil
	}
}

// MineSampler mines hard negatives for the training queries of data.train_split (the passages
// ranked sampler.negative_window[0] .. [1] by rank, judged passages excluded, hard_negatives of
// them per example by negative_strategy) and returns the batch sampler over the examples
// (train.batch_size; false negatives kept out of a batch, or let in and masked in Batch.Mask
// when sampler.false_negatives = "mask"), with the mining's statistics. The passage texts are
// passages, or text(i) when passages is nil (a streamed corpus). An error of the mining or the
// sampler names the recipe sections that do not fit the qrels; rank's errors come as they are.
func MineSampler(rec *configs.Recipe, ds *data.Dataset, rank RankFunc, passages []string, text func(int) string, seed uint64) (*sampler.Sampler, sampler.MineStats, error) {
	qrels := ds.Qrels[rec.Data.TrainSplit]
	lo, hi := rec.Sampler.NegativeWindow[0], rec.Sampler.NegativeWindow[1]
	ranking, queries := map[string][]string{}, map[string]string{}
	for _, qid := range qrels.QueryIDs() {
		q, _ := ds.Queries.Text(qid)
		queries[qid] = q
		ids, err := rank(qid, q, hi)
		if err != nil {
			return nil, sampler.MineStats{}, err
		}
		ranking[qid] = ids
	}
	examples, stats, err := sampler.Mine(qrels, ranking, sampler.MineOptions{
		Negatives: rec.Sampler.HardNegatives, Lo: lo, Hi: hi, Strategy: sampler.Strategy(rec.Sampler.NegativeStrategy), Seed: seed})
	if err == nil {
		var smp *sampler.Sampler
		smp, err = sampler.New(sampler.Collection{Queries: queries, DocIDs: ds.Corpus.IDs, DocTexts: passages, DocText: text, Qrels: qrels},
			examples, sampler.Options{BatchSize: rec.Train.BatchSize, HardNegatives: rec.Sampler.HardNegatives, Seed: seed,
				MaskFalseNegatives: rec.Sampler.FalseNegatives == "mask"})
		if err == nil {
			return smp, stats, nil
		}
	}
	return nil, stats, fmt.Errorf("[train]/[sampler] do not fit the %s qrels of %s: %w", rec.Data.TrainSplit, rec.Data.Dir, err)
}
