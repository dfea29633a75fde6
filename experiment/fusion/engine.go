package fusion

import (
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/knnlm"
	"github.com/ragtrain/ragtrain/model"
)

// evalBatch is the sequences per forward pass of the reader.
const evalBatch = 64

// engine runs the reader for the kNN-LM: next-token log-probabilities and keys.
type engine struct {
	kr       *model.KeyRunner
	emb      []float32 // E [V,H]
	V, H, L  int
	progress io.Writer
}

func newEngine(r *model.Reader, L int, progress io.Writer) (*engine, error) {
	kr, err := model.NewKeyRunner(r, evalBatch, L)
	if err != nil {
		return nil, err
	}
	return &engine{kr: kr, emb: r.Embeddings(), V: r.Cfg.Vocab, H: r.Cfg.Hidden, L: L, progress: progress}, nil
}

func (e *engine) Close() error { return e.kr.Close() }

// logProbs writes log softmax(state · Eᵀ) into dst [V] (scratch [V] holds the logits).
func (e *engine) logProbs(dst, scratch []float64, state []float32) {
	for v := 0; v < e.V; v++ {
		var s float64
		for j, w := range e.emb[v*e.H : (v+1)*e.H] {
			s += float64(state[j]) * float64(w)
		}
		scratch[v] = s
	}
	knnlm.LogSoftmax(dst, scratch)
}

// buildStore is knnlm.BuildReader with a progress bar.
func (e *engine) buildStore(rows [][]int, precision, what string) (*knnlm.Store, error) {
	b := experiment.ProgressBar(e.progress, len(rows), what)
	s, err := knnlm.BuildReader(e.kr, rows, precision, func(n int) { _ = b.Add(n) })
	_ = b.Finish()
	return s, err
}

// cachedSearch remembers the neighbours of every context (token sequence) searched, so that a
// λ sweep searches each context once; Searches counts the searches made.
type cachedSearch struct {
	s        knnlm.Searcher
	k        int
	m        map[string][]knnlm.Neighbor
	Searches int
}

func newCachedSearch(s knnlm.Searcher, k int) *cachedSearch {
	return &cachedSearch{s: s, k: k, m: map[string][]knnlm.Neighbor{}}
}

func seqKey(seq []int) string {
	var b strings.Builder
	for _, t := range seq {
		b.WriteString(strconv.Itoa(t))
		b.WriteByte(' ')
	}
	return b.String()
}

// find returns the neighbours of each context, keys [len(ctxs)*H] its query keys.
func (c *cachedSearch) find(ctxs []string, keys []float32, H int) [][]knnlm.Neighbor {
	out := make([][]knnlm.Neighbor, len(ctxs))
	var miss []int
	var q []float32
	for i, k := range ctxs {
		if nb, ok := c.m[k]; ok {
			out[i] = nb
			continue
		}
		miss = append(miss, i)
		q = append(q, keys[i*H:(i+1)*H]...)
	}
	if len(miss) > 0 {
		for j, nb := range c.s.Search(q, c.k) {
			out[miss[j]] = nb
			c.m[ctxs[miss[j]]] = nb
		}
		c.Searches += len(miss)
	}
	return out
}

// decoded is one greedy continuation.
type decoded struct {
	Tokens  []int
	Stopped bool // ended by a stop token (not counted in Tokens)
}

// stepOut is the reader's output after a context: log p_LM of the next token [V] and the key [H].
type stepOut struct {
	lp  []float64
	key []float32
}

// memo remembers the reader's output per context (token sequence), so that a λ sweep runs the
// reader once per distinct context; nil memos nothing.
type memo map[string]stepOut

// outputs returns the reader's output after each sequence, running only those m lacks.
func (e *engine) outputs(seqs [][]int, m memo) ([]stepOut, error) {
	out := make([]stepOut, len(seqs))
	var miss []int
	for i, sq := range seqs {
		if o, ok := m[seqKey(sq)]; ok && m != nil {
			out[i] = o
			continue
		}
		miss = append(miss, i)
	}
	if len(miss) == 0 {
		return out, nil
	}
	batch := make([][]int, len(miss))
	for n, i := range miss {
		batch[n] = seqs[i]
	}
	states, keys, err := e.kr.Run(batch)
	if err != nil {
		return nil, err
	}
	scratch := make([]float64, e.V)
	for n, i := range miss {
		row := (n*e.L + len(seqs[i]) - 1) * e.H
		o := stepOut{lp: make([]float64, e.V), key: slices.Clone(keys[row : row+e.H])}
		e.logProbs(o.lp, scratch, states[row:row+e.H])
		out[i] = o
		if m != nil {
			m[seqKey(seqs[i])] = o
		}
	}
	return out, nil
}

