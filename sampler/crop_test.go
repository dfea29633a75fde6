package sampler

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// isSpan reports whether span is a run of consecutive words of words.
func isSpan(span string, words []string) bool {
	sw := strings.Fields(span)
	for i := 0; i+len(sw) <= len(words); i++ {
		if slices.Equal(words[i:i+len(sw)], sw) {
			return true
		}
	}
	return false
}

func TestCropPairsWorked(t *testing.T) {
	long := make([]string, 100)
	for i := range long {
		long[i] = fmt.Sprint("w", i)
	}
	corpus := []string{
		"",                       // never drawn
		"  \t ",                  // no words: never drawn
		"three short words",      // shorter than minLen: both spans are the whole text
		strings.Join(long, "  "), // long: spans of 4..6 words
		"a b c d e",              // 5 words: spans of 4 or 5 words, 6 clipped to 5
	}
	const minLen, maxLen = 4, 6
	lengths := map[int]int{}
	for step := range 300 {
		b, err := CropPairs(corpus, 3, minLen, maxLen, step, 7)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Sorted(slices.Values(b.DocIndex)); !slices.Equal(got, []int{2, 3, 4}) {
			t.Fatalf("step %d drew documents %v, want the three with words", step, b.DocIndex)
		}
		clipped := 0
		for i, d := range b.DocIndex {
			words := strings.Fields(corpus[d])
			for _, sp := range []string{b.Queries[i], b.Positives[i]} {
				n := len(strings.Fields(sp))
				if !isSpan(sp, words) {
					t.Fatalf("step %d: %q is not a span of document %d", step, sp, d)
				}
				switch d {
				case 2:
					if sp != "three short words" {
						t.Fatalf("step %d: span %q of a 3-word document", step, sp)
					}
					clipped++
				case 3:
					if n < minLen || n > maxLen {
						t.Fatalf("step %d: span of %d words", step, n)
					}
					lengths[n]++
				case 4:
					if n < 4 || n > 5 {
						t.Fatalf("step %d: span of %d words in a 5-word document", step, n)
					}
				}
			}
		}
		if b.Clipped < clipped {
			t.Fatalf("step %d: %d clipped counted, at least %d", step, b.Clipped, clipped)
		}
	}
	// lengths uniform on {4, 5, 6}: 600 spans, 200 each, sd ≈ 11.5
	for n := minLen; n <= maxLen; n++ {
		if lengths[n] < 140 || lengths[n] > 260 {
			t.Errorf("length %d drawn %d times of 600, want about 200", n, lengths[n])
		}
	}
}

func TestCropPairsDeterministic(t *testing.T) {
	c := loadCranfield(t)
	a, err := CropPairs(c.docTexts, 64, 8, 32, 7, 42)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 7 {
		CropPairs(c.docTexts, 64, 8, 32, step, 42)
	}
	b, _ := CropPairs(c.docTexts, 64, 8, 32, 7, 42)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same (seed, step), different batch")
	}
	other, _ := CropPairs(c.docTexts, 64, 8, 32, 8, 42)
	reseed, _ := CropPairs(c.docTexts, 64, 8, 32, 7, 43)
	if reflect.DeepEqual(a.DocIndex, other.DocIndex) || reflect.DeepEqual(a.DocIndex, reseed.DocIndex) {
		t.Fatal("another step or seed gives the same documents")
	}
	// the query and positive of a pair are drawn independently: usually different spans
	same, clipped := 0, 0
	for step := range 100 {
		b, err := CropPairs(c.docTexts, 64, 8, 32, step, 42)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.DocIndex) != 64 || len(slices.Compact(slices.Sorted(slices.Values(b.DocIndex)))) != 64 {
			t.Fatalf("step %d: %d documents, not 64 distinct", step, len(b.DocIndex))
		}
		for i, d := range b.DocIndex {
			words := strings.Fields(c.docTexts[d])
			for _, sp := range []string{b.Queries[i], b.Positives[i]} {
				n := len(strings.Fields(sp))
				if !isSpan(sp, words) || n > 32 || (n < 8 && n != len(words)) {
					t.Fatalf("step %d: span of %d words (document of %d)", step, n, len(words))
				}
			}
			if b.Queries[i] == b.Positives[i] {
				same++
			}
		}
		clipped += b.Clipped
	}
	if same > 100*64/20 {
		t.Fatalf("%d of 6400 pairs have identical spans", same)
	}
	t.Logf("100 crop batches of 64 from Cranfield: %d identical pairs, %d clipped spans", same, clipped)
}

func TestCropPairsErrors(t *testing.T) {
	corpus := []string{"one two", "", "three four five"}
	cases := []struct {
		b, lo, hi, step int
		want            string
	}{
		{3, 1, 2, 0, "crop batch size 3 exceeds the 2 documents with words"},
		{0, 1, 2, 0, "crop batch size 0"},
		{1, 0, 2, 0, "crop lengths [0, 2]"},
		{1, 3, 2, 0, "crop lengths [3, 2]"},
		{1, 1, 2, -1, "step -1"},
	}
	for _, c := range cases {
		if _, err := CropPairs(corpus, c.b, c.lo, c.hi, c.step, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c, err, c.want)
		}
	}
}

// CropPairsFunc over text(i) gives CropPairs' batch of the same texts.
func TestCropPairsFuncIsCropPairs(t *testing.T) {
	c := loadCranfield(t)
	for step := range 5 {
		a, err := CropPairs(c.docTexts, 64, 8, 32, step, 42)
		if err != nil {
			t.Fatal(err)
		}
		b, err := CropPairsFunc(len(c.docTexts), func(i int) string { return c.docTexts[i] }, 64, 8, 32, step, 42)
		if err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("step %d: CropPairsFunc differs (%v)", step, err)
		}
	}
}
