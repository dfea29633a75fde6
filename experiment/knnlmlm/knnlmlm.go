package knnlmlm

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index/ann"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/knnlm"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// KindName is the recipe kind.
const KindName = "knnlm_lm"

// PhaseName names the datastore build for Options.InterruptPhase (InterruptAt: shards built
// by this run) in the tests of resume.
const PhaseName = "datastore"

func init() {
	experiment.Register(KindName, run, configs.KindSpec{Sections: []string{"data"}, Own: []configs.Section{section}})
}

// lmRun is the state a run hands from stage to stage.
type lmRun struct {
	rec  *configs.Recipe
	c    *Config
	o    experiment.Options
	dir  string
	log  *trainer.Log
	lm   *model.Llama
	tok  *tokenize.GGUFTokenizer
	dec  *model.LlamaDecoder
	sha  string
	ds   *data.Dataset
	cut  int // abstracts cut at abstract_tokens
	seqs map[string][]int

	storeIDs       []string // the datastore's abstracts, corpus order
	devIDs, tstIDs []string // the held-out abstracts scored, corpus order
	heldOut        map[string]bool
	store          *knnlm.Store
	search         knnlm.Searcher
	builtSecs      float64 // forward passes of this run's build
	builtPairs     int
	scored         int // held-out abstracts this run has scored (dev and test)
	metrics        map[string]float64
}

func run(ctx context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	r := &lmRun{rec: rec, c: Of(rec), o: o, metrics: map[string]float64{}}
	if o.ResumeDir != "" && experiment.Finished(o.ResumeDir) {
		fmt.Fprintf(o.Out, "resume: %s has finished (it holds %s); nothing to do\n", o.ResumeDir, experiment.MetricsFile)
		return o.ResumeDir, nil
	}
	defer func() {
		if r.log != nil {
			r.log.Close()
		}
	}()
	for _, stage := range []func() error{r.load, r.split, r.open, func() error { return r.build(ctx) }, r.index, func() error { return r.evaluate(ctx) }} {
		if err := stage(); err != nil {
			return r.dir, err
		}
	}
	return r.dir, nil
}

// load reads the corpus and the dev and test judgments, and the frozen LM.
func (r *lmRun) load() error {
	rec, c := r.rec, r.c
	if rec.Data.DevSplit == "" || rec.Data.TestSplit == "" {
		return rec.KeyError("data.dev_split", "the kNN-LM needs a dev split (λ is chosen on it) and a test split")
	}
	var err error
	if r.ds, err = data.Load(rec.Data.Dir, rec.Data.DevSplit, rec.Data.TestSplit); err != nil {
		return err
	}
	if r.sha, err = bounded.SHA256(c.LM); err != nil {
		return fmt.Errorf("knnlm_lm.lm: %w", err)
	}
	if r.lm, r.tok, err = export.OpenLlamaGGUF(c.LM); err != nil {
		return fmt.Errorf("knnlm_lm.lm: %w", err)
	}
	if c.AbstractTokens > r.lm.Cfg.MaxPosition {
		return rec.KeyError("knnlm_lm.abstract_tokens", "%d, over the LM's context of %d", c.AbstractTokens, r.lm.Cfg.MaxPosition)
	}
	if r.dec, err = model.NewLlamaDecoder(r.lm); err != nil {
		return err
	}
	return nil
}

// cited is the abstracts split's claims cite.
func (r *lmRun) cited(split string) map[string]bool {
	out := map[string]bool{}
	for _, docs := range r.ds.Qrels[split] {
		for d := range docs {
			out[d] = true
		}
	}
	return out
}