// decode continues every non-nil prompt greedily under p = λ p_kNN + (1 - λ) p_LM (s nil or λ =
// 0: the reader alone, no search) until a stop token, maxNew tokens or the length L. m, when not
// nil, memoises the reader's outputs across calls. It returns the decoding steps (tokens
// generated, stops included).
func (e *engine) decode(what string, prompts [][]int, s *cachedSearch, m memo, temperature, lambda float64, maxNew int, stops []int) ([]decoded, int, error) {
	res := make([]decoded, len(prompts))
	var which []int
	for i, p := range prompts {
		if p != nil {
			which = append(which, i)
		}
	}
	mixed := make([]float64, e.V)
	steps := 0
	b := experiment.ProgressBar(e.progress, len(which), what)
	for start := 0; start < len(which); start += evalBatch {
		idx := which[start:min(start+evalBatch, len(which))]
		seqs := make([][]int, len(idx))
		for j, i := range idx {
			seqs[j] = slices.Clone(prompts[i])
		}
		active := make([]bool, len(idx))
		for j := range active {
			active[j] = len(seqs[j]) < e.L
		}
		for step := 0; step < maxNew; step++ {
			var run []int
			for j, a := range active {
				if a {
					run = append(run, j)
				}
			}
			if len(run) == 0 {
				break
			}
			batch := make([][]int, len(run))
			for n, j := range run {
				batch[n] = seqs[j]
			}
			outs, err := e.outputs(batch, m)
			if err != nil {
				return nil, 0, err
			}
			var nbs [][]knnlm.Neighbor
			if s != nil && lambda > 0 {
				ctxs := make([]string, len(run))
				q := make([]float32, 0, len(run)*e.H)
				for n, sq := range batch {
					ctxs[n] = seqKey(sq)
					q = append(q, outs[n].key...)
				}
				nbs = s.find(ctxs, q, e.H)
			}
			for n, j := range run {
				dist := outs[n].lp
				if nbs != nil {
					if err := knnlm.Interpolate(mixed, dist, knnlm.KNNProbs(nbs[n], temperature), lambda); err != nil {
						return nil, 0, err
					}
					dist = mixed
				}
				best := 0
				for v, x := range dist {
					if x > dist[best] {
						best = v
					}
				}
				steps++
				d := &res[idx[j]]
				if slices.Contains(stops, best) {
					d.Stopped, active[j] = true, false
					continue
				}
				d.Tokens = append(d.Tokens, best)
				seqs[j] = append(seqs[j], best)
				if len(seqs[j]) >= e.L {
					active[j] = false
				}
			}
		}
		_ = b.Add(len(idx))
	}
	_ = b.Finish()
	return res, steps, nil
}

// tokenNLL is, per held-out sequence position t >= 1, the target token, the reader's
// log-probability of it and its neighbours (nil without a searcher).
type tokenNLL struct {
	Target int
	LogLM  float64
	NB     []knnlm.Neighbor
}

// score runs the sequences and returns every predicted token with log p_LM and its neighbours.
func (e *engine) score(what string, seqs [][]int, s knnlm.Searcher, k int) ([]tokenNLL, error) {
	var out []tokenNLL
	lp, scratch := make([]float64, e.V), make([]float64, e.V)
	b := experiment.ProgressBar(e.progress, len(seqs), what)
	for start := 0; start < len(seqs); start += evalBatch {
		batch := seqs[start:min(start+evalBatch, len(seqs))]
		states, keys, err := e.kr.Run(batch)
		if err != nil {
			return nil, err
		}
		first := len(out)
		var q []float32
		for i, sq := range batch {
			for t := 0; t+1 < len(sq); t++ {
				row := (i*e.L + t) * e.H
				e.logProbs(lp, scratch, states[row:row+e.H])
				out = append(out, tokenNLL{Target: sq[t+1], LogLM: lp[sq[t+1]]})
				q = append(q, keys[row:row+e.H]...)
			}
		}
		if s != nil && len(q) > 0 {
			for j, nb := range s.Search(q, k) {
				out[first+j].NB = nb
			}
		}
		_ = b.Add(len(batch))
	}
	_ = b.Finish()
	return out, nil
}

// perplexity is exp of the mean negative log-probability under λ, over the tokens keep selects
// (all when keep is nil); NaN for none.
func perplexity(toks []tokenNLL, temperature, lambda float64, keep func(target int) bool) float64 {
	var nll float64
	n := 0
	for _, t := range toks {
		if keep != nil && !keep(t.Target) {
			continue
		}
		pk := 0.0
		if lambda > 0 {
			pk = knnlm.KNNProbs(t.NB, temperature)[t.Target]
		}
		nll -= knnlm.Mix(pk, t.LogLM, lambda)
		n++
	}
	if n == 0 {
		return math.NaN()
	}
	return math.Exp(nll / float64(n))
}
