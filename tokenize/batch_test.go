package tokenize

import (
	"reflect"
	"slices"
	"testing"
)

func TestEncodeBatch(t *testing.T) {
	tk := bert(t, false)
	// "hello world" = 7592 2088; "unaffable" = 14477 20961 3468.
	tests := []struct {
		name      string
		texts     []string
		maxLen    int
		ids       []int
		mask      []float32
		truncated int
	}{
		{"padded", []string{"hello world"}, 6,
			[]int{101, 7592, 2088, 102, 0, 0}, []float32{1, 1, 1, 1, 0, 0}, 0},
		{"exact fit", []string{"unaffable"}, 5,
			[]int{101, 14477, 20961, 3468, 102}, []float32{1, 1, 1, 1, 1}, 0},
		{"cut keeps [SEP]", []string{"unaffable"}, 4,
			[]int{101, 14477, 20961, 102}, []float32{1, 1, 1, 1}, 1},
		{"two rows", []string{"unaffable hello", ""}, 4,
			[]int{101, 14477, 20961, 102, 101, 102, 0, 0}, []float32{1, 1, 1, 1, 1, 1, 0, 0}, 1},
		{"only specials", []string{"hello"}, 2,
			[]int{101, 102}, []float32{1, 1}, 1},
		{"empty batch", nil, 8, []int{}, []float32{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tk.EncodeBatch(tt.texts, tt.maxLen)
			if b.B != len(tt.texts) || b.L != tt.maxLen {
				t.Fatalf("shape %d×%d, want %d×%d", b.B, b.L, len(tt.texts), tt.maxLen)
			}
			if !slices.Equal(b.IDs, tt.ids) || !slices.Equal(b.Mask, tt.mask) || b.Truncated != tt.truncated {
				t.Errorf("ids %v mask %v truncated %d\nwant ids %v mask %v truncated %d", b.IDs, b.Mask, b.Truncated, tt.ids, tt.mask, tt.truncated)
			}
			if len(b.Types) != b.B*b.L || slices.ContainsFunc(b.Types, func(x int) bool { return x != 0 }) {
				t.Errorf("types %v, want %d zeros", b.Types, b.B*b.L)
			}
		})
	}
}

// TestEncodeBatchCranfield checks the invariants on every passage: fixed
// shape, [CLS] first, [SEP] last real token, mask = (id != [PAD]), and the
// truncation count equal to the passages longer than L-2 tokens.
func TestEncodeBatchCranfield(t *testing.T) {
	tk := bert(t, false)
	texts := cranfield(t, "corpus.jsonl")
	const L = 128
	b := tk.EncodeBatch(texts, L)
	if b.B != len(texts) || len(b.IDs) != b.B*L || len(b.Mask) != b.B*L || len(b.Types) != b.B*L {
		t.Fatalf("shape B %d L %d, lens %d %d %d", b.B, b.L, len(b.IDs), len(b.Mask), len(b.Types))
	}
	long, tokens, dropped := 0, 0, 0
	for i, text := range texts {
		ids := tk.Encode(text)
		n := min(len(ids), L-2)
		tokens, dropped = tokens+len(ids), dropped+len(ids)-n
		if len(ids) > L-2 {
			long++
		}
		row := b.Row(i)
		want := slices.Concat([]int{101}, ids[:n], []int{102})
		if !slices.Equal(row[:n+2], want) {
			t.Fatalf("row %d: got %v, want %v", i, row[:n+2], want)
		}
		for j, id := range row {
			real := j < n+2
			if (b.Mask[i*L+j] == 1) != real || (!real && id != tk.PadID()) {
				t.Fatalf("row %d col %d: id %d mask %v", i, j, id, b.Mask[i*L+j])
			}
		}
	}
	if b.Truncated != long || long == 0 {
		t.Errorf("truncated %d, want %d (> 0)", b.Truncated, long)
	}
	if b.Tokens != tokens || b.Dropped != dropped || dropped == 0 {
		t.Errorf("tokens %d dropped %d, want %d and %d (> 0)", b.Tokens, b.Dropped, tokens, dropped)
	}
}

