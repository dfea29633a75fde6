package data_test

import (
	"fmt"
	"log"

	"github.com/ragtrain/ragtrain/data"
)

func ExampleLoad() {
	d, err := data.Load("../datasets/cranfield", "train", "test")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Corpus.Len(), "documents,", d.Queries.Len(), "queries")
	fmt.Println("empty documents:", d.Corpus.Empty)
	test := d.Qrels["test"]
	fmt.Println(len(test.QueryIDs()), "test queries; query 1 has", len(test.Relevant("1")), "relevant documents")
	// Output:
	// 1400 documents, 225 queries
	// empty documents: [471 995]
	// 75 test queries; query 1 has 28 relevant documents
}
