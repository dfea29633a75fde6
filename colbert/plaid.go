package colbert

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/model"
)

// A PLAID-style index (Santhanam et al. 2022, "PLAID: An Efficient Engine for Late Interaction
// Retrieval"; the compression of ColBERTv2, Santhanam et al. 2022, §3): the passages' token
// vectors clustered by k-means into C centroids, each token stored as its centroid's id and its
// residual (vector - centroid) quantised to NBits per dimension against 2^NBits buckets whose
// cut-offs and values are quantiles of the residuals; inverted lists from each centroid to the
// passages holding one of its tokens. Search: the query tokens' scores with every centroid,
// candidates from each query token's NCells best centroids, two rounds of centroid interaction
// (a passage token stands for its centroid's score; first with tokens whose centroid scores below
// CentroidScoreThreshold with every query token pruned, keeping NDocs, then unpruned, keeping
// NDocs/4), then exact MaxSim over those candidates' decompressed vectors. Called PLAID-style:
// not checked against colbert-ai's index. Everything is deterministic given the seed.

// CentroidCount is ColBERT's number of centroids for n token vectors:
// 2^floor(log2(16·sqrt(n))), at most n (and at least 1).
func CentroidCount(n int) int {
	if n < 1 {
		return 1
	}
	c := 1 << int(math.Floor(math.Log2(16*math.Sqrt(float64(n)))))
	return max(1, min(c, n))
}

// PlaidOptions are an index build's settings.
type PlaidOptions struct {
	NBits       int    // bits per residual dimension, 1 or 2
	KMeansIters int    // k-means iterations (ColBERT's kmeans_niters, 4)
	Seed        uint64 // the initial centroids' draw
	Centroids   int    // C; 0: CentroidCount(tokens)
}

// SearchParams are PLAID's search settings (its defaults: k <= 10: 1, 0.5, 256; k <= 100: 2,
// 0.45, 1024; else 4, 0.4, max(4k, 4096)).
type SearchParams struct {
	NCells                 int
	CentroidScoreThreshold float64
	NDocs                  int
}

// Plaid is a PLAID-style index in memory.
type Plaid struct {
	IDs       []string
	Dim       int
	NBits     int
	Centroids []float32 // C×Dim, unit rows
	Cutoffs   []float32 // 2^NBits - 1 bucket boundaries
	Weights   []float32 // 2^NBits bucket values
	Offs      []int     // passage i's tokens are Offs[i]..Offs[i+1]-1
	Codes     []uint32  // each token's centroid
	Residuals []byte    // each token's Dim·NBits/8 bytes of bucket indices
	IVFOffs   []int     // centroid c's passages are IVF[IVFOffs[c]:IVFOffs[c+1]], ascending
	IVF       []int32
}

// C is the number of centroids.
func (p *Plaid) C() int { return len(p.Centroids) / p.Dim }

func (p *Plaid) rowBytes() int { return p.Dim * p.NBits / 8 }

// BuildPlaid indexes the passages ids whose token vectors are docs (unit rows, as Encoder gives).
func BuildPlaid(ids []string, docs *Tokens, o PlaidOptions) (*Plaid, error) {
	d := docs.Dim
	if o.NBits != 1 && o.NBits != 2 {
		return nil, fmt.Errorf("colbert: plaid: nbits %d, want 1 or 2", o.NBits)
	}
	if d*o.NBits%8 != 0 {
		return nil, fmt.Errorf("colbert: plaid: dim %d x %d bits is not a whole number of bytes", d, o.NBits)
	}
	if len(ids) != docs.Len() {
		return nil, fmt.Errorf("colbert: plaid: %d ids for %d passages", len(ids), docs.Len())
	}
	n := len(docs.Vecs) / d
	if n == 0 {
		return nil, fmt.Errorf("colbert: plaid: no token vectors")
	}
	c := o.Centroids
	if c == 0 {
		c = CentroidCount(n)
	}
	if c < 1 || c > n {
		return nil, fmt.Errorf("colbert: plaid: %d centroids for %d tokens", c, n)
	}
	p := &Plaid{IDs: slices.Clone(ids), Dim: d, NBits: o.NBits, Offs: slices.Clone(docs.Offs)}
	p.Centroids = kmeans(docs.Vecs, d, c, max(1, o.KMeansIters), o.Seed)
	for i := range c {
		normalize(p.Centroids[i*d : (i+1)*d])
	}
	p.Codes = assign(docs.Vecs, p.Centroids, d, false)
	p.quantiles(docs.Vecs)
	rb := p.rowBytes()
	p.Residuals = make([]byte, n*rb)
	res := make([]float32, d)
	for t := range n {
		x, cen := docs.Vecs[t*d:(t+1)*d], p.Centroids[int(p.Codes[t])*d:]
		for j := range d {
			res[j] = x[j] - cen[j]
		}
		p.pack(res, p.Residuals[t*rb:(t+1)*rb])
	}
	p.buildIVF()
	return p, nil
}

