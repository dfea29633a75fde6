package shard

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/edsrzf/mmap-go"

	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// Reader searches the version of a shard directory that was committed when it was opened. It
// keeps every shard file open (so a later commit or RemoveStale cannot change what it reads)
// but maps one shard at a time, during a search only: memory beyond the results is one
// shard's ids and mapped values. A Reader is safe for concurrent searches.
type Reader struct {
	dir     string
	m       Manifest
	meta    Meta
	files   []*os.File
	headers []header
}

// Open reads dir/manifest.json and opens every shard it lists, checking that each exists and
// that its header and size agree with the manifest (model hash, version, dim, dtype, count,
// bytes); Verify also checks the sha256 sums. The error names the file.
func Open(dir string) (*Reader, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	meta, _ := m.Meta() // checked by ReadManifest
	r := &Reader{dir: dir, m: *m, meta: meta}
	for i, e := range m.Shards {
		path := filepath.Join(dir, e.File)
		f, err := bounded.OpenRegular(path)
		if err != nil {
			r.Close()
			if os.IsNotExist(err) {
				return nil, fmt.Errorf("shard: %s: missing (listed in %s)", path, ManifestFile)
			}
			return nil, fmt.Errorf("shard: %w", err)
		}
		r.files = append(r.files, f)
		h, err := readHeader(f)
		if err == nil {
			err = h.matches(meta, i)
		}
		if err == nil && (h.count != e.Count || h.fileSize != e.Bytes) {
			err = fmt.Errorf("%d passages in %d bytes, manifest says %d in %d", h.count, h.fileSize, e.Count, e.Bytes)
		}
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("shard: %s: %v", path, err)
		}
		r.headers = append(r.headers, h)
	}
	return r, nil
}

// readHeader decodes the header of an open shard file.
func readHeader(f *os.File) (header, error) {
	st, err := f.Stat()
	if err != nil {
		return header{}, err
	}
	b := make([]byte, headerSize+128+64)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return header{}, err
	}
	return decodeHeader(b[:n], st.Size())
}

// Close closes the shard files. A closed Reader fails every search.
func (r *Reader) Close() error {
	var first error
	for _, f := range r.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Manifest returns the manifest of the version being served.
func (r *Reader) Manifest() Manifest { return r.m }

// Meta returns the model hash, version, dim and dtype being served.
func (r *Reader) Meta() Meta { return r.meta }

// Len returns the number of passages over all shards.
func (r *Reader) Len() int { return int(r.m.Count) }

// Dim returns the embedding width H.
func (r *Reader) Dim() int { return r.meta.Dim }

// VectorBytes returns the bytes of the stored vector values, N·dim times the value size of the
// shards' dtype (float32 4, float16 2, int8 1), without ids, scales or headers.
func (r *Reader) VectorBytes() int64 {
	return r.m.Count * int64(r.meta.Dim) * r.meta.DType.valueBytes()
}

// Verify hashes every shard file and compares the sum with the manifest's; the error names
// the first file that differs.
func (r *Reader) Verify() error {
	for i, f := range r.files {
		sum := sha256.New()
		if _, err := io.Copy(sum, io.NewSectionReader(f, 0, r.headers[i].fileSize)); err != nil {
			return fmt.Errorf("shard: %s: %w", f.Name(), err)
		}
		if got, want := hex.EncodeToString(sum.Sum(nil)), r.m.Shards[i].SHA256; got != want {
			return fmt.Errorf("shard: %s: sha256 %s, manifest says %s (file changed or corrupt)", f.Name(), got, want)
		}
	}
	return nil
}

// OpenVerified is Open followed by Verify: the committed version with every shard's sha256
// checked against the manifest before a vector is read; the error names the shard that differs.
func OpenVerified(dir string) (*Reader, error) {
	r, err := Open(dir)
	if err != nil {
		return nil, err
	}
	if err := r.Verify(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// view is one mapped shard.
type view struct {
	h      header
	ids    []string
	scales []float32 // per vector or per dimension (int8)
	data   []byte    // N×dim values
	f32    []float32 // data as float32, when dtype is float32 and the host is little-endian
}

var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// withShard maps shard i, decodes its ids and calls fn; the mapping is gone when it returns.
func (r *Reader) withShard(i int, fn func(v *view) error) error {
	f, h := r.files[i], r.headers[i]
	mm, err := mmap.Map(f, mmap.RDONLY, 0)
	if err != nil {
		return fmt.Errorf("shard: %s: map: %w", f.Name(), err)
	}
	defer mm.Unmap()
	if int64(len(mm)) != h.fileSize {
		return fmt.Errorf("shard: %s: %d bytes mapped, header says %d (file changed since Open)", f.Name(), len(mm), h.fileSize)
	}
	v, err := newView(mm, h)
	if err != nil {
		return fmt.Errorf("shard: %s: %v", f.Name(), err)
	}
	return fn(v)
}

// newView decodes the ids and scales of a shard file's bytes b, whose header h decodeHeader
// checked against len(b); the values stay in b.
func newView(b []byte, h header) (*view, error) {
	ids, err := decodeIDs(b, h)
	if err != nil {
		return nil, err
	}
	v := &view{h: h, ids: ids}
	ns := h.dtype.scales(h.count, h.dim)
	v.scales = make([]float32, ns)
	for j := range v.scales {
		v.scales[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[h.dataOffset+4*int64(j):]))
	}
	v.data = b[h.dataOffset+4*ns : h.fileSize]
	if h.dtype == Float32 && littleEndian && h.count > 0 {
		v.f32 = unsafe.Slice((*float32)(unsafe.Pointer(&v.data[0])), h.count*h.dim)
	}
	return v, nil
}

// halfTable maps every float16 bit pattern to its float32 value (256 KiB, built once).
var halfTable = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = halfToFloat32(uint16(h))
	}
	return &t
})

