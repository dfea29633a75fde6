package tokenize

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"sync"
	"testing"
)

const bertPath = "../testdata/tokenizers/bert-base-uncased/tokenizer.json"

var loadBERTOnce = sync.OnceValues(func() (*Tokenizer, error) { return Load(bertPath) })

// bert returns a freshly loaded bert-base-uncased tokenizer when fresh is
// set (for tests that add tokens), else a shared one.
func bert(t testing.TB, fresh bool) *Tokenizer {
	t.Helper()
	var tk *Tokenizer
	var err error
	if fresh {
		tk, err = Load(bertPath)
	} else {
		tk, err = loadBERTOnce()
	}
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// cranfield returns the "text" fields of a Cranfield JSONL file.
func cranfield(t testing.TB, file string) []string {
	t.Helper()
	f, err := os.Open("../datasets/cranfield/" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var texts []string
	for line := 1; sc.Scan(); line++ {
		var d struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("%s:%d: %v", file, line, err)
		}
		texts = append(texts, d.Text)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return texts
}

// golden is testdata/hf_golden.json, written by testdata/gen_hf_golden.js
// with the Hugging Face tokenizers library.
type golden struct {
	Bert struct {
		Texts []string `json:"texts"`
		IDs   [][]int  `json:"ids"`
	} `json:"bert"`
	Pairs struct {
		Queries  []string `json:"queries"`
		Passages []string `json:"passages"`
		IDs      [][]int  `json:"ids"`
		Types    [][]int  `json:"types"`
	} `json:"pairs"`
	Decode struct {
		IDs  []int  `json:"ids"`
		Text string `json:"text"`
	} `json:"decode"`
	SelfRAG struct {
		Added    []string `json:"added"`
		AddedIDs []int    `json:"addedIds"`
		Texts    []string `json:"texts"`
		IDs      [][]int  `json:"ids"`
	} `json:"selfrag"`
	Trained struct {
		Texts []string `json:"texts"`
		IDs   [][]int  `json:"ids"`
	} `json:"trained"`
}

var loadGoldenOnce = sync.OnceValues(func() (*golden, error) {
	data, err := os.ReadFile("testdata/hf_golden.json")
	if err != nil {
		return nil, err
	}
	g := new(golden)
	return g, json.Unmarshal(data, g)
})

func loadGolden(t testing.TB) *golden {
	t.Helper()
	g, err := loadGoldenOnce()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// framed returns [CLS] Encode(text) [SEP].
func framed(tk *Tokenizer, text string) []int {
	return slices.Concat([]int{tk.CLSID()}, tk.Encode(text), []int{tk.SEPID()})
}
