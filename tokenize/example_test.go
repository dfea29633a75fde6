package tokenize_test

import (
	"fmt"
	"log"

	"github.com/ragtrain/ragtrain/tokenize"
)

func ExampleTokenizer_EncodeBatch() {
	tk, err := tokenize.Load("../testdata/tokenizers/bert-base-uncased/tokenizer.json")
	if err != nil {
		log.Fatal(err)
	}
	b := tk.EncodeBatch([]string{"Hello world", "unaffable"}, 5)
	fmt.Println(b.B, b.L, b.Truncated)
	fmt.Println(b.IDs)
	fmt.Println(b.Mask)
	fmt.Println(tk.Decode(b.IDs[5:]))
	// Output:
	// 2 5 0
	// [101 7592 2088 102 0 101 14477 20961 3468 102]
	// [1 1 1 1 0 1 1 1 1 1]
	// unaffable
}

// Merges: ##ug (5 occurrences), hug (4), ##un (3); then V = 15 is reached.
func ExampleTrain() {
	tk, err := tokenize.Train([]string{"hug hug hug pug pun pun bun hugs"}, tokenize.TrainOptions{VocabSize: 15, Lowercase: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tk.VocabSize(), tk.Encode("hugs bug"))
	// Output:
	// 15 [13 10 5 12]
}
