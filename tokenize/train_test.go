package tokenize

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// hugCorpus is the Hugging Face course's WordPiece example: hug×10, pug×5,
// pun×12, bun×4, hugs×5 (mixed case, to exercise Lowercase).
func hugCorpus() []string {
	return []string{
		strings.Repeat("hug ", 9) + "Hug",
		strings.Repeat("pug ", 5),
		strings.Repeat("pun ", 12),
		strings.Repeat("bun ", 4),
		strings.Repeat("HUGS ", 5),
	}
}

// TestTrainWorkedExample checks the vocabulary against merges worked by
// hand. Alphabet: b h p (5-7), ##g ##n ##s ##u (8-11). Pair counts
// (h,##u) 15, (##u,##g) 20, (p,##u) 17, (##u,##n) 16, (b,##u) 4, (##g,##s) 5.
// Merges: ##ug (20); ##un (16); hug (h,##ug 15); pun (p,##un 12);
// pug (p,##ug 5, tied with hug,##s 5 but p=7 < hug=14); hugs (5); bun (4).
func TestTrainWorkedExample(t *testing.T) {
	all := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "b", "h", "p", "##g", "##n", "##s", "##u",
		"##ug", "##un", "hug", "pun", "pug", "hugs", "bun"}
	tests := []struct {
		opts TrainOptions
		want []string
	}{
		{TrainOptions{VocabSize: 19, Lowercase: true}, all},
		{TrainOptions{VocabSize: 100, Lowercase: true}, all}, // merges run out
		{TrainOptions{VocabSize: 17, Lowercase: true}, all[:17]},
		{TrainOptions{VocabSize: 100, MinFrequency: 6, Lowercase: true}, all[:16]},
	}
	for _, tt := range tests {
		tk, err := Train(hugCorpus(), tt.opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tk.tokens, tt.want) {
			t.Errorf("%+v:\n got %q\nwant %q", tt.opts, tk.tokens, tt.want)
		}
	}
	tk, err := Train(hugCorpus(), TrainOptions{VocabSize: 19, Lowercase: true})
	if err != nil {
		t.Fatal(err)
	}
	// hugs=17 pun=15 b ##ug=5 12 z=[UNK]
	if got, want := framed(tk, "Hugs pun bug z"), []int{2, 17, 15, 5, 12, 1, 3}; !slices.Equal(got, want) {
		t.Errorf("encode: got %v, want %v", got, want)
	}
	if tk.PadID() != 0 || tk.UnkID() != 1 || tk.CLSID() != 2 || tk.SEPID() != 3 || tk.MaskID() != 4 {
		t.Errorf("specials %d %d %d %d %d, want 0..4", tk.PadID(), tk.UnkID(), tk.CLSID(), tk.SEPID(), tk.MaskID())
	}
}

func TestTrainCaseSensitive(t *testing.T) {
	tk, err := Train([]string{"Hug hug Café"}, TrainOptions{VocabSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"Hug", "hug", "Café"} {
		if _, ok := tk.ID(tok); !ok {
			t.Errorf("%q not in the cased vocabulary %q", tok, tk.tokens)
		}
	}
}

func TestTrainErrors(t *testing.T) {
	tests := []struct {
		texts []string
		opts  TrainOptions
		want  string
	}{
		{hugCorpus(), TrainOptions{VocabSize: 5}, "must exceed the 5 special tokens"},
		{hugCorpus(), TrainOptions{VocabSize: 11, Lowercase: true}, "below the 12 special and character tokens"},
		{hugCorpus(), TrainOptions{VocabSize: 50, MinFrequency: -1}, "MinFrequency -1"},
		{[]string{" ", "[CLS]"}, TrainOptions{VocabSize: 50}, "no words"},
	}
	for _, tt := range tests {
		_, err := Train(tt.texts, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want one containing %q", tt.opts, err, tt.want)
		}
	}
}

// TestTrainCranfieldGolden trains on the 1400 Cranfield passages at V=8000
// twice and compares both saved files with the golden file, byte for byte
// (the file Hugging Face's golden ids in hf_golden.json were computed with).
func TestTrainCranfieldGolden(t *testing.T) {
	texts := cranfield(t, "corpus.jsonl")
	want, err := os.ReadFile("testdata/cranfield-8000.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	for run := 0; run < 2; run++ {
		start := time.Now()
		tk, err := trainQuietly(t, texts, TrainOptions{VocabSize: 8000, MinFrequency: 2, Lowercase: true})
		if err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start)
		t.Logf("run %d: trained V=%d in %v", run, tk.VocabSize(), elapsed)
		if elapsed > 10*time.Second {
			t.Errorf("training took %v, want a few seconds at most", elapsed)
		}
		if tk.VocabSize() != 8000 {
			t.Errorf("V = %d, want 8000", tk.VocabSize())
		}
		got, err := tk.marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("run %d: trained tokenizer differs from testdata/cranfield-8000.tokenizer.json", run)
		}
	}
}

// trainQuietly runs Train with stdout redirected and fails if it printed.
func trainQuietly(t *testing.T, texts []string, opts TrainOptions) (*Tokenizer, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	tk, trainErr := Train(texts, opts)
	os.Stdout = old
	w.Close()
	out, _ := io.ReadAll(r)
	r.Close()
	if len(out) > 0 {
		t.Errorf("Train printed %q to stdout", out)
	}
	return tk, trainErr
}

// TestTrainedMatchesHuggingFace: Hugging Face, reading the golden trained
// tokenizer.json, gives the Cranfield queries the same ids we do.
func TestTrainedMatchesHuggingFace(t *testing.T) {
	tk, err := Load("testdata/cranfield-8000.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	g := loadGolden(t)
	if len(g.Trained.Texts) != 225 {
		t.Fatalf("golden holds %d trained texts", len(g.Trained.Texts))
	}
	unk := 0
	for i, text := range g.Trained.Texts {
		got := framed(tk, text)
		if !slices.Equal(got, g.Trained.IDs[i]) {
			t.Errorf("query %d %q:\n got %v\nwant %v", i, text, got, g.Trained.IDs[i])
		}
		for _, id := range got {
			if id == tk.UnkID() {
				unk++
			}
		}
	}
	t.Logf("[UNK] in Cranfield queries: %d", unk)
}