// split puts every abstract a dev or test claim cites out of the datastore (an abstract cited
// by both is a test abstract), keeps the first corpus_cap others (corpus order) for the
// datastore and the first dev_docs / test_docs held-out ones for scoring, and tokenizes them;
// the datastore's size is checked against knnlm_lm.max_datastore_bytes before any pass.
func (r *lmRun) split() error {
	rec, c := r.rec, r.c
	dev, test := r.cited(rec.Data.DevSplit), r.cited(rec.Data.TestSplit)
	r.heldOut = map[string]bool{}
	for i := range r.ds.Corpus.Len() {
		id := r.ds.Corpus.IDs[i]
		switch {
		case test[id]:
			r.heldOut[id] = true
			if c.TestDocs == 0 || len(r.tstIDs) < c.TestDocs {
				r.tstIDs = append(r.tstIDs, id)
			}
		case dev[id]:
			r.heldOut[id] = true
			if c.DevDocs == 0 || len(r.devIDs) < c.DevDocs {
				r.devIDs = append(r.devIDs, id)
			}
		case c.CorpusCap == 0 || len(r.storeIDs) < c.CorpusCap:
			r.storeIDs = append(r.storeIDs, id)
		}
	}
	if len(r.devIDs) == 0 || len(r.tstIDs) == 0 || len(r.storeIDs) == 0 {
		return rec.KeyError("data.dir", "%d datastore, %d dev and %d test abstracts: each must be at least 1", len(r.storeIDs), len(r.devIDs), len(r.tstIDs))
	}
	r.seqs = map[string][]int{}
	pairs := int64(0)
	for _, ids := range [][]string{r.storeIDs, r.devIDs, r.tstIDs} {
		for _, id := range ids {
			i, _ := r.ds.Corpus.Index(id)
			s := r.tok.Encode(r.ds.Corpus.Passage(i, rec.Data.TitleField))
			if len(s) > c.AbstractTokens {
				s, r.cut = s[:c.AbstractTokens], r.cut+1
			}
			r.seqs[id] = s
		}
	}
	for _, id := range r.storeIDs {
		pairs += int64(max(len(r.seqs[id])-1, 0))
	}
	per := int64(4)
	if c.Precision == knnlm.Float16 {
		per = 2
	}
	bytes := pairs * (int64(r.lm.Cfg.Hidden)*per + 8)
	if bytes > c.MaxDatastoreBytes || pairs > knnlm.MaxStoreRows {
		return rec.KeyError("knnlm_lm.max_datastore_bytes", "the datastore would hold %d pairs of %d-value %s keys, %d bytes: over the bound %d (lower knnlm_lm.corpus_cap or abstract_tokens)",
			pairs, r.lm.Cfg.Hidden, c.Precision, bytes, c.MaxDatastoreBytes)
	}
	fmt.Fprintf(r.o.Out, "knnlm_lm: LM %s (%d layers, H = %d, V = %d); datastore %d abstracts (%d pairs, %.1f MB of %s keys, norms and values); held out: %d dev (cited by dev claims, not by test ones) and %d test abstracts (%d and %d scored); %d abstracts cut at %d tokens\n",
		c.LM, r.lm.Cfg.Layers, r.lm.Cfg.Hidden, r.lm.Cfg.Vocab, len(r.storeIDs), pairs, float64(bytes)/1e6, c.Precision,
		devOnly(dev, test), len(test), len(r.devIDs), len(r.tstIDs), r.cut, c.AbstractTokens)
	return nil
}

// devOnly is the abstracts dev claims cite and no test claim does.
func devOnly(dev, test map[string]bool) int {
	n := 0
	for d := range dev {
		if !test[d] {
			n++
		}
	}
	return n
}

// open creates (or reopens) the run directory and its log.
func (r *lmRun) open() error {
	var err error
	if r.dir, err = experiment.PrepareRunDir(r.rec, r.o); err != nil {
		return err
	}
	return nil
}