// kmeans returns c centroids of the rows of x (n×d): the initial ones c distinct rows drawn with
// seed, then iters Lloyd iterations (nearest by Euclidean distance; a centroid left empty keeps
// its place), as faiss.Kmeans, which ColBERT uses.
func kmeans(x []float32, d, c, iters int, seed uint64) []float32 {
	n := len(x) / d
	perm := rand.New(rand.NewPCG(seed, 0x6b6d65616e73)).Perm(n) // "kmeans"
	cen := make([]float32, c*d)
	for i := range c {
		copy(cen[i*d:(i+1)*d], x[perm[i]*d:(perm[i]+1)*d])
	}
	sum := make([]float64, c*d)
	cnt := make([]int, c)
	for range iters {
		codes := assign(x, cen, d, true)
		clear(sum)
		clear(cnt)
		for t, k := range codes {
			cnt[k]++
			s := sum[int(k)*d : (int(k)+1)*d]
			for j, v := range x[t*d : (t+1)*d] {
				s[j] += float64(v)
			}
		}
		for k := range c {
			if cnt[k] == 0 {
				continue
			}
			for j := range d {
				cen[k*d+j] = float32(sum[k*d+j] / float64(cnt[k]))
			}
		}
	}
	return cen
}

// assignBlock is the rows of one GEMM of assign.
const assignBlock = 1024

// assign returns each row of x's best centroid: the largest x·c - |c|²/2 (the nearest) when
// euclid, else the largest x·c; ties to the lower id.
func assign(x, cen []float32, d int, euclid bool) []uint32 {
	n, c := len(x)/d, len(cen)/d
	half := make([]float32, c)
	if euclid {
		for k := range c {
			var s float32
			for _, v := range cen[k*d : (k+1)*d] {
				s += v * v
			}
			half[k] = s / 2
		}
	}
	out := make([]uint32, n)
	sim := make([]float32, assignBlock*c)
	for lo := 0; lo < n; lo += assignBlock {
		rows := min(assignBlock, n-lo)
		model.Sgemm(false, true, rows, c, d, 1, x[lo*d:], d, cen, d, 0, sim, c)
		for r := range rows {
			row := sim[r*c : (r+1)*c]
			best, bi := row[0]-half[0], 0
			for k := 1; k < c; k++ {
				if v := row[k] - half[k]; v > best {
					best, bi = v, k
				}
			}
			out[lo+r] = uint32(bi)
		}
	}
	return out
}

// quantileSample bounds the residual values sorted for the buckets' quantiles.
const quantileSample = 1 << 21

