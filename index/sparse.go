package index

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/internal/bounded"
)

// Term is one non-zero weight of a sparse vector: a vocabulary id and its weight.
type Term struct {
	ID     int32
	Weight float32
}

// Prune keeps the k largest weights of a dense vector (the rest set to zero; k <= 0 keeps every
// non-zero), ties broken by the lower id, and returns them sorted by id. Negative and zero
// weights are dropped.
func Prune(dense []float32, k int) []Term {
	var ts []Term
	for i, w := range dense {
		if w > 0 {
			ts = append(ts, Term{int32(i), w})
		}
	}
	return pruneTerms(ts, k)
}

// PruneTerms is Prune of a vector already sparse: the k largest weights of ts (k <= 0 keeps
// every term), ties broken by the lower id, sorted by id, in a new slice when any is dropped.
// Under that order the k largest of the k' >= k largest are the k largest, so PruneTerms(
// Prune(v, k'), k) = Prune(v, k).
func PruneTerms(ts []Term, k int) []Term {
	if k <= 0 || len(ts) <= k {
		return ts
	}
	return pruneTerms(slices.Clone(ts), k)
}

// pruneTerms prunes ts in place.
func pruneTerms(ts []Term, k int) []Term {
	if k > 0 && len(ts) > k {
		slices.SortFunc(ts, func(a, b Term) int {
			if a.Weight != b.Weight {
				if a.Weight > b.Weight {
					return -1
				}
				return 1
			}
			return int(a.ID - b.ID)
		})
		ts = ts[:k]
		slices.SortFunc(ts, func(a, b Term) int { return int(a.ID - b.ID) })
	}
	return ts
}

// Sparse is an inverted index of learned sparse vectors (SPLADE): for every vocabulary term the
// passages with a non-zero weight, as gap-coded passage numbers (varints, as BM25's postings)
// and their float32 weights. Search scores a query by the exact dot product over the posting
// lists of its terms (term-at-a-time accumulation). Built with NewSparse, written by Write into
// a directory with a manifest and read back by OpenSparse. Safe for concurrent Search.
type Sparse struct {
	ids     []string
	vocab   int
	post    []byte    // gap-coded passage numbers, term after term
	weights []float32 // one per posting, in the same order
	postOff []uint64  // term t's postings are post[postOff[t]:postOff[t+1]]
	wOff    []uint64  // and weights[wOff[t]:wOff[t+1]]
}

// NewSparse indexes the passages ids with their pruned vectors docs (each sorted by term id,
// every id in [0,vocab)). It fails on a length mismatch or an id out of range.
func NewSparse(ids []string, docs [][]Term, vocab int) (*Sparse, error) {
	if len(ids) != len(docs) {
		return nil, fmt.Errorf("index: sparse: %d ids and %d vectors", len(ids), len(docs))
	}
	rows := make([][]byte, vocab)
	ws := make([][]float32, vocab)
	last := make([]int32, vocab)
	for d, ts := range docs {
		for _, t := range ts {
			if t.ID < 0 || int(t.ID) >= vocab {
				return nil, fmt.Errorf("index: sparse: passage %q has term %d outside the vocabulary of %d", ids[d], t.ID, vocab)
			}
			rows[t.ID] = binary.AppendUvarint(rows[t.ID], uint64(int32(d)-last[t.ID]))
			last[t.ID] = int32(d)
			ws[t.ID] = append(ws[t.ID], t.Weight)
		}
	}
	x := &Sparse{ids: slices.Clone(ids), vocab: vocab, postOff: make([]uint64, vocab+1), wOff: make([]uint64, vocab+1)}
	for t := range rows {
		x.post = append(x.post, rows[t]...)
		x.weights = append(x.weights, ws[t]...)
		x.postOff[t+1], x.wOff[t+1] = uint64(len(x.post)), uint64(len(x.weights))
	}
	return x, nil
}

// Len is the number of passages; Postings the number of non-zero weights indexed.
func (x *Sparse) Len() int      { return len(x.ids) }
func (x *Sparse) Postings() int { return len(x.weights) }

// DocFreq is the length of term t's posting list.
func (x *Sparse) DocFreq(t int) int { return int(x.wOff[t+1] - x.wOff[t]) }

