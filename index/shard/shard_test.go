package shard

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/index"
)

// corpus is n ids and n×dim vectors; with ties, values are small integers over 8 and rows
// repeat, so that many scores are equal and the DocID order decides.
func corpus(seed uint64, n, dim int, ties bool) ([]string, []float32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("d%d", rng.IntN(1<<30)) + fmt.Sprintf("-%d", i)
	}
	rng.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	vecs := make([]float32, n*dim)
	for i := range vecs {
		if ties {
			vecs[i] = float32(rng.IntN(5)-2) / 8
		} else {
			vecs[i] = float32(rng.NormFloat64())
		}
	}
	if ties {
		for r := 1; r < n; r += 3 { // every third row repeats the one before
			copy(vecs[r*dim:(r+1)*dim], vecs[(r-1)*dim:r*dim])
		}
	}
	return ids, vecs
}

// writeAll splits the rows at the given boundaries (shard i = rows cuts[i]..cuts[i+1]-1) and
// commits them.
func writeAll(t *testing.T, dir string, meta Meta, ids []string, vecs []float32, cuts []int) *Manifest {
	t.Helper()
	for i := 0; i+1 < len(cuts); i++ {
		lo, hi := cuts[i], cuts[i+1]
		if _, err := WriteShard(dir, meta, i, ids[lo:hi], vecs[lo*meta.Dim:hi*meta.Dim]); err != nil {
			t.Fatal(err)
		}
	}
	m, err := CommitManifest(dir, meta, len(cuts)-1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestRoundTrip(t *testing.T) {
	for _, dt := range []DType{Float32, Float16, Int8PerVector, Int8PerDim} {
		t.Run(dt.String(), func(t *testing.T) {
			dir := t.TempDir()
			const dim = 7
			ids, vecs := corpus(1, 50, dim, false)
			meta := Meta{ModelHash: "abc123", Version: "v1", Dim: dim, DType: dt}
			m := writeAll(t, dir, meta, ids, vecs, []int{0, 20, 20, 50})
			if m.Count != 50 || len(m.Shards) != 3 || m.Shards[1].Count != 0 || m.DType != dt.String() {
				t.Fatalf("manifest %+v", m)
			}
			for _, e := range m.Shards {
				if got := fileSHA(t, filepath.Join(dir, e.File)); got != e.SHA256 {
					t.Errorf("%s: sha256 %s, manifest %s", e.File, got, e.SHA256)
				}
			}
			r, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.Verify(); err != nil {
				t.Fatal(err)
			}
			var gotIDs []string
			var gotVecs []float32
			err = r.ForEach(func(_ int, ids []string, v []float32) error {
				gotIDs = append(gotIDs, ids...)
				gotVecs = append(gotVecs, v...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(gotIDs, ids) {
				t.Fatalf("ids differ")
			}
			// float32 is exact; float16 within half an ulp of 2^-10 relative; int8 within half a
			// step of the scale.
			for j, want := range vecs {
				got := gotVecs[j]
				var tol float64
				switch dt {
				case Float16:
					tol = math.Abs(float64(want)) / 2048
				case Int8PerVector, Int8PerDim:
					tol = 0.5 * 4 / 127 * 1.001 // |x| < 4 for these normals with this seed
				}
				if math.Abs(float64(got-want)) > tol {
					t.Fatalf("value %d: got %v, want %v ± %g", j, got, want, tol)
				}
			}
		})
	}
}

func TestWriteShardDeterministic(t *testing.T) {
	dir := t.TempDir()
	ids, vecs := corpus(2, 30, 5, false)
	meta := Meta{ModelHash: "h", Version: "7", Dim: 5, DType: Int8PerDim}
	a, err := WriteShard(dir, meta, 0, ids, vecs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := WriteShard(dir, meta, 0, ids, vecs)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.SHA256 != fileSHA(t, filepath.Join(dir, a.File)) {
		t.Fatalf("rewrite gave %+v then %+v", a, b)
	}
}

// TestMatchesFlat checks that the sharded search returns Flat's hits exactly, score bits and
// tie order included, whatever the split and k.
func TestMatchesFlat(t *testing.T) {
	for _, ties := range []bool{false, true} {
		const n, dim = 1100, 13 // dim not a multiple of 4: Dot's tail lane is used
		ids, vecs := corpus(3, n, dim, ties)
		flat, err := index.NewFlat(ids, vecs, dim)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		writeAll(t, dir, Meta{ModelHash: "m", Version: "1", Dim: dim, DType: Float32}, ids, vecs,
			[]int{0, 1, 300, 300, 557, n})
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, qs := corpus(4, 37, dim, ties)
		tied := 0
		for _, k := range []int{0, 1, 10, 256, n, n + 5} {
			batch, err := r.SearchBatch(qs, k)
			if err != nil {
				t.Fatal(err)
			}
			for b := range 37 {
				q := qs[b*dim : (b+1)*dim]
				want := flat.Search(q, k)
				got, err := r.Search(q, k)
				if err != nil {
					t.Fatal(err)
				}
				if !sameHits(got, want) || !sameHits(batch[b], want) {
					t.Fatalf("ties=%v k=%d query %d: sharded hits differ from Flat's", ties, k, b)
				}
				for i := 1; i < len(want); i++ {
					if want[i].Score == want[i-1].Score {
						tied++
					}
				}
			}
		}
		if ties && tied < 1000 {
			t.Fatalf("only %d tied neighbours: the tie test tests nothing", tied)
		}
		r.Close()
	}
}

// sameHits compares ids and score bits.
func sameHits(a, b []index.Hit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].DocID != b[i].DocID || math.Float64bits(a[i].Score) != math.Float64bits(b[i].Score) {
			return false
		}
	}
	return true
}

// TestCommitRefuses breaks one shard in each way and checks the one error names the file, and
// that the previous manifest stays.
func TestCommitRefuses(t *testing.T) {
	const dim = 4
	ids, vecs := corpus(5, 40, dim, false)
	meta := Meta{ModelHash: "model-A", Version: "2", Dim: dim, DType: Float32}
	shard1 := ShardFile("2", 1)
	cases := []struct {
		name    string
		corrupt func(t *testing.T, dir string)
		want    string // in the error, after the file name
	}{
		{"missing", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, shard1))
		}, "missing (shard 1 of the 3"},
		{"other model hash", func(t *testing.T, dir string) {
			m := meta
			m.ModelHash = "model-B"
			if _, err := WriteShard(dir, m, 1, ids[10:20], vecs[10*dim:20*dim]); err != nil {
				t.Fatal(err)
			}
		}, `model hash "model-B", want "model-A"`},
		{"other dtype", func(t *testing.T, dir string) {
			m := meta
			m.DType = Float16
			if _, err := WriteShard(dir, m, 1, ids[10:20], vecs[10*dim:20*dim]); err != nil {
				t.Fatal(err)
			}
		}, "dtype float16, want float32"},
		{"truncated", func(t *testing.T, dir string) {
			p := filepath.Join(dir, shard1)
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-3)
		}, "truncated"},
		{"truncated header", func(t *testing.T, dir string) {
			os.Truncate(filepath.Join(dir, shard1), 10)
		}, "truncated: 10 bytes"},
		{"not a shard", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, shard1), []byte(strings.Repeat("x", 100)), 0o644)
		}, "bad magic"},
		{"duplicate id across shards", func(t *testing.T, dir string) {
			dupIDs := slices.Clone(ids[10:20])
			dupIDs[3] = ids[2]
			if _, err := WriteShard(dir, meta, 1, dupIDs, vecs[10*dim:20*dim]); err != nil {
				t.Fatal(err)
			}
		}, fmt.Sprintf("id %q is also in shard %s", ids[2], ShardFile("2", 0))},
		{"stray shard", func(t *testing.T, dir string) {
			if _, err := WriteShard(dir, meta, 3, ids[:1], vecs[:dim]); err != nil {
				t.Fatal(err)
			}
		}, "unexpected shard file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			old := writeAll(t, dir, Meta{ModelHash: "old", Version: "1", Dim: dim, DType: Float32}, ids, vecs, []int{0, 40})
			for i, cut := range [][2]int{{0, 10}, {10, 20}, {20, 40}} {
				if _, err := WriteShard(dir, meta, i, ids[cut[0]:cut[1]], vecs[cut[0]*dim:cut[1]*dim]); err != nil {
					t.Fatal(err)
				}
			}
			tc.corrupt(t, dir)
			_, err := CommitManifest(dir, meta, 3)
			if err == nil {
				t.Fatal("commit succeeded")
			}
			file := shard1
			if tc.name == "stray shard" {
				file = ShardFile("2", 3)
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, file)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want the file %s and %q", err, file, tc.want)
			}
			m, err := ReadManifest(dir)
			if err != nil || !reflect.DeepEqual(m, old) {
				t.Fatalf("manifest changed: %+v, %v", m, err)
			}
		})
	}
}