// quantiles sets the buckets from the residuals of (a deterministic sample of) the tokens: the
// cut-offs at the quantiles i/2^NBits (i = 1..2^NBits-1), the values at (i+1/2)/2^NBits, over
// every dimension's values pooled (ColBERTv2's compression; its sample is a held-out 5%).
func (p *Plaid) quantiles(x []float32) {
	d := p.Dim
	n := len(x) / d
	stride := max(1, n*d/quantileSample)
	var vals []float32
	for t := 0; t < n; t += stride {
		cen := p.Centroids[int(p.Codes[t])*d:]
		for j := range d {
			vals = append(vals, x[t*d+j]-cen[j])
		}
	}
	slices.Sort(vals)
	q := func(f float64) float32 { // torch.quantile's linear interpolation
		pos := f * float64(len(vals)-1)
		i := int(math.Floor(pos))
		if i+1 >= len(vals) {
			return vals[len(vals)-1]
		}
		return vals[i] + float32(pos-float64(i))*(vals[i+1]-vals[i])
	}
	b := 1 << p.NBits
	p.Cutoffs, p.Weights = make([]float32, b-1), make([]float32, b)
	for i := 1; i < b; i++ {
		p.Cutoffs[i-1] = q(float64(i) / float64(b))
	}
	for i := range b {
		p.Weights[i] = q((float64(i) + 0.5) / float64(b))
	}
}

// bucket is the bucket of residual value v: the number of cut-offs below it (torch.bucketize).
func (p *Plaid) bucket(v float32) int {
	k := 0
	for _, c := range p.Cutoffs {
		if c < v {
			k++
		}
	}
	return k
}

// pack writes the buckets of res into dst, NBits per dimension, first dimension in the high bits.
func (p *Plaid) pack(res []float32, dst []byte) {
	per := 8 / p.NBits
	clear(dst)
	for j, v := range res {
		shift := 8 - p.NBits*(j%per+1)
		dst[j/per] |= byte(p.bucket(v)) << shift
	}
}

// Decompress writes token t's vector into dst (Dim values): its centroid plus each dimension's
// bucket value, normalised to unit length (as ColBERT decompresses).
func (p *Plaid) Decompress(t int, dst []float32) {
	d, per, rb := p.Dim, 8/p.NBits, p.rowBytes()
	mask := byte(1<<p.NBits - 1)
	cen := p.Centroids[int(p.Codes[t])*d:]
	res := p.Residuals[t*rb : (t+1)*rb]
	for j := range d {
		shift := 8 - p.NBits*(j%per+1)
		dst[j] = cen[j] + p.Weights[(res[j/per]>>shift)&mask]
	}
	normalize(dst)
}

func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	inv := float32(1 / math.Max(math.Sqrt(s), NormEps))
	for j := range v {
		v[j] *= inv
	}
}

// buildIVF lists, for every centroid, the passages holding one of its tokens, ascending.
func (p *Plaid) buildIVF() {
	c := p.C()
	lists := make([][]int32, c)
	for i := range len(p.Offs) - 1 {
		for t := p.Offs[i]; t < p.Offs[i+1]; t++ {
			k := p.Codes[t]
			if l := lists[k]; len(l) == 0 || l[len(l)-1] != int32(i) {
				lists[k] = append(l, int32(i))
			}
		}
	}
	p.IVFOffs = make([]int, c+1)
	p.IVF = p.IVF[:0]
	for k, l := range lists {
		p.IVF = append(p.IVF, l...)
		p.IVFOffs[k+1] = len(p.IVF)
	}
}

