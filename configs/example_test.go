package configs_test

import (
	"fmt"
	"log"
	"path/filepath"

	"github.com/ragtrain/ragtrain/configs"
)

func ExampleLoad() {
	r, err := configs.Load("../recipes/retriever-cranfield.toml")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Kind, r.Name, filepath.IsAbs(r.Data.Dir), filepath.Base(r.Data.Dir))
	fmt.Println(r.Model.Encoder, r.Model.Hidden, r.Loss.Similarity, r.Loss.Temperature)
	fmt.Println(r.Train.Steps, r.Train.BatchSize, r.Train.LR, r.Eval.Systems)
	// Output:
	// retriever retriever-cranfield true cranfield
	// bow 128 cosine 0.05
	// 1000 32 0.001 [bm25 dense rrf]
}