// Search returns the k passages of the largest dot product with the query's terms, best first
// (ties by passage id, as every searcher here), and the number of postings it visited (the
// query's FLOPS). Passages sharing no term with the query are not returned.
func (x *Sparse) Search(q []Term, k int) ([]Hit, int) {
	acc := map[int32]float64{}
	visited := 0
	for _, t := range q {
		if t.ID < 0 || int(t.ID) >= x.vocab {
			continue
		}
		buf, ws := x.post[x.postOff[t.ID]:x.postOff[t.ID+1]], x.weights[x.wOff[t.ID]:x.wOff[t.ID+1]]
		doc := int32(0)
		for _, w := range ws {
			v, n := binary.Uvarint(buf)
			doc, buf = doc+int32(v), buf[n:]
			acc[doc] += float64(t.Weight) * float64(w)
		}
		visited += len(ws)
	}
	top := NewTopK(k)
	for d, s := range acc {
		top.Offer(Hit{DocID: x.ids[d], Score: s})
	}
	return top.Hits(), visited
}

// SparseManifest describes an index directory: its files' sizes and sha256, the counts, and
// what built it.
type SparseManifest struct {
	Format   string            `json:"format"` // "ragtrain-sparse-1"
	Passages int               `json:"passages"`
	Vocab    int               `json:"vocab"`
	Postings int               `json:"postings"`
	Files    map[string]string `json:"sha256"`
	Sizes    map[string]int64  `json:"bytes"`
	Meta     map[string]any    `json:"meta,omitempty"` // the model, pruning, ...
}

const (
	sparseFormat   = "ragtrain-sparse-1"
	sparseManifest = "manifest.json"
	sparseIDs      = "ids.txt"
	sparsePost     = "postings.bin"
)