// build fills the datastore (knnlm.BuildLlama: key = the last layer's MLP input at position t,
// value = token t+1) shard by shard: shards a resumed run's manifest lists are read back
// (verified by SHA-256), the others built and written, each shard then the manifest atomically.
func (r *lmRun) build(ctx context.Context) error {
	c, o := r.c, r.o
	dir := filepath.Join(r.dir, DatastoreDir)
	if err := ensureDir(dir); err != nil {
		return err
	}
	hash := datastoreHash(r.sha, c, r.rec.Data.TitleField, r.storeIDs)
	m, err := readManifest(dir, hash)
	if err != nil {
		return err
	}
	logPath := filepath.Join(r.dir, experiment.LogFile)
	if m == nil {
		m = &manifest{Version: layoutVersion, Hash: hash, Dim: r.lm.Cfg.Hidden, Precision: c.Precision, ShardDocs: c.ShardDocs}
		r.log, err = trainer.OpenLog(logPath)
		if err == nil && r.o.ResumeDir != "" {
			r.log.Close()
			r.log, err = trainer.OpenLogAt(logPath, 0)
		}
	} else {
		r.log, err = trainer.OpenLogAt(logPath, m.LogBytes)
	}
	if err != nil {
		return err
	}
	nShards := (len(r.storeIDs) + c.ShardDocs - 1) / c.ShardDocs
	if len(m.Shards) > nShards {
		return fmt.Errorf("%s: %d shards, this run's datastore has %d", filepath.Join(dir, ManifestFile), len(m.Shards), nShards)
	}
	if r.store, err = knnlm.NewStore(r.lm.Cfg.Hidden, c.Precision); err != nil {
		return err
	}
	for _, e := range m.Shards {
		if err := loadShard(dir, e, r.store); err != nil {
			return err
		}
	}
	if len(m.Shards) > 0 {
		fmt.Fprintf(o.Out, "resume: datastore: %d of %d shards (%d pairs) read from %s (verified)\n", len(m.Shards), nShards, r.store.Len(), dir)
	}
	b := experiment.ProgressBar(o.Progress, len(r.storeIDs), "datastore")
	_ = b.Add(min(len(m.Shards)*c.ShardDocs, len(r.storeIDs)))
	built := 0
	for s := len(m.Shards); s < nShards; s++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if o.InterruptPhase == PhaseName && built == o.InterruptAt {
			return fmt.Errorf("datastore: interrupted after %d shards", s)
		}
		ids := r.storeIDs[s*c.ShardDocs : min((s+1)*c.ShardDocs, len(r.storeIDs))]
		seqs := make([][]int, len(ids))
		for i, id := range ids {
			seqs[i] = r.seqs[id]
		}
		start := time.Now()
		st, err := knnlm.BuildLlama(r.dec, seqs, c.Precision, func(n int) { _ = b.Add(n) })
		if err != nil {
			return err
		}
		secs := time.Since(start).Seconds()
		r.builtSecs, r.builtPairs = r.builtSecs+secs, r.builtPairs+st.Len()
		e, raw, err := writeShard(dir, s, len(ids), st)
		if err != nil {
			return err
		}
		if _, err := decodeShard(e.File, raw, r.store); err != nil { // the store is what the files hold
			return err
		}
		if err := r.log.Write(map[string]any{"stage": "datastore", "shard": s, "docs": len(ids), "pairs": st.Len(), "seconds": secs}); err != nil {
			return err
		}
		m.Shards = append(m.Shards, e)
		m.LogBytes = r.log.Size()
		if err := writeManifest(dir, m); err != nil {
			return err
		}
		built++
	}
	_ = b.Finish()
	if r.builtPairs > 0 {
		fmt.Fprintf(o.Out, "datastore: %d pairs built in %.1fs (%.4f s per token), %d in all\n", r.builtPairs, r.builtSecs, r.builtSecs/float64(r.builtPairs), r.store.Len())
	}
	return nil
}

// index is the searcher over the store: the store itself (exact) or its HNSW graph.
func (r *lmRun) index() error {
	if r.c.Search == "exact" {
		r.search = r.store
		return nil
	}
	start := time.Now()
	h, err := knnlm.NewHNSW(r.store, ann.Params{M: r.c.HNSWM, EfConstruction: r.c.HNSWEfConstruction, EfSearch: r.c.HNSWEfSearch, Seed: uint64(r.rec.Seed)})
	if err != nil {
		return err
	}
	r.search = h
	fmt.Fprintf(r.o.Out, "hnsw: %d keys indexed in %.1fs\n", r.store.Len(), time.Since(start).Seconds())
	r.metrics["datastore/hnsw_seconds"] = time.Since(start).Seconds()
	return nil
}