// TestOpenRefuses breaks a committed version: Open catches a missing, truncated or swapped
// shard, Verify a changed byte.
func TestOpenRefuses(t *testing.T) {
	const dim = 4
	ids, vecs := corpus(6, 30, dim, false)
	meta := Meta{ModelHash: "m", Version: "3", Dim: dim, DType: Float32}
	setup := func(t *testing.T) (string, string) {
		dir := t.TempDir()
		writeAll(t, dir, meta, ids, vecs, []int{0, 15, 30})
		return dir, filepath.Join(dir, ShardFile("3", 1))
	}
	t.Run("missing", func(t *testing.T) {
		dir, p := setup(t)
		os.Remove(p)
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), p+": missing") {
			t.Fatalf("Open: %v", err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		dir, p := setup(t)
		st, _ := os.Stat(p)
		os.Truncate(p, st.Size()-1)
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), p+": truncated") {
			t.Fatalf("Open: %v", err)
		}
	})
	t.Run("other model", func(t *testing.T) {
		dir, p := setup(t)
		m := meta
		m.ModelHash = "other"
		if _, err := WriteShard(dir, m, 1, ids[15:], vecs[15*dim:]); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), p+`: model hash "other"`) {
			t.Fatalf("Open: %v", err)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		dir, p := setup(t)
		b, _ := os.ReadFile(p)
		b[len(b)-2] ^= 0x40 // a vector byte: header and size still agree
		os.WriteFile(p, b, 0o644)
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := r.Verify(); err == nil || !strings.Contains(err.Error(), p+": sha256") {
			t.Fatalf("Verify: %v", err)
		}
	})
}