// Search returns the k best passages for the query tokens q (nq×Dim, unit rows), best first, by
// PLAID's four stages (see the package's PLAID notes); at most NDocs/4 passages.
func (p *Plaid) Search(q []float32, k int, sp SearchParams) []index.Hit {
	d, c := p.Dim, p.C()
	nq := len(q) / d
	qc := make([]float32, nq*c) // query token i's score with centroid k at i*c+k
	model.Sgemm(false, true, nq, c, d, 1, q, d, p.Centroids, d, 0, qc, c)
	// stage 1: each query token's NCells best centroids; their passages
	cells := map[int]bool{}
	for i := range nq {
		row := qc[i*c : (i+1)*c]
		order := make([]int, c)
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return row[order[a]] > row[order[b]] })
		for _, j := range order[:min(sp.NCells, c)] {
			cells[j] = true
		}
	}
	seen := map[int32]bool{}
	var cand []int
	for j := range c {
		if !cells[j] {
			continue
		}
		for _, pid := range p.IVF[p.IVFOffs[j]:p.IVFOffs[j+1]] {
			if !seen[pid] {
				seen[pid] = true
				cand = append(cand, int(pid))
			}
		}
	}
	slices.Sort(cand)
	// stage 2: centroid interaction with pruned centroids, NDocs kept
	keep := make([]bool, c)
	for j := range c {
		for i := range nq {
			if float64(qc[i*c+j]) >= sp.CentroidScoreThreshold {
				keep[j] = true
				break
			}
		}
	}
	cand = p.interact(qc, nq, cand, keep, sp.NDocs)
	// stage 3: without pruning, NDocs/4 kept
	cand = p.interact(qc, nq, cand, nil, max(1, sp.NDocs/4))
	// stage 4: exact MaxSim over the decompressed candidates
	scores := make([]float64, len(cand))
	buf := make([]float32, 0)
	for ci, pid := range cand {
		n := p.Offs[pid+1] - p.Offs[pid]
		buf = slices.Grow(buf[:0], n*d)[:n*d]
		for t := range n {
			p.Decompress(p.Offs[pid]+t, buf[t*d:(t+1)*d])
		}
		scores[ci] = maxSimDense(q, buf, d)
	}
	return topHits(p.IDs, scores, cand, k)
}

// maxSimDense is MaxSimScore through one GEMM.
func maxSimDense(q, p []float32, d int) float64 {
	nq, np := len(q)/d, len(p)/d
	if np == 0 {
		return 0
	}
	sim := make([]float32, nq*np)
	model.Sgemm(false, true, nq, np, d, 1, q, d, p, d, 0, sim, np)
	var s float64
	for i := range nq {
		s += float64(slices.Max(sim[i*np : (i+1)*np]))
	}
	return s
}

// interact scores the candidates by centroid interaction, sum over query tokens of the largest
// centroid score among the passage's tokens (tokens of a centroid keep[] leaves out are skipped
// when keep is not nil; a query token with none adds 0), and returns the best n, in descending
// score (ties: lower passage first).
func (p *Plaid) interact(qc []float32, nq int, cand []int, keep []bool, n int) []int {
	c := len(qc) / nq
	type sc struct {
		pid int
		s   float64
	}
	out := make([]sc, len(cand))
	best := make([]float32, nq)
	for ci, pid := range cand {
		for i := range best {
			best[i] = float32(math.Inf(-1))
		}
		any := false
		for t := p.Offs[pid]; t < p.Offs[pid+1]; t++ {
			k := int(p.Codes[t])
			if keep != nil && !keep[k] {
				continue
			}
			any = true
			for i := range nq {
				if v := qc[i*c+k]; v > best[i] {
					best[i] = v
				}
			}
		}
		var s float64
		if any {
			for _, v := range best {
				s += float64(v)
			}
		}
		out[ci] = sc{pid, s}
	}
	slices.SortStableFunc(out, func(a, b sc) int {
		if a.s != b.s {
			if a.s > b.s {
				return -1
			}
			return 1
		}
		return a.pid - b.pid
	})
	res := make([]int, 0, min(n, len(out)))
	for _, o := range out[:min(n, len(out))] {
		res = append(res, o.pid)
	}
	return res
}

// PlaidStats are an index's sizes.
type PlaidStats struct {
	Centroids, Passages, Tokens int
	// BytesPerPassage is what a passage costs: its tokens' codes (4 bytes) and residuals
	// (Dim·NBits/8 bytes) and its length (4 bytes); TotalBytes adds the centroids, buckets, ids
	// and inverted lists: the index file's size.
	BytesPerPassage float64
	TotalBytes      int64
}

