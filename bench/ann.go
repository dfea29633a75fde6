package bench

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ragtrain/ragtrain/data/synth"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/index/ann"
)

// ANNWorkload is the name of the approximate-search workload (issue 17). It has no peer and runs
// in the bench process itself (RunANN), not in workers: it measures exact search, the HNSW
// build and HNSW search at several efSearch values on the same vectors.
const ANNWorkload = "ann"

// ANNOptions configure the ann workload: vectors are the random projection of the hashed
// tf-idf bag of words of a synthetic collection (package data/synth), queries its queries.
type ANNOptions struct {
	Passages, Queries int    // N and Q of the synthetic collection
	Seed              uint64 // of the collection and the projection
	Dim               int    // projected dimension (384)
	Buckets           int    // hashed bag-of-words width (65,536)
	Params            ann.Params
	EfSearch          []int // efSearch values searched
	Threads           int   // GOMAXPROCS while measuring
	Command           string
	JSON              string // also write the result there ("" for none)
	Out, Log          io.Writer
}

// DefaultANNOptions: 100,000 passages, 500 queries, 384 dimensions, M 32, efConstruction 128,
// efSearch 32 to 2048. M is twice ann.DefaultParams' because the queries, a few words each, lie
// far from every passage, where a denser graph pays (recall@10 0.94 against 0.86 at ef 256 on
// 20,000 passages, docs/results/ann.md).
func DefaultANNOptions() ANNOptions {
	p := ann.DefaultParams()
	p.M, p.EfConstruction, p.Seed = 32, 128, 42
	return ANNOptions{Passages: 100000, Queries: 500, Seed: 42, Dim: 384, Buckets: 1 << 16, Params: p,
		EfSearch: []int{32, 64, 128, 256, 512, 1024, 2048}, Threads: 2}
}

// ANNResult is what RunANN measured. Times are wall-clock seconds on Threads threads; memory
// is the process's peak resident set (VmHWM, reset before each phase where the kernel allows)
// in KiB.
type ANNResult struct {
	Command        string        `json:"command"`
	Passages       int           `json:"passages"`
	Queries        int           `json:"queries"`
	Dim            int           `json:"dim"`
	Threads        int           `json:"threads"`
	M              int           `json:"m"`
	EfConstruction int           `json:"ef_construction"`
	EncodeSeconds  float64       `json:"encode_seconds"`
	EncodeRSS      int64         `json:"encode_peak_rss_kib"`
	ExactRSS       int64         `json:"exact_peak_rss_kib"`
	BuildSeconds   float64       `json:"build_seconds"`
	BuildCPU       float64       `json:"build_cpu_seconds"`
	BuildRSS       int64         `json:"build_peak_rss_kib"`
	IndexBytes     int64         `json:"index_bytes"`
	RSSReset       bool          `json:"rss_reset"` // whether VmHWM could be reset between phases
	Sets           []ANNQuerySet `json:"query_sets"`
	LoadStart      float64       `json:"load_start"`
	LoadEnd        float64       `json:"load_end"`
}

// ANNQuerySet is one set of query vectors: exact search's time (top 100, batched) and HNSW's
// runs. The synthetic queries, a few words each, lie far from every passage (the hard case for
// graph search); held-out passages, generated past the N indexed, lie among them as the
// queries of the usual ANN benchmarks do.
type ANNQuerySet struct {
	Name         string   `json:"name"`
	ExactSeconds float64  `json:"exact_seconds"`
	ExactQPS     float64  `json:"exact_qps"`
	ExactCPUms   float64  `json:"exact_cpu_ms_per_query"`
	Runs         []ANNRun `json:"runs"`
	vecs         []float32
	exact        [][]index.Hit
}

// ANNRun is HNSW search at one efSearch: queries per second, CPU time per query (all threads)
// and recall against exact search at k = 10 (searching max(ef, 10) candidates) and k = 100
// (max(ef, 100)).
type ANNRun struct {
	EfSearch  int     `json:"ef_search"`
	QPS10     float64 `json:"qps_k10"`
	CPUms10   float64 `json:"cpu_ms_per_query_k10"`
	Recall10  float64 `json:"recall_at_10"`
	QPS100    float64 `json:"qps_k100"`
	CPUms100  float64 `json:"cpu_ms_per_query_k100"`
	Recall100 float64 `json:"recall_at_100"`
}