// freqBins split the held-out target tokens by their count among the datastore's values.
var freqBins = []struct {
	name   string
	lo, hi int
}{{"0", 0, 1}, {"1-9", 1, 10}, {"10-99", 10, 100}, {"100-999", 100, 1000}, {"1000-9999", 1000, 10000}, {">=10000", 10000, math.MaxInt}}

func binOf(count int) int {
	for i, b := range freqBins {
		if count >= b.lo && count < b.hi {
			return i
		}
	}
	return len(freqBins) - 1
}

// grid accumulates, per frequency bin, the negative log-probabilities of the held-out tokens
// under every (temperature, λ) of the recipe's grids; λ index 0 is λ = 0, the LM alone.
type grid struct {
	temps, lambdas []float64
	nll            [][][]float64 // [bin][temp][lambda]
	n              []int         // tokens per bin
	nearest        float64       // the sum of the nearest key's squared distance over the tokens
}

func newGrid(temps, lambdas []float64) *grid {
	g := &grid{temps: temps, lambdas: lambdas, n: make([]int, len(freqBins))}
	g.nll = make([][][]float64, len(freqBins))
	for b := range g.nll {
		g.nll[b] = make([][]float64, len(temps))
		for t := range temps {
			g.nll[b][t] = make([]float64, len(lambdas))
		}
	}
	return g
}

// add scores one token: target, log p_LM(target) and its neighbours.
func (g *grid) add(bin, target int, logLM float64, nb []knnlm.Neighbor) {
	g.n[bin]++
	for t, T := range g.temps {
		pk := knnlm.KNNProbs(nb, T)[target]
		for l, lam := range g.lambdas {
			g.nll[bin][t][l] -= knnlm.Mix(pk, logLM, lam)
		}
	}
}

