package repluglm

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/ragtrain/ragtrain/internal/teachercache"
)

// score fills lmLL, each training claim's k log-likelihoods log P_LM(claim | abstract, x): from
// <run>/lm_scores.tsv where it holds all k pairs of a claim (the file is verified first, and
// refused when it is of another LM or layout, cut short or edited), else from the LM, one claim
// (its k abstracts in one batch) at a time, with a progress bar; the file is rewritten
// atomically every replug_lm.cache_every scored claims and at the end, so an interrupted run
// keeps what it scored. replug_lm.lm_cache, when set, is read first (verified the same way).
func (r *lmRun) score(ctx context.Context) error {
	if len(r.qs) == 0 {
		return nil
	}
	c, o := r.c, r.o
	path := filepath.Join(r.dir, CacheFile)
	h := teachercache.Header{TeacherSHA256: cacheKey(r.lmSHA, c), MaxLength: c.AbstractTokens, Teacher: c.LM}
	cache := map[teachercache.Pair]float32{}
	for _, p := range []string{c.LMCache, path} { // another run's scores, then this run's own
		if p == "" {
			continue
		}
		if _, err := teachercache.Read(p, h.TeacherSHA256, cache); err != nil {
			return fmt.Errorf("replug_lm: the LM score cache (of replug_lm.lm, abstract_tokens, claim_tokens, instruction): %w", err)
		}
	}
	sc, err := newScorer(r.lm, r.lmTok, c)
	if err != nil {
		return err
	}
	r.lmLL = make([][]float32, len(r.qs))
	var todo []int
	cached := 0
	for i := range r.qs {
		ll := make([]float32, c.TopK)
		all := true
		for k, row := range r.cands[i] {
			v, ok := cache[teachercache.Pair{r.claims[i], r.ids[row]}]
			all = all && ok
			ll[k] = v
		}
		if all {
			r.lmLL[i], cached = ll, cached+c.TopK
		} else {
			todo = append(todo, i)
		}
	}
	start := time.Now()
	bar := progressbar.NewOptions(len(todo), progressbar.OptionSetWriter(o.Progress), progressbar.OptionSetDescription("lm scores"),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(24), progressbar.OptionSetPredictTime(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(o.Progress) }))
	dirty := 0
	for n, i := range todo {
		if err := ctx.Err(); err != nil {
			if dirty > 0 {
				if werr := teachercache.Write(path, h, cache); werr != nil {
					return werr
				}
			}
			return err
		}
		abstracts := make([]string, c.TopK)
		for k, row := range r.cands[i] {
			abstracts[k] = r.texts[row]
		}
		ll, err := sc.score(abstracts, r.qs[i].Query)
		if err != nil {
			return fmt.Errorf("claim %s: %w", r.claims[i], err)
		}
		r.lmLL[i] = make([]float32, c.TopK)
		for k, v := range ll {
			r.lmLL[i][k] = float32(v)
			cache[teachercache.Pair{r.claims[i], r.ids[r.cands[i][k]]}] = float32(v)
		}
		dirty++
		if dirty == c.CacheEvery || n == len(todo)-1 {
			if err := teachercache.Write(path, h, cache); err != nil {
				return err
			}
			dirty = 0
		}
		_ = bar.Add(1)
	}
	if len(todo) > 0 {
		fmt.Fprintf(o.Out, "lm: %d claims scored in %.1fs (%.2fs per (claim, abstract) pass)\n", len(todo), time.Since(start).Seconds(),
			time.Since(start).Seconds()/float64(len(todo)*c.TopK))
	}
	sc.report(o.Out, cached)
	return nil
}