// Stats returns the index's sizes.
func (p *Plaid) Stats() PlaidStats {
	n := len(p.IDs)
	tok := len(p.Codes)
	st := PlaidStats{Centroids: p.C(), Passages: n, Tokens: tok}
	st.BytesPerPassage = float64(tok*(4+p.rowBytes())+4*n) / float64(max(n, 1))
	var buf countingWriter
	p.write(&buf) // its size only
	st.TotalBytes = buf.n
	return st
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(b []byte) (int, error) { w.n += int64(len(b)); return len(b), nil }

// PlaidFormat is the manifest's format member; PlaidFile the index file, ManifestFile the
// manifest naming it with its size and sha256 (written last: a reader sees a whole index or
// none, as the embedding shards' manifest commits them).
const (
	PlaidFormat  = "ragtrain-plaid/1"
	PlaidFile    = "plaid.bin"
	ManifestFile = "manifest.json"
)

// PlaidManifest is manifest.json.
type PlaidManifest struct {
	Format    string `json:"format"`
	ModelHash string `json:"model_hash"`
	Dim       int    `json:"dim"`
	NBits     int    `json:"nbits"`
	Centroids int    `json:"centroids"`
	Passages  int    `json:"passages"`
	Tokens    int    `json:"tokens"`
	File      string `json:"file"`
	Bytes     int64  `json:"bytes"`
	SHA256    string `json:"sha256"`
}

// write serialises the index: little-endian int64 counts (dim, nbits, C, passages, tokens),
// then centroids, cut-offs, weights (float32), the passages' token counts (uint32), codes
// (uint32), residuals, inverted-list lengths (uint32) and passage numbers (uint32), and the ids
// (uint32 length + bytes each).
func (p *Plaid) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	put := func(v any) { binary.Write(bw, binary.LittleEndian, v) }
	put([]int64{int64(p.Dim), int64(p.NBits), int64(p.C()), int64(len(p.IDs)), int64(len(p.Codes))})
	put(p.Centroids)
	put(p.Cutoffs)
	put(p.Weights)
	lens := make([]uint32, len(p.IDs))
	for i := range lens {
		lens[i] = uint32(p.Offs[i+1] - p.Offs[i])
	}
	put(lens)
	put(p.Codes)
	bw.Write(p.Residuals)
	ivl := make([]uint32, p.C())
	for k := range ivl {
		ivl[k] = uint32(p.IVFOffs[k+1] - p.IVFOffs[k])
	}
	put(ivl)
	put(p.IVF)
	for _, id := range p.IDs {
		put(uint32(len(id)))
		bw.WriteString(id)
	}
	return bw.Flush()
}

// Save writes the index to dir atomically: PlaidFile through a temporary file and a rename, then
// ManifestFile the same way, naming the model (modelHash) and the file's size and sha256.
func (p *Plaid) Save(dir, modelHash string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("colbert: plaid: %w", err)
	}
	sum := sha256.New()
	cw := &countingWriter{}
	if err := atomicfile.Write(filepath.Join(dir, PlaidFile), func(w io.Writer) error {
		return p.write(io.MultiWriter(w, sum, cw))
	}); err != nil {
		return fmt.Errorf("colbert: plaid: %w", err)
	}
	m := PlaidManifest{Format: PlaidFormat, ModelHash: modelHash, Dim: p.Dim, NBits: p.NBits, Centroids: p.C(), Passages: len(p.IDs),
		Tokens: len(p.Codes), File: PlaidFile, Bytes: cw.n, SHA256: hex.EncodeToString(sum.Sum(nil))}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, ManifestFile), append(b, '\n'))
}

// maxPlaidBytes bounds the index file OpenPlaid reads (16 GiB).
const maxPlaidBytes = 16 << 30