// timed runs f and returns its wall-clock and process CPU seconds.
func timed(f func()) (wall, cpu float64) {
	t, c := time.Now(), cpuSeconds()
	f()
	return time.Since(t).Seconds(), cpuSeconds() - c
}

// RunANN generates a collection of N + Q passages and Q queries, embeds it, searches the first
// N passages exactly (index.Flat: the ground truth and the exact QPS) with two query sets, the
// Q synthetic queries and the Q held-out passages; frees that, builds HNSW over the N passages
// and searches it at each efSearch; then prints the tables.
func RunANN(o ANNOptions) (*ANNResult, error) {
	if o.Passages < synth.MinPassages || o.Queries < 1 || o.Dim < 1 || o.Buckets < 1 || o.Threads < 1 || len(o.EfSearch) == 0 {
		return nil, fmt.Errorf("bench: ann: passages %d, queries %d, dim %d, buckets %d, threads %d, %d efSearch values: each must be positive (passages >= %d)",
			o.Passages, o.Queries, o.Dim, o.Buckets, o.Threads, len(o.EfSearch), synth.MinPassages)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.Threads))
	logf := func(format string, a ...any) { fmt.Fprintf(o.Log, format+"\n", a...) }
	res := &ANNResult{Command: o.Command, Passages: o.Passages, Queries: o.Queries, Dim: o.Dim, Threads: o.Threads,
		M: o.Params.M, EfConstruction: o.Params.EfConstruction, LoadStart: loadAvg()}
	res.RSSReset = resetPeakRSS()

	t := time.Now()
	col, err := synth.New(synth.Config{Passages: o.Passages + o.Queries, Queries: o.Queries, Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	logf("ann: embedding %d passages and %d queries (%d dims)", o.Passages+o.Queries, o.Queries, o.Dim)
	ids, vecs, qs := embedCollection(col, o.Dim, o.Buckets, o.Seed, o.Threads)
	n := o.Passages
	ids, held := ids[:n], slices.Clone(vecs[n*o.Dim:])
	vecs = vecs[:n*o.Dim]
	res.Sets = []ANNQuerySet{{Name: "synthetic queries", vecs: qs}, {Name: "held-out passages", vecs: held}}
	res.EncodeSeconds, res.EncodeRSS = time.Since(t).Seconds(), PeakRSSKiB()

	freeMemory()
	resetPeakRSS()
	flat, err := index.NewFlat(ids, vecs, o.Dim)
	if err != nil {
		return nil, err
	}
	nq := float64(o.Queries)
	for i := range res.Sets {
		qs := &res.Sets[i]
		logf("ann: exact search (index.Flat), %d %s, top 100", o.Queries, qs.Name)
		wall, cpu := timed(func() { qs.exact = flat.SearchBatch(qs.vecs, 100) })
		qs.ExactSeconds, qs.ExactQPS, qs.ExactCPUms = wall, nq/wall, 1e3*cpu/nq
	}
	res.ExactRSS = PeakRSSKiB()
	flat = nil
	freeMemory()
	resetPeakRSS()

	logf("ann: building HNSW (M %d, efConstruction %d)", o.Params.M, o.Params.EfConstruction)
	var h *ann.HNSW
	wall, cpu := timed(func() { h, err = ann.NewHNSW(ids, vecs, o.Dim, o.Params) })
	if err != nil {
		return nil, err
	}
	res.BuildSeconds, res.BuildCPU, res.BuildRSS, res.IndexBytes = wall, cpu, PeakRSSKiB(), h.Bytes()
	for i := range res.Sets {
		qs := &res.Sets[i]
		for _, ef := range o.EfSearch {
			r := ANNRun{EfSearch: ef}
			var got [][]index.Hit
			wall, cpu := timed(func() { got = h.SearchBatchEf(qs.vecs, 10, ef) })
			r.QPS10, r.CPUms10, r.Recall10 = nq/wall, 1e3*cpu/nq, recallAt(got, qs.exact, 10)
			wall, cpu = timed(func() { got = h.SearchBatchEf(qs.vecs, 100, ef) })
			r.QPS100, r.CPUms100, r.Recall100 = nq/wall, 1e3*cpu/nq, recallAt(got, qs.exact, 100)
			logf("ann: %s, efSearch %d: recall@10 %.4f at %.0f QPS", qs.Name, ef, r.Recall10, r.QPS10)
			qs.Runs = append(qs.Runs, r)
		}
	}
	res.LoadEnd = loadAvg()
	res.print(o.Out)
	if err := writeJSON(o.JSON, res); err != nil {
		return res, err
	}
	return res, nil
}

func (r *ANNResult) print(w io.Writer) {
	fmt.Fprintf(w, "# ragtrain approximate search (HNSW) against exact search\n\n")
	fmt.Fprintf(w, "command: `%s`\n", r.Command)
	fmt.Fprintf(w, "machine: %s, %d logical CPUs, %s/%s; %d threads; load average %s at start, %s at end\n",
		cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, r.Threads, loadString(r.LoadStart), loadString(r.LoadEnd))
	fmt.Fprintf(w, "data: %d synthetic passages (data/synth); queries: %d of its queries and %d held-out passages; "+
		"vectors: random projection to %d dims of the hashed tf-idf bag of words, normalised (cosine)\n",
		r.Passages, r.Queries, r.Queries, r.Dim)
	reset := "VmHWM reset before each phase"
	if !r.RSSReset {
		reset = "VmHWM could not be reset: each peak includes the phases before it"
	}
	fmt.Fprintf(w, "embedding: %.1f s, peak RSS %s; exact search (index.Flat): peak RSS %s; "+
		"HNSW build (M %d, efConstruction %d): %.1f s (%.1f s CPU), peak RSS %s, index %s (%s; the build holds the bench's copy of the vectors too)\n",
		r.EncodeSeconds, mib(r.EncodeRSS), mib(r.ExactRSS), r.M, r.EfConstruction,
		r.BuildSeconds, r.BuildCPU, mib(r.BuildRSS), mib(r.IndexBytes/1024), reset)
	fmt.Fprintln(w, "speed-up: exact search's time per query / HNSW's, wall clock and CPU (all threads; steadier on a loaded machine)")
	for _, qs := range r.Sets {
		fmt.Fprintf(w, "\n## %s: exact search (top 100, batched) %.1f s, %.1f QPS, %.2f ms CPU per query\n\n", qs.Name, qs.ExactSeconds, qs.ExactQPS, qs.ExactCPUms)
		fmt.Fprintln(w, "| efSearch | k 10: QPS | speed-up, wall / CPU | recall@10 | k 100: QPS | speed-up, wall / CPU | recall@100 |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
		for _, x := range qs.Runs {
			fmt.Fprintf(w, "| %d | %s | %.1fx / %.1fx | %.4f | %s | %.1fx / %.1fx | %.4f |\n", x.EfSearch,
				number(x.QPS10), x.QPS10/qs.ExactQPS, qs.ExactCPUms/x.CPUms10, x.Recall10,
				number(x.QPS100), x.QPS100/qs.ExactQPS, qs.ExactCPUms/x.CPUms100, x.Recall100)
		}
	}
	fmt.Fprintln(w)
}

// recallAt is the mean over queries of the share of the exact top k (the first k of exact)
// that got holds.
func recallAt(got, exact [][]index.Hit, k int) float64 {
	s := 0.0
	for q := range exact {
		want := exact[q][:min(k, len(exact[q]))]
		in := make(map[string]bool, len(want))
		for _, h := range want {
			in[h.DocID] = true
		}
		n := 0
		for _, h := range got[q] {
			if in[h.DocID] {
				n++
			}
		}
		s += float64(n) / float64(len(want))
	}
	return s / float64(len(exact))
}

// BowProjection embeds a text as the random projection of its hashed tf-idf bag of words:
// v = normalise(sum over distinct words w of (1 + ln tf(w)) · idf(b(w)) · R[b(w)]), with words
// the lowercased whitespace-separated tokens, b(w) = FNV-1a(w) mod Buckets, idf(b) =
// ln(1 + N/df(b)) over the corpus (0 for buckets no passage holds), and R a Buckets × Dim
// matrix of standard Gaussians drawn from the seed. Same seed and corpus, same bits.
type BowProjection struct {
	Dim, Buckets int
	rows         []float32 // Buckets×Dim
	idf          []float32
}

// NewBowProjection draws R and takes idf from df (df[b] = passages holding bucket b) over n
// passages.
func NewBowProjection(dim, buckets int, seed uint64, df []int32, n int) *BowProjection {
	p := &BowProjection{Dim: dim, Buckets: buckets, rows: make([]float32, buckets*dim), idf: make([]float32, buckets)}
	r := rand.New(rand.NewPCG(seed, 0x70726f6a))
	for i := range p.rows {
		p.rows[i] = float32(r.NormFloat64())
	}
	for b, d := range df {
		if d > 0 {
			p.idf[b] = float32(math.Log(1 + float64(n)/float64(d)))
		}
	}
	return p
}

// bucketCounts returns the distinct buckets of text's words, ascending, and their counts.
func bucketCounts(text string, buckets int, scratch []int) ([]int, []int) {
	bs := scratch[:0]
	for _, w := range strings.Fields(strings.ToLower(text)) {
		h := fnv.New64a()
		h.Write([]byte(w))
		bs = append(bs, int(h.Sum64()%uint64(buckets)))
	}
	slices.Sort(bs)
	var tf []int
	out := bs[:0]
	for i, b := range bs {
		if i > 0 && b == out[len(out)-1] {
			tf[len(tf)-1]++
			continue
		}
		out = append(out, b)
		tf = append(tf, 1)
	}
	return out, tf
}

// Embed writes text's vector into dst (length Dim).
func (p *BowProjection) Embed(text string, dst []float32) {
	clear(dst)
	bs, tf := bucketCounts(text, p.Buckets, nil)
	for j, b := range bs {
		wt := float32(1+math.Log(float64(tf[j]))) * p.idf[b]
		row := p.rows[b*p.Dim : (b+1)*p.Dim]
		for k := range dst {
			dst[k] += wt * row[k]
		}
	}
	index.NormalizeRows(dst, p.Dim)
}

// embedCollection returns the passage ids, the passage vectors (N×dim) and the query vectors
// (Q×dim) of col, embedding title + " " + text on threads goroutines (each passage on its own,
// so the result does not depend on threads).
func embedCollection(col *synth.Collection, dim, buckets int, seed uint64, threads int) ([]string, []float32, []float32) {
	n := col.Len()
	text := func(i int) string {
		title, body := col.Passage(i)
		return title + " " + body
	}
	parallel := func(f func(w, i int)) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := range threads {
			wg.Go(func() {
				for {
					lo := int(next.Add(256)) - 256
					if lo >= n {
						return
					}
					for i := lo; i < min(lo+256, n); i++ {
						f(w, i)
					}
				}
			})
		}
		wg.Wait()
	}
	dfs := make([][]int32, threads)
	for w := range dfs {
		dfs[w] = make([]int32, buckets)
	}
	parallel(func(w, i int) {
		bs, _ := bucketCounts(text(i), buckets, nil)
		for _, b := range bs {
			dfs[w][b]++
		}
	})
	for _, d := range dfs[1:] {
		for b, c := range d {
			dfs[0][b] += c
		}
	}
	p := NewBowProjection(dim, buckets, seed, dfs[0], n)
	ids := make([]string, n)
	vecs := make([]float32, n*dim)
	parallel(func(_, i int) {
		ids[i] = synth.PassageID(i)
		p.Embed(text(i), vecs[i*dim:(i+1)*dim])
	})
	qs := make([]float32, col.NumQueries()*dim)
	for q := range col.NumQueries() {
		p.Embed(col.Query(q).Text, qs[q*dim:(q+1)*dim])
	}
	return ids, vecs, qs
}

// freeMemory returns freed heap to the OS, so that the next phase's peak RSS is its own.
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// resetPeakRSS resets this process's VmHWM to its current RSS (Linux clear_refs 5) and reports
// whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}