// ppl is the perplexity at (t, l) over the bins keep selects (all when nil); NaN for none.
func (g *grid) ppl(t, l int, keep func(bin int) bool) float64 {
	var s float64
	n := 0
	for b := range g.n {
		if keep == nil || keep(b) {
			s += g.nll[b][t][l]
			n += g.n[b]
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return math.Exp(s / float64(n))
}

// scoreSplit runs the LM over the held-out abstracts ids, searches the k nearest keys of every
// position's key and accumulates the grid; it returns the tokens, the LM's and the search's
// seconds (of every process that scored the split). After each abstract the sums are written
// to <run>/scoring/<name>.json, from which a resumed run continues.
func (r *lmRun) scoreSplit(ctx context.Context, name string, ids []string, g *grid, counts map[int32]int) (int, float64, float64, error) {
	st, err := readScore(r.dir, name, r.scoreHash(name, ids, g), g, len(ids))
	if err != nil {
		return 0, 0, 0, err
	}
	if st.Done > 0 {
		fmt.Fprintf(r.o.Out, "resume: scoring %s: %d of %d abstracts (%d tokens) read from %s\n", name, st.Done, len(ids), st.Tokens, scorePath(r.dir, name))
	}
	r.dec.KeepKeys = true
	defer func() { r.dec.KeepKeys = false }()
	lp, scratch := make([]float64, r.lm.Cfg.Vocab), make([]float64, r.lm.Cfg.Vocab)
	b := experiment.ProgressBar(r.o.Progress, len(ids), name)
	_ = b.Add(st.Done)
	for i := st.Done; i < len(ids); i++ {
		if err := ctx.Err(); err != nil {
			return 0, 0, 0, err
		}
		if r.o.InterruptPhase == ScorePhaseName && r.scored == r.o.InterruptAt {
			return 0, 0, 0, fmt.Errorf("scoring %s: interrupted after %d abstracts", name, i)
		}
		r.scored++
		if seq := r.seqs[ids[i]]; len(seq) >= 2 {
			if err := r.scoreAbstract(ids[i], seq, g, st, counts, lp, scratch); err != nil {
				return 0, 0, 0, err
			}
		}
		st.Done = i + 1
		if err := writeScore(r.dir, name, st, g); err != nil {
			return 0, 0, 0, err
		}
		_ = b.Add(1)
	}
	_ = b.Finish()
	return st.Tokens, st.LMSeconds, st.SearchSeconds, nil
}

// scoreAbstract runs the LM over abstract id's tokens seq (at least 2), searches the k nearest
// keys of every position's key and adds each predicted token to g; st counts its tokens and
// seconds. lp and scratch are [Vocab] buffers.
func (r *lmRun) scoreAbstract(id string, seq []int, g *grid, st *scoreState, counts map[int32]int, lp, scratch []float64) error {
	H, V := r.lm.Cfg.Hidden, r.lm.Cfg.Vocab
	start := time.Now()
	cache, err := r.dec.NewCache(len(seq))
	if err != nil {
		return err
	}
	out, err := r.dec.Forward([]*model.LlamaCache{cache}, [][]int{seq}, true)
	if err != nil {
		return fmt.Errorf("abstract %s: %w", id, err)
	}
	logits := out[0]
	logLM := make([]float64, len(seq)-1)
	for t := range logLM {
		for j, x := range logits[t*V : (t+1)*V] {
			scratch[j] = float64(x)
		}
		knnlm.LogSoftmax(lp, scratch)
		logLM[t] = lp[seq[t+1]]
	}
	st.LMSeconds += time.Since(start).Seconds()
	start = time.Now()
	nbs := r.search.Search(r.dec.Keys[:(len(seq)-1)*H], r.c.K)
	st.SearchSeconds += time.Since(start).Seconds()
	for t, nb := range nbs {
		if len(nb) > 0 {
			g.nearest += float64(nb[0].Dist)
		}
		g.add(binOf(counts[int32(seq[t+1])]), seq[t+1], logLM[t], nb)
	}
	st.Tokens += len(seq) - 1
	return nil
}

// evaluate scores the dev and test abstracts, chooses (temperature, λ) by dev perplexity, and
// writes the test perplexity at that choice against λ = 0, by token frequency, with the costs.
func (r *lmRun) evaluate(ctx context.Context) error {
	c, o, m := r.c, r.o, r.metrics
	counts := map[int32]int{}
	for _, v := range r.store.Values {
		counts[v]++
	}
	lambdas := []float64{0}
	for _, l := range c.Lambdas {
		if l != 0 {
			lambdas = append(lambdas, l)
		}
	}
	sort.Float64s(lambdas)
	dev, test := newGrid(c.Temperatures, lambdas), newGrid(c.Temperatures, lambdas)
	devTok, devLM, devSearch, err := r.scoreSplit(ctx, "dev", r.devIDs, dev, counts)
	if err != nil {
		return err
	}
	testTok, testLM, testSearch, err := r.scoreSplit(ctx, "test", r.tstIDs, test, counts)
	if err != nil {
		return err
	}
	bt, bl := 0, 0
	for t := range c.Temperatures {
		for l := range lambdas {
			if dev.ppl(t, l, nil) < dev.ppl(bt, bl, nil) {
				bt, bl = t, l
			}
			if err := r.log.Write(map[string]any{"stage": "eval", "temperature": c.Temperatures[t], "lambda": lambdas[l],
				"ppl_dev": dev.ppl(t, l, nil), "ppl_test": test.ppl(t, l, nil)}); err != nil {
				return err
			}
		}
	}
	T, lam := c.Temperatures[bt], lambdas[bl]
	m["lm/ppl_dev"], m["lm/ppl_test"] = dev.ppl(0, 0, nil), test.ppl(0, 0, nil)
	m["knnlm/ppl_dev"], m["knnlm/ppl_test"] = dev.ppl(bt, bl, nil), test.ppl(bt, bl, nil)
	m["knnlm/lambda"], m["knnlm/temperature"], m["knnlm/k"] = lam, T, float64(c.K)
	for l, x := range lambdas {
		m[fmt.Sprintf("knnlm/ppl_test.lambda=%g", x)] = test.ppl(bt, l, nil)
		m[fmt.Sprintf("knnlm/ppl_dev.lambda=%g", x)] = dev.ppl(bt, l, nil)
	}
	for i, b := range freqBins {
		keep := func(bin int) bool { return bin == i }
		m["eval/test_tokens.freq"+b.name] = float64(test.n[i])
		if test.n[i] > 0 {
			m["lm/ppl_test.freq"+b.name] = test.ppl(0, 0, keep)
			m["knnlm/ppl_test.freq"+b.name] = test.ppl(bt, bl, keep)
		}
	}
	m["eval/dev_docs"], m["eval/test_docs"] = float64(len(r.devIDs)), float64(len(r.tstIDs))
	m["eval/dev_tokens"], m["eval/test_tokens"] = float64(devTok), float64(testTok)
	m["knnlm/nearest_dist_test"] = test.nearest / float64(max(testTok, 1))
	m["eval/abstracts_cut"] = float64(r.cut)
	m["datastore/docs"], m["datastore/pairs"] = float64(len(r.storeIDs)), float64(r.store.Len())
	m["datastore/bytes"] = float64(r.store.Bytes())
	m["datastore/index_bytes"] = float64(r.search.Bytes())
	var params int64
	for _, p := range r.lm.Params() {
		params += int64(p.Value.Shape().TotalSize())
	}
	fi, err := os.Stat(c.LM)
	if err != nil {
		return err
	}
	m["lm/params"], m["lm/bytes_float32"], m["lm/bytes_file"] = float64(params), float64(4*params), float64(fi.Size())
	m["knnlm/searches_per_token"] = 1
	toks := float64(devTok + testTok)
	m["lm/seconds_per_token"] = (devLM + testLM) / toks
	m["knnlm/search_seconds_per_token"] = (devSearch + testSearch) / toks
	m["knnlm/seconds_per_token"] = (devLM + testLM + devSearch + testSearch) / toks
	if r.builtPairs > 0 {
		m["datastore/build_seconds_per_token"] = r.builtSecs / float64(r.builtPairs)
	}
	fmt.Fprintf(o.Out, "\nheld-out perplexity (k = %d, %s search, %s keys; T and λ chosen on dev: T = %g, λ = %g):\n", c.K, c.Search, c.Precision, T, lam)
	fmt.Fprintf(o.Out, "mean squared L2 distance to the nearest key (test): %.2f\n", m["knnlm/nearest_dist_test"])
	fmt.Fprintf(o.Out, "%-8s %10s %10s\n", "λ", "dev ppl", "test ppl")
	for l, x := range lambdas {
		fmt.Fprintf(o.Out, "%-8g %10.3f %10.3f\n", x, dev.ppl(bt, l, nil), test.ppl(bt, l, nil))
	}
	fmt.Fprintf(o.Out, "\ntest by the target token's count among the datastore's values:\n%-10s %8s %10s %10s\n", "count", "tokens", "LM ppl", "kNN-LM ppl")
	for i, b := range freqBins {
		if test.n[i] > 0 {
			fmt.Fprintf(o.Out, "%-10s %8d %10.3f %10.3f\n", b.name, test.n[i], m["lm/ppl_test.freq"+b.name], m["knnlm/ppl_test.freq"+b.name])
		}
	}
	fmt.Fprintf(o.Out, "\ncost: datastore %d pairs, %.1f MB (%s keys; searcher %.1f MB) against the LM's %.1f MB of float32 parameters (%.1f MB file); 1 search per token; %.4f s per token (LM %.4f, search %.4f)\n",
		r.store.Len(), float64(r.store.Bytes())/1e6, c.Precision, float64(r.search.Bytes())/1e6, float64(4*params)/1e6, float64(fi.Size())/1e6,
		m["knnlm/seconds_per_token"], m["lm/seconds_per_token"], m["knnlm/search_seconds_per_token"])
	if err := r.log.Write(map[string]any{"stage": "chosen", "temperature": T, "lambda": lam, "ppl_test": m["knnlm/ppl_test"], "lm_ppl_test": m["lm/ppl_test"]}); err != nil {
		return err
	}
	return experiment.WriteMetrics(r.dir, m)
}