// TestVersionsDoNotMix opens version 1, commits version 2 into the same directory and checks
// that the open reader still serves version 1 only, and a new one version 2 only.
func TestVersionsDoNotMix(t *testing.T) {
	const dim = 3
	dir := t.TempDir()
	ids := []string{"a", "b", "c", "d"}
	v1 := []float32{1, 0, 0, 2, 0, 0, 3, 0, 0, 4, 0, 0}
	writeAll(t, dir, Meta{ModelHash: "m1", Version: "1", Dim: dim, DType: Float32}, ids, v1, []int{0, 2, 4})
	r1, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	v2 := []float32{40, 0, 0, 30, 0, 0, 20, 0, 0, 10, 0, 0}
	writeAll(t, dir, Meta{ModelHash: "m2", Version: "2", Dim: dim, DType: Float32}, ids, v2, []int{0, 1, 4})
	q := []float32{1, 0, 0}
	got1, err := r1.Search(q, 4)
	if err != nil {
		t.Fatal(err)
	}
	want1 := []index.Hit{{DocID: "d", Score: 4}, {DocID: "c", Score: 3}, {DocID: "b", Score: 2}, {DocID: "a", Score: 1}}
	if !reflect.DeepEqual(got1, want1) {
		t.Fatalf("old reader: %v, want %v", got1, want1)
	}
	r2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	got2, _ := r2.Search(q, 4)
	want2 := []index.Hit{{DocID: "a", Score: 40}, {DocID: "b", Score: 30}, {DocID: "c", Score: 20}, {DocID: "d", Score: 10}}
	if !reflect.DeepEqual(got2, want2) || r2.Meta().ModelHash != "m2" {
		t.Fatalf("new reader: %v, want %v", got2, want2)
	}
	removed, err := RemoveStale(dir)
	if err != nil || !slices.Equal(removed, []string{ShardFile("1", 0), ShardFile("1", 1)}) {
		t.Fatalf("RemoveStale: %v, %v", removed, err)
	}
	// The open version-1 reader holds its files open: it still answers.
	if got, err := r1.Search(q, 4); err != nil || !reflect.DeepEqual(got, want1) {
		t.Fatalf("old reader after RemoveStale: %v, %v", got, err)
	}
}