// rows returns rows p0..p1-1 as float32, decoding them into scratch (len >= (p1-p0)·dim)
// unless they can be read in place.
func (v *view) rows(p0, p1 int, scratch []float32) []float32 {
	dim := int(v.h.dim)
	if v.f32 != nil {
		return v.f32[p0*dim : p1*dim]
	}
	out := scratch[:(p1-p0)*dim]
	le := binary.LittleEndian
	switch v.h.dtype {
	case Float32:
		for j := range out {
			out[j] = math.Float32frombits(le.Uint32(v.data[4*(p0*dim+j):]))
		}
	case Float16:
		tab := halfTable()
		for j := range out {
			out[j] = tab[le.Uint16(v.data[2*(p0*dim+j):])]
		}
	case Int8PerVector:
		for r := p0; r < p1; r++ {
			s := v.scales[r]
			row := v.data[r*dim : (r+1)*dim]
			o := out[(r-p0)*dim:]
			for j, b := range row {
				o[j] = float32(int8(b)) * s
			}
		}
	case Int8PerDim:
		src := v.data[p0*dim : p1*dim]
		for j, b := range src {
			out[j] = float32(int8(b)) * v.scales[j%dim]
		}
	}
	return out
}

// Block sizes of the search, as index.Flat's: a block of queries is scored against a block of
// passages while both stay in cache.
const (
	queryBlock   = 8
	passageBlock = 256
)

// Search returns the k passages with the largest inner product with q (length H), all of them
// when k >= Len, none when k < 1, ties by DocID ascending. Over float32 shards it equals
// index.Flat's Search over the same rows; over the other dtypes each row is decoded to float32
// first (see the package doc). It fails when len(q) != H, or a shard cannot be read.
func (r *Reader) Search(q []float32, k int) ([]index.Hit, error) {
	if len(q) != r.meta.Dim {
		return nil, fmt.Errorf("shard: Search: query has %d values, dim is %d", len(q), r.meta.Dim)
	}
	out, err := r.SearchBatch(q, k)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// SearchBatch searches the B = len(qs)/H queries stored row-major in qs (B×H) and returns
// their results in order; result b equals Search(qs[b·H:(b+1)·H], k). Each shard is mapped
// once for all queries; blocks of queries run on at most GOMAXPROCS goroutines. It fails when
// len(qs) is not a multiple of H, or a shard cannot be read.
func (r *Reader) SearchBatch(qs []float32, k int) ([][]index.Hit, error) {
	dim := r.meta.Dim
	if len(qs)%dim != 0 {
		return nil, fmt.Errorf("shard: SearchBatch: %d query values is not a multiple of dim %d", len(qs), dim)
	}
	nq := len(qs) / dim
	out := make([][]index.Hit, nq)
	if k < 1 || nq == 0 {
		return out, nil
	}
	tops := make([]*index.TopK, nq)
	for i := range tops {
		tops[i] = index.NewTopK(k)
	}
	nBlocks := (nq + queryBlock - 1) / queryBlock
	workers := min(runtime.GOMAXPROCS(0), nBlocks)
	for s := range r.files {
		err := r.withShard(s, func(v *view) error {
			var next atomic.Int64
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					scratch := make([]float32, passageBlock*dim)
					for {
						blk := int(next.Add(1)) - 1
						if blk >= nBlocks {
							return
						}
						lo, hi := blk*queryBlock, min((blk+1)*queryBlock, nq)
						searchBlock(v, qs, lo, hi, k, scratch, tops)
					}
				})
			}
			wg.Wait()
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for i, t := range tops {
		out[i] = t.Hits()
	}
	return out, nil
}

// searchBlock scores queries lo..hi-1 against every row of v and merges each query's best k
// into tops, with ids copied out of the mapping.
func searchBlock(v *view, qs []float32, lo, hi, k int, scratch []float32, tops []*index.TopK) {
	dim, n := int(v.h.dim), int(v.h.count)
	local := make([]*index.TopK, hi-lo)
	for i := range local {
		local[i] = index.NewTopK(k)
	}
	for p0 := 0; p0 < n; p0 += passageBlock {
		p1 := min(p0+passageBlock, n)
		rows := v.rows(p0, p1, scratch)
		for qi := lo; qi < hi; qi++ {
			q := qs[qi*dim : (qi+1)*dim]
			t := local[qi-lo]
			for d := p0; d < p1; d++ {
				t.Offer(index.Hit{DocID: v.ids[d], Score: float64(index.Dot(q, rows[(d-p0)*dim:(d-p0+1)*dim]))})
			}
		}
	}
	for i, t := range local {
		for _, h := range t.Hits() {
			h.DocID = strings.Clone(h.DocID) // the ids share one allocation per shard
			tops[lo+i].Offer(h)
		}
	}
}

// ForEach calls fn for every shard in order with its ids and its N×H vectors decoded to
// float32 (as a search scores them). vecs is valid only during the call (it may point into the
// mapping); ids may be kept. It stops at the first error.
func (r *Reader) ForEach(fn func(shard int, ids []string, vecs []float32) error) error {
	for s := range r.files {
		err := r.withShard(s, func(v *view) error {
			n := int(v.h.count)
			var vecs []float32
			if v.f32 != nil || n == 0 {
				vecs = v.f32
			} else {
				vecs = v.rows(0, n, make([]float32, n*int(v.h.dim)))
			}
			return fn(s, v.ids, vecs)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
