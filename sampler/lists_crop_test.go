package sampler

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// cropWorld is 30 passages p0..p29; passage pi holds the words "w<i> w<i+1> ... w<i+9>" (so
// neighbours share words), except p29, which is empty. Its search ranks by the number of words
// shared with the query, ties by id, and records every query it is asked.
func cropWorld() (Collection, func(string, int) ([]string, error), *[]string) {
	var c Collection
	for i := range 30 {
		c.DocIDs = append(c.DocIDs, fmt.Sprint("p", i))
		var words []string
		for j := i; j < i+10 && i < 29; j++ {
			words = append(words, fmt.Sprint("w", j))
		}
		c.DocTexts = append(c.DocTexts, strings.Join(words, " "))
	}
	var asked []string
	search := func(q string, n int) ([]string, error) {
		asked = append(asked, q)
		type hit struct {
			id    string
			score int
		}
		var hits []hit
		for i, text := range c.DocTexts {
			s := 0
			for _, w := range strings.Fields(q) {
				if slices.Contains(strings.Fields(text), w) {
					s++
				}
			}
			if s > 0 {
				hits = append(hits, hit{c.DocIDs[i], s})
			}
		}
		slices.SortStableFunc(hits, func(a, b hit) int { return b.score - a.score })
		var ids []string
		for _, h := range hits[:min(n, len(hits))] {
			ids = append(ids, h.id)
		}
		return ids, nil
	}
	return c, search, &asked
}

func TestCropListsPositiveIsTheSource(t *testing.T) {
	c, search, asked := cropWorld()
	o := CropListOptions{Size: 4, BatchSize: 5, MinLen: 2, MaxLen: 4, Depth: 6, Seed: 3}
	l, err := NewCropLists(c, search, o)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 20 {
		*asked = (*asked)[:0]
		b, err := l.Batch(step)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.QueryIDs) != 5 || b.K != 4 || len(b.DocIDs) != 20 || len(b.Passages) != 20 || len(b.Labels) != 20 {
			t.Fatalf("step %d: batch shape %d lists, K %d, %d docs", step, len(b.QueryIDs), b.K, len(b.DocIDs))
		}
		var sources []string
		for i, q := range b.Queries {
			list := b.DocIDs[i*4 : (i+1)*4]
			src := list[0]
			sources = append(sources, src)
			if b.QueryIDs[i] != "crop:"+src || b.Labels[i*4] != 1 || (*asked)[i] != q {
				t.Fatalf("step %d list %d: id %s, slot 0 %s label %d, searched %q for %q", step, i, b.QueryIDs[i], src, b.Labels[i*4], (*asked)[i], q)
			}
			// The query is a span of 2..4 consecutive words of the source passage.
			words := strings.Fields(q)
			text := c.DocTexts[slices.Index(c.DocIDs, src)]
			if len(words) < 2 || len(words) > 4 || !strings.Contains(" "+text+" ", " "+q+" ") {
				t.Fatalf("step %d: query %q is not a 2-4 word span of %s %q", step, q, src, text)
			}
			// Negatives: distinct, not the source, labelled 0, in the search's top 6, in rank order.
			top, _ := search(q, 7)
			top = slices.DeleteFunc(top, func(s string) bool { return s == src })[:min(6, len(top)-1)]
			last := -1
			for j, d := range list[1:] {
				r := slices.Index(top, d)
				if d == src || slices.Contains(list[:j+1], d) || b.Labels[i*4+1+j] != 0 || r < 0 || r < last {
					t.Fatalf("step %d list %d: negatives %v for top %v", step, i, list[1:], top)
				}
				last = r
				if b.Passages[i*4+1+j] != c.DocTexts[slices.Index(c.DocIDs, d)] {
					t.Fatalf("step %d: passage text of %s", step, d)
				}
			}
		}
		slices.Sort(sources)
		if len(slices.Compact(sources)) != 5 || slices.Contains(sources, "p29") {
			t.Fatalf("step %d: sources %v, want 5 distinct passages with words", step, sources)
		}
		if again, _ := l.Batch(step); !reflect.DeepEqual(again, b) {
			t.Fatalf("step %d: a second call deals other lists", step)
		}
	}
}