func TestWriteShardRefuses(t *testing.T) {
	dir := t.TempDir()
	meta := Meta{ModelHash: "m", Version: "1", Dim: 2, DType: Float16}
	cases := []struct {
		meta Meta
		ids  []string
		vecs []float32
		want string
	}{
		{meta, []string{"a"}, []float32{1}, "1 values for 1 ids × dim 2"},
		{meta, []string{"a", "a"}, []float32{1, 2, 3, 4}, `id "a" at rows 0 and 1`},
		{meta, []string{"a", ""}, []float32{1, 2, 3, 4}, "empty id at row 1"},
		{meta, []string{"a"}, []float32{1, float32(math.NaN())}, "row 0 (id \"a\") column 1 is NaN"},
		{meta, []string{"a"}, []float32{1, 70000}, "beyond float16's range"},
		{Meta{ModelHash: "m", Version: "a/b", Dim: 2, DType: Float32}, []string{"a"}, []float32{1, 2}, "version \"a/b\""},
		{Meta{ModelHash: "", Version: "1", Dim: 2, DType: Float32}, []string{"a"}, []float32{1, 2}, "model hash"},
	}
	for _, tc := range cases {
		_, err := WriteShard(dir, tc.meta, 0, tc.ids, tc.vecs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WriteShard(%v): %v, want %q", tc.ids, err, tc.want)
		}
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 0 {
		t.Fatalf("files left: %v", names)
	}
}

// TestQuantizedRecall measures recall@10 of the float16 and int8 dtypes against float32 exact
// search on clustered unit vectors (the shape of real embeddings: queries near passages).
func TestQuantizedRecall(t *testing.T) {
	const n, dim, nq, k = 6000, 64, 200, 10
	rng := rand.New(rand.NewPCG(7, 7))
	centers := make([]float32, 60*dim)
	for i := range centers {
		centers[i] = float32(rng.NormFloat64())
	}
	point := func() []float32 {
		c := rng.IntN(60)
		v := make([]float32, dim)
		for j := range v {
			v[j] = centers[c*dim+j] + 0.6*float32(rng.NormFloat64())
		}
		return v
	}
	ids := make([]string, n)
	var vecs, qs []float32
	for i := range ids {
		ids[i] = fmt.Sprintf("p%05d", i)
		vecs = append(vecs, point()...)
	}
	for range nq {
		qs = append(qs, point()...)
	}
	index.NormalizeRows(vecs, dim)
	index.NormalizeRows(qs, dim)
	search := func(dt DType) [][]index.Hit {
		dir := t.TempDir()
		writeAll(t, dir, Meta{ModelHash: "m", Version: "1", Dim: dim, DType: dt}, ids, vecs, []int{0, 2500, n})
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		hits, err := r.SearchBatch(qs, k)
		if err != nil {
			t.Fatal(err)
		}
		return hits
	}
	exact := search(Float32)
	// Measured: float16 0.998, int8-per-vector 0.9815, int8-per-dim 0.973 (seed 7).
	for _, tc := range []struct {
		dt  DType
		min float64
	}{{Float16, 0.995}, {Int8PerVector, 0.95}, {Int8PerDim, 0.94}} {
		got := search(tc.dt)
		var found int
		for b := range nq {
			want := make(map[string]bool, k)
			for _, h := range exact[b] {
				want[h.DocID] = true
			}
			for _, h := range got[b] {
				if want[h.DocID] {
					found++
				}
			}
		}
		recall := float64(found) / float64(nq*k)
		t.Logf("%v: recall@%d vs float32 = %.4f", tc.dt, k, recall)
		if recall < tc.min || recall == 1 && tc.dt != Float16 {
			t.Errorf("%v: recall@%d = %.4f, want >= %.3f (and < 1: quantization must cost something)", tc.dt, k, recall, tc.min)
		}
	}
}

// TestHalf checks the float16 conversion: every half survives float32 and back, and random
// float32 values round to the nearest half, ties to even.
func TestHalf(t *testing.T) {
	for h := range 1 << 16 {
		f := halfToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if got := float32ToHalf(f); got != uint16(h) {
			t.Fatalf("half %#04x -> %v -> %#04x", h, f, got)
		}
	}
	if got := halfToFloat32(0x3c00); got != 1 {
		t.Fatalf("0x3c00 = %v, want 1", got)
	}
	if got := halfToFloat32(0x0001); got != float32(math.Ldexp(1, -24)) {
		t.Fatalf("0x0001 = %v, want 2^-24", got)
	}
	if got := float32ToHalf(1 + 1.0/2048); got != 0x3c00 { // tie between 1 and 1+2^-10: even
		t.Fatalf("1+2^-11 -> %#04x, want 0x3c00", got)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	for range 200000 {
		f := math.Float32frombits(rng.Uint32())
		if math.IsNaN(float64(f)) || math.Abs(float64(f)) > 65504 {
			continue
		}
		h := float32ToHalf(f)
		got := float64(halfToFloat32(h))
		// The neighbours of h must not be strictly nearer.
		for _, nb := range []uint16{h - 1, h + 1} {
			if nb&0x7c00 == 0x7c00 || (h&0x7fff == 0 && nb == h-1) {
				continue
			}
			alt := float64(halfToFloat32(nb))
			if d, da := math.Abs(got-float64(f)), math.Abs(alt-float64(f)); da < d || (da == d && h&1 == 1) {
				t.Fatalf("%v -> %#04x (%v), but %#04x (%v) is nearer or the even tie", f, h, got, nb, alt)
			}
		}
	}
}

// TestWriteAll splits 1000 rows into shards of 300 (4 shards: 300, 300, 300, 100) and serves
// Flat's hits.
func TestWriteAll(t *testing.T) {
	const dim = 8
	ids, vecs := corpus(9, 1000, dim, true)
	dir := t.TempDir()
	m, err := WriteAll(dir, Meta{ModelHash: "m", Version: "w", Dim: dim, DType: Float32}, ids, vecs, 300)
	if err != nil {
		t.Fatal(err)
	}
	var counts []int64
	for _, e := range m.Shards {
		counts = append(counts, e.Count)
	}
	if !slices.Equal(counts, []int64{300, 300, 300, 100}) || m.Count != 1000 {
		t.Fatalf("shard counts %v, total %d", counts, m.Count)
	}
	flat, _ := index.NewFlat(ids, vecs, dim)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Search(vecs[:dim], 50)
	if err != nil || !sameHits(got, flat.Search(vecs[:dim], 50)) {
		t.Fatalf("hits differ from Flat's: %v", err)
	}
	if _, err := r.Search(vecs[:2*dim], 5); err == nil || !strings.Contains(err.Error(), "query has 16 values, dim is 8") {
		t.Fatalf("two rows as one query: %v", err)
	}
	if _, err := r.SearchBatch(vecs[:dim+1], 5); err == nil {
		t.Fatal("SearchBatch accepted 9 values at dim 8")
	}
	if _, err := WriteAll(t.TempDir(), Meta{ModelHash: "m", Version: "w", Dim: dim, DType: Float32}, ids, vecs, 0); err == nil {
		t.Fatal("shard size 0 accepted")
	}
}

// TestCommitShards: the entries WriteShard returned commit; a shard rewritten with other
// vectors since, or with a flipped byte, is refused naming the file.
func TestCommitShards(t *testing.T) {
	const dim = 4
	ids, vecs := corpus(13, 20, dim, false)
	meta := Meta{ModelHash: "m", Version: "5", Dim: dim, DType: Float32}
	write := func(dir string) []ShardEntry {
		var es []ShardEntry
		for i, cut := range [][2]int{{0, 10}, {10, 20}} {
			e, err := WriteShard(dir, meta, i, ids[cut[0]:cut[1]], vecs[cut[0]*dim:cut[1]*dim])
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
		}
		return es
	}
	dir := t.TempDir()
	es := write(dir)
	m, err := CommitShards(dir, meta, es)
	if err != nil || !reflect.DeepEqual(m.Shards, es) {
		t.Fatalf("CommitShards: %v, %+v", err, m)
	}
	p := filepath.Join(dir, ShardFile("5", 1))
	other := slices.Clone(vecs[10*dim:])
	other[0]++
	if _, err := WriteShard(dir, meta, 1, ids[10:], other); err != nil { // a second attempt, other bytes
		t.Fatal(err)
	}
	if _, err := CommitShards(dir, meta, es); err == nil || !strings.Contains(err.Error(), p+": 10 passages") ||
		!strings.Contains(err.Error(), "replaced or corrupt") {
		t.Fatalf("replaced shard: %v", err)
	}
	if _, err := CommitShards(dir, meta, es[1:]); err == nil || !strings.Contains(err.Error(), "entry 0 is") {
		t.Fatalf("entries out of place: %v", err)
	}
}