// OpenPlaid reads the index in dir, refusing a file whose size or sha256 is not the manifest's,
// and every count beyond what the file holds.
func OpenPlaid(dir string) (*Plaid, *PlaidManifest, error) {
	mpath := filepath.Join(dir, ManifestFile)
	mb, err := bounded.ReadFile(mpath, 1<<20)
	if err != nil {
		return nil, nil, fmt.Errorf("colbert: plaid: %w", err)
	}
	var m PlaidManifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, nil, fmt.Errorf("colbert: plaid: %s: %w", mpath, err)
	}
	if m.Format != PlaidFormat || m.File != PlaidFile {
		return nil, nil, fmt.Errorf("colbert: plaid: %s: format %q file %q, want %q and %q", mpath, m.Format, m.File, PlaidFormat, PlaidFile)
	}
	path := filepath.Join(dir, m.File)
	b, err := bounded.ReadFile(path, maxPlaidBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("colbert: plaid: %w", err)
	}
	if s := sha256.Sum256(b); int64(len(b)) != m.Bytes || hex.EncodeToString(s[:]) != m.SHA256 {
		return nil, nil, fmt.Errorf("colbert: plaid: %s: %d bytes, sha256 %x; %s says %d bytes, %s", path, len(b), s, mpath, m.Bytes, m.SHA256)
	}
	p, err := readPlaid(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, nil, fmt.Errorf("colbert: plaid: %s: %w", path, err)
	}
	if p.Dim != m.Dim || p.NBits != m.NBits || p.C() != m.Centroids || len(p.IDs) != m.Passages || len(p.Codes) != m.Tokens {
		return nil, nil, fmt.Errorf("colbert: plaid: %s does not hold what %s lists", path, mpath)
	}
	return p, &m, nil
}

func readPlaid(r *bytes.Reader, size int64) (*Plaid, error) {
	var hdr [5]int64
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	d, nbits, c, n, tok := hdr[0], hdr[1], hdr[2], hdr[3], hdr[4]
	// each count takes at least 4 bytes of the file: bounded so first, the sum below cannot overflow
	if d < 1 || d > 4096 || (nbits != 1 && nbits != 2) || d*nbits%8 != 0 || c < 1 || n < 0 || tok < 0 ||
		c > size/4 || n > size/4 || tok > size/4 || c*d*4+n*4+tok*(4+d*nbits/8)+c*4 > size { // what the counts need must be in the file
		return nil, fmt.Errorf("header (dim %d, nbits %d, centroids %d, passages %d, tokens %d) does not fit the file's %d bytes", d, nbits, c, n, tok, size)
	}
	p := &Plaid{Dim: int(d), NBits: int(nbits), Centroids: make([]float32, c*d), Cutoffs: make([]float32, 1<<nbits-1), Weights: make([]float32, 1<<nbits)}
	get := func(v any) error { return binary.Read(r, binary.LittleEndian, v) }
	lens := make([]uint32, n)
	p.Codes = make([]uint32, tok)
	p.Residuals = make([]byte, tok*d*nbits/8)
	ivl := make([]uint32, c)
	for _, v := range []any{p.Centroids, p.Cutoffs, p.Weights, lens, p.Codes, p.Residuals, ivl} {
		if err := get(v); err != nil {
			return nil, fmt.Errorf("truncated: %w", err)
		}
	}
	p.Offs = make([]int, n+1)
	for i, l := range lens {
		p.Offs[i+1] = p.Offs[i] + int(l)
	}
	if p.Offs[n] != int(tok) {
		return nil, fmt.Errorf("passage lengths sum to %d, header says %d tokens", p.Offs[n], tok)
	}
	for t, k := range p.Codes {
		if int64(k) >= c {
			return nil, fmt.Errorf("token %d: centroid %d of %d", t, k, c)
		}
	}
	p.IVFOffs = make([]int, c+1)
	for k, l := range ivl {
		p.IVFOffs[k+1] = p.IVFOffs[k] + int(l)
	}
	if int64(p.IVFOffs[c])*4 > int64(r.Len()) {
		return nil, fmt.Errorf("inverted lists of %d entries beyond the file", p.IVFOffs[c])
	}
	p.IVF = make([]int32, p.IVFOffs[c])
	if err := get(p.IVF); err != nil {
		return nil, fmt.Errorf("truncated: %w", err)
	}
	for _, pid := range p.IVF {
		if pid < 0 || int64(pid) >= n {
			return nil, fmt.Errorf("inverted list entry %d of %d passages", pid, n)
		}
	}
	p.IDs = make([]string, n)
	for i := range p.IDs {
		var l uint32
		if err := get(&l); err != nil || int64(l) > int64(r.Len()) {
			return nil, fmt.Errorf("id %d: truncated", i)
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("id %d: %w", i, err)
		}
		p.IDs[i] = string(b)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%d bytes after the ids", r.Len())
	}
	return p, nil
}