// Write saves the index into dir atomically: every file into a temporary sibling directory,
// then renamed onto dir (which must not exist). meta is recorded in the manifest.
func (x *Sparse) Write(dir string, meta map[string]any) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("index: sparse: %s exists", dir)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	m := SparseManifest{Format: sparseFormat, Passages: len(x.ids), Vocab: x.vocab, Postings: len(x.weights),
		Files: map[string]string{}, Sizes: map[string]int64{}, Meta: meta}
	write := func(name string, f func(w io.Writer) error) error {
		fh, err := os.Create(filepath.Join(tmp, name))
		if err != nil {
			return err
		}
		h := sha256.New()
		bw := bufio.NewWriter(io.MultiWriter(fh, h))
		err = f(bw)
		if err == nil {
			err = bw.Flush()
		}
		if err == nil {
			err = fh.Sync()
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		st, serr := os.Stat(filepath.Join(tmp, name))
		if err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("index: sparse: %s: %w", name, err)
		}
		m.Files[name], m.Sizes[name] = hex.EncodeToString(h.Sum(nil)), st.Size()
		return nil
	}
	if err := write(sparseIDs, func(w io.Writer) error {
		for _, id := range x.ids {
			if strings.ContainsAny(id, "\n\r") {
				return fmt.Errorf("passage id %q holds a line break", id)
			}
			if _, err := io.WriteString(w, id+"\n"); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	// postings.bin: vocab+1 postOff and wOff (uint64 LE), the gap bytes, the float32 weights.
	if err := write(sparsePost, func(w io.Writer) error {
		if err := binary.Write(w, binary.LittleEndian, x.postOff); err != nil {
			return err
		}
		if err := binary.Write(w, binary.LittleEndian, x.wOff); err != nil {
			return err
		}
		if _, err := w.Write(x.post); err != nil {
			return err
		}
		return binary.Write(w, binary.LittleEndian, x.weights)
	}); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, sparseManifest), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// maxSparseBytes bounds an index file read back (the counts are checked against the manifest
// and the file sizes before anything is allocated from them).
const maxSparseBytes = 64 << 30

// OpenSparse reads an index written by Write, verifying every file's size and sha256 against
// the manifest and the offsets against the counts; an error names the file.
func OpenSparse(dir string) (*Sparse, SparseManifest, error) {
	var m SparseManifest
	mb, err := bounded.ReadFile(filepath.Join(dir, sparseManifest), 1<<20)
	if err != nil {
		return nil, m, err
	}
	// the format first: another index's manifest (a PLAID index's) is named as such, not
	// reported as a type error of one of its fields
	var f struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(mb, &f); err == nil && f.Format != sparseFormat {
		return nil, m, fmt.Errorf("%s: format %q, want %q (a sparse index)", filepath.Join(dir, sparseManifest), f.Format, sparseFormat)
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, m, fmt.Errorf("%s: %w", filepath.Join(dir, sparseManifest), err)
	}
	if m.Format != sparseFormat {
		return nil, m, fmt.Errorf("%s: format %q, want %q", filepath.Join(dir, sparseManifest), m.Format, sparseFormat)
	}
	read := func(name string) ([]byte, error) {
		p := filepath.Join(dir, name)
		b, err := bounded.ReadFile(p, maxSparseBytes)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		if int64(len(b)) != m.Sizes[name] || hex.EncodeToString(sum[:]) != m.Files[name] {
			return nil, fmt.Errorf("%s: %d bytes, sha256 %x; the manifest says %d bytes, %s", p, len(b), sum, m.Sizes[name], m.Files[name])
		}
		return b, nil
	}
	idb, err := read(sparseIDs)
	if err != nil {
		return nil, m, err
	}
	ids := strings.Split(strings.TrimSuffix(string(idb), "\n"), "\n")
	if len(idb) == 0 {
		ids = nil
	}
	pb, err := read(sparsePost)
	if err != nil {
		return nil, m, err
	}
	x, err := decodeSparse(dir, ids, pb, m)
	if err != nil {
		return nil, m, err
	}
	return x, m, nil
}

// decodeSparse checks the contents of postings.bin (pb) against the manifest m and the ids, and
// returns the index; errors name the files of dir.
func decodeSparse(dir string, ids []string, pb []byte, m SparseManifest) (*Sparse, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s: %s", filepath.Join(dir, sparsePost), fmt.Sprintf(format, a...))
	}
	if len(ids) != m.Passages {
		return nil, fmt.Errorf("%s: %d ids, the manifest says %d passages", filepath.Join(dir, sparseIDs), len(ids), m.Passages)
	}
	// each term takes 16 offset bytes and each posting 4 weight bytes: bound the counts by the
	// file's size before multiplying (a forged count must not overflow the check below)
	if m.Vocab < 0 || int64(m.Vocab) >= int64(len(pb))/16 || m.Postings < 0 || int64(m.Postings) > int64(len(pb))/4 {
		return nil, fmt.Errorf("%s: vocab %d, postings %d: not what %s's %d bytes can hold", filepath.Join(dir, sparseManifest), m.Vocab, m.Postings, sparsePost, len(pb))
	}
	head := 2 * 8 * (int64(m.Vocab) + 1)
	if int64(len(pb)) < head+4*int64(m.Postings) {
		return nil, bad("%d bytes, too short for %d terms and %d postings", len(pb), m.Vocab, m.Postings)
	}
	x := &Sparse{ids: ids, vocab: m.Vocab, postOff: make([]uint64, m.Vocab+1), wOff: make([]uint64, m.Vocab+1)}
	for i := range x.postOff {
		x.postOff[i] = binary.LittleEndian.Uint64(pb[8*i:])
		x.wOff[i] = binary.LittleEndian.Uint64(pb[8*(m.Vocab+1)+8*i:])
	}
	gaps := int64(len(pb)) - head - 4*int64(m.Postings)
	for t := 0; t < m.Vocab; t++ {
		if x.postOff[t] > x.postOff[t+1] || x.wOff[t] > x.wOff[t+1] {
			return nil, bad("offsets of term %d decrease", t)
		}
	}
	if x.postOff[0] != 0 || x.wOff[0] != 0 || int64(x.postOff[m.Vocab]) != gaps || int(x.wOff[m.Vocab]) != m.Postings {
		return nil, bad("offsets end at %d gap bytes and %d postings, want %d and %d", x.postOff[m.Vocab], x.wOff[m.Vocab], gaps, m.Postings)
	}
	x.post = pb[head : head+gaps]
	x.weights = make([]float32, m.Postings)
	for i := range x.weights {
		x.weights[i] = math.Float32frombits(binary.LittleEndian.Uint32(pb[head+gaps+4*int64(i):]))
	}
	// every posting list decodes to increasing passage numbers below Passages
	for t := 0; t < m.Vocab; t++ {
		buf, doc := x.post[x.postOff[t]:x.postOff[t+1]], int64(0)
		for j := x.wOff[t]; j < x.wOff[t+1]; j++ {
			v, n := binary.Uvarint(buf)
			if n <= 0 || (j > x.wOff[t] && v == 0) {
				return nil, bad("term %d: a malformed posting", t)
			}
			doc, buf = doc+int64(v), buf[n:]
			if doc >= int64(len(ids)) {
				return nil, bad("term %d: passage %d of %d", t, doc, len(ids))
			}
		}
		if len(buf) != 0 {
			return nil, bad("term %d: %d bytes left after its postings", t, len(buf))
		}
	}
	return x, nil
}