func TestEncodePairBatch(t *testing.T) {
	tk := bert(t, false)
	q, p := "hello world", "unaffable x" // 7592 2088 | 14477 20961 3468 1060
	tests := []struct {
		name      string
		maxLen    int
		ids       []int
		types     []int
		truncated int
		dropped   int // of the 6 tokens of q and p
	}{
		{"fits with padding", 11,
			[]int{101, 7592, 2088, 102, 14477, 20961, 3468, 1060, 102, 0, 0},
			[]int{0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0}, 0, 0},
		{"passage cut", 7,
			[]int{101, 7592, 2088, 102, 14477, 20961, 102},
			[]int{0, 0, 0, 0, 1, 1, 1}, 1, 2},
		{"passage dropped", 5,
			[]int{101, 7592, 2088, 102, 102},
			[]int{0, 0, 0, 0, 1}, 1, 4},
		{"query cut too", 4,
			[]int{101, 7592, 102, 102},
			[]int{0, 0, 0, 1}, 1, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tk.EncodePairBatch([]string{q}, []string{p}, tt.maxLen)
			wantMask := make([]float32, tt.maxLen)
			for j, id := range tt.ids {
				if id != 0 {
					wantMask[j] = 1
				}
			}
			if b.B != 1 || b.L != tt.maxLen || !slices.Equal(b.IDs, tt.ids) || !slices.Equal(b.Types, tt.types) ||
				!slices.Equal(b.Mask, wantMask) || b.Truncated != tt.truncated {
				t.Errorf("B %d L %d ids %v types %v mask %v truncated %d\nwant ids %v types %v mask %v truncated %d",
					b.B, b.L, b.IDs, b.Types, b.Mask, b.Truncated, tt.ids, tt.types, wantMask, tt.truncated)
			}
			if b.Tokens != 6 || b.Dropped != tt.dropped {
				t.Errorf("tokens %d dropped %d, want 6 and %d", b.Tokens, b.Dropped, tt.dropped)
			}
		})
	}
}

// TestEncodePairBatchMatchesHuggingFace compares untruncated pairs with the
// Hugging Face pair encoding (ids and type ids).
func TestEncodePairBatchMatchesHuggingFace(t *testing.T) {
	tk, g := bert(t, false), loadGolden(t)
	const L = 512
	b := tk.EncodePairBatch(g.Pairs.Queries, g.Pairs.Passages, L)
	if b.Truncated != 0 || b.B != len(g.Pairs.IDs) {
		t.Fatalf("B %d truncated %d", b.B, b.Truncated)
	}
	for i, want := range g.Pairs.IDs {
		n := len(want)
		if got := b.Row(i)[:n]; !slices.Equal(got, want) {
			t.Errorf("pair %d ids:\n got %v\nwant %v", i, got, want)
		}
		if got := b.Types[i*L : i*L+n]; !slices.Equal(got, g.Pairs.Types[i]) {
			t.Errorf("pair %d types:\n got %v\nwant %v", i, got, g.Pairs.Types[i])
		}
		if b.Row(i)[n] != tk.PadID() || b.Mask[i*L+n-1] != 1 || b.Mask[i*L+n] != 0 {
			t.Errorf("pair %d: padding does not start at %d", i, n)
		}
	}
}

func TestEncodeBatchPanics(t *testing.T) {
	tk := bert(t, false)
	for name, f := range map[string]func(){
		"single maxLen 1": func() { tk.EncodeBatch([]string{"x"}, 1) },
		"pair maxLen 2":   func() { tk.EncodePairBatch([]string{"x"}, []string{"y"}, 2) },
		"pair lengths":    func() { tk.EncodePairBatch([]string{"x"}, nil, 8) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func BenchmarkEncodeBatchCranfield(b *testing.B) {
	tk := bert(b, false)
	texts := cranfield(b, "corpus.jsonl")
	for b.Loop() {
		tk.EncodeBatch(texts, 256)
	}
}

// TestBatchOfMatchesEncodeBatch: a batch built from stored token ids equals the batch encoded
// from the texts, field for field, with and without truncation.
func TestBatchOfMatchesEncodeBatch(t *testing.T) {
	tk := bert(t, false)
	texts := cranfield(t, "corpus.jsonl")[:300]
	ids := make([][]int, len(texts))
	for i, s := range texts {
		ids[i] = tk.Encode(s)
	}
	for _, maxLen := range []int{2, 16, 128, 512} {
		want := tk.EncodeBatch(texts, maxLen)
		got := tk.BatchOf(ids, maxLen)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("maxLen %d: BatchOf differs from EncodeBatch", maxLen)
		}
		if maxLen == 16 && want.Truncated == 0 || maxLen == 512 && want.Truncated > 10 {
			t.Fatalf("maxLen %d: %d truncated: the cases do not cover truncation", maxLen, want.Truncated)
		}
	}
}