// TestCropListsFillShortLists: a span whose search finds fewer than K-1 other passages gets
// random ones, counted.
func TestCropListsFillShortLists(t *testing.T) {
	c, _, _ := cropWorld()
	only := func(string, int) ([]string, error) { return []string{"p3"}, nil } // the source or one other
	l, err := NewCropLists(c, only, CropListOptions{Size: 4, BatchSize: 2, MinLen: 1, MaxLen: 1, Depth: 5, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for i := range 2 {
		list := b.DocIDs[i*4 : (i+1)*4]
		if list[0] == "p3" {
			want += 3
		} else {
			want += 2
			if list[1] != "p3" {
				t.Errorf("list %v: the one search hit is not its first negative", list)
			}
		}
		s := slices.Clone(list)
		slices.Sort(s)
		if len(slices.Compact(s)) != 4 {
			t.Errorf("list %v repeats a passage", list)
		}
	}
	if b.RandomFills != want {
		t.Errorf("%d random fills, want %d", b.RandomFills, want)
	}
}

func TestCropListsErrors(t *testing.T) {
	c, search, _ := cropWorld()
	ok := CropListOptions{Size: 4, BatchSize: 2, MinLen: 1, MaxLen: 3, Depth: 5}
	cases := []struct {
		name string
		edit func(*CropListOptions, *Collection, *func(string, int) ([]string, error))
		want string
	}{
		{"K", func(o *CropListOptions, _ *Collection, _ *func(string, int) ([]string, error)) { o.Size = 1 }, "list size 1"},
		{"B", func(o *CropListOptions, _ *Collection, _ *func(string, int) ([]string, error)) { o.BatchSize = 30 }, "29 passages with words"},
		{"lengths", func(o *CropListOptions, _ *Collection, _ *func(string, int) ([]string, error)) { o.MaxLen = 0 }, "crop lengths [1, 0]"},
		{"depth", func(o *CropListOptions, _ *Collection, _ *func(string, int) ([]string, error)) { o.Depth = 0 }, "depth 0"},
		{"duplicate", func(_ *CropListOptions, c *Collection, _ *func(string, int) ([]string, error)) {
			c.DocIDs = slices.Clone(c.DocIDs)
			c.DocIDs[4] = "p3"
		}, `"p3" appears twice`},
	}
	for _, tc := range cases {
		o, cc, s := ok, c, search
		tc.edit(&o, &cc, &s)
		if _, err := NewCropLists(cc, s, o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	stray := func(string, int) ([]string, error) { return []string{"nope"}, nil }
	l, err := NewCropLists(c, stray, ok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Batch(0); err == nil || !strings.Contains(err.Error(), `"nope", which is not in the corpus`) {
		t.Errorf("stray search hit: err = %v", err)
	}
}

// TestCropListsWindow: with Window w every span lies in the first w words of its passage.
func TestCropListsWindow(t *testing.T) {
	c, search, _ := cropWorld()
	l, err := NewCropLists(c, search, CropListOptions{Size: 3, BatchSize: 6, MinLen: 1, MaxLen: 3, Depth: 4, Window: 4, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	lates := 0
	for step := range 10 {
		b, err := l.Batch(step)
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range b.Queries {
			src := b.DocIDs[i*3]
			first := strings.Fields(c.DocTexts[slices.Index(c.DocIDs, src)])[:4]
			for _, w := range strings.Fields(q) {
				if !slices.Contains(first, w) {
					t.Fatalf("step %d: query %q of %s has %q, not among its first 4 words %v", step, q, src, w, first)
				}
			}
			if strings.Contains(q, first[3]) {
				lates++
			}
		}
	}
	if lates == 0 {
		t.Error("no span reached the 4th word: the window is narrower than asked")
	}
	if _, err := NewCropLists(c, search, CropListOptions{Size: 3, BatchSize: 2, MinLen: 1, MaxLen: 3, Depth: 4, Window: -1}); err == nil {
		t.Error("negative window accepted")
	}
}
