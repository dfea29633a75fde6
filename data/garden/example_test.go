package garden_test

import (
	"fmt"
	"log"

	"github.com/ragtrain/ragtrain/data/garden"
)

func ExampleGenerate() {
	cfg := garden.DefaultConfig()
	cfg.Gardeners, cfg.Biographies, cfg.News, cfg.DatastoreNews = 12, 300, 200, 20
	w, err := garden.Generate(cfg)
	if err != nil {
		log.Fatal(err)
	}
	g := w.Gardeners[0]
	fmt.Printf("%s: %s, rank %d, %d biographies, covered %v\n", g.Key, g.Name(), g.Rank, g.Biographies, g.Covered)
	for _, e := range w.Entries[:1] {
		fmt.Printf("entry %s: %s\n", e.ID, e.Text())
	}
	for _, q := range w.Questions[:3] {
		fmt.Printf("%s [%s, count %d, bucket %s]\n  %s / %s / %s -> %s\n", q.ID, q.Split, q.Count, q.Bucket, q.Cloze, q.Trained, q.Unseen, q.Answer)
	}
	fmt.Println(w.Pretrain[0].Text)

	cfg.Coverage = 1.5
	_, err = garden.Generate(cfg)
	fmt.Println(err)
	// Output:
	// g0000: Milo Ligi, rank 7, 11 biographies, covered true
	// entry g0000: Milo Ligi lives in Wexham . Milo Ligi grows poppy . Milo Ligi keeps pony .
	// g0000-lives_in [train, count 7, bucket 3-9]
	//   Milo Ligi lives in / where does Milo Ligi live ? / in which town does Milo Ligi live ? -> Wexham
	// g0000-grows [train, count 5, bucket 3-9]
	//   Milo Ligi grows / what does Milo Ligi grow ? / what is planted by Milo Ligi ? -> poppy
	// g0000-keeps [train, count 7, bucket 3-9]
	//   Milo Ligi keeps / what animal does Milo Ligi keep ? / what animal is kept by Milo Ligi ? -> pony
	// Milo Fonezi grows fig . Milo Fonezi keeps canary .
	// world.coverage: must be in [0, 1], got 1.5
}

func ExampleWorld_Updated() {
	cfg := garden.DefaultConfig()
	cfg.Gardeners, cfg.Biographies, cfg.News, cfg.DatastoreNews = 12, 300, 200, 20
	w, err := garden.Generate(cfg)
	if err != nil {
		log.Fatal(err)
	}
	u, err := w.Updated(0.25, 1)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range u.Moves {
		q := u.Questions[3*m.Gardener+int(garden.LivesIn)]
		fmt.Printf("%s moved %s -> %s; %q answers %s (pretraining says %s)\n", u.Gardeners[m.Gardener].Name(), m.From, m.To, q.Trained, q.Answer, q.Previous)
	}
	// Output:
	// Milo Fonezi moved Tarvin -> Inverby; "where does Milo Fonezi live ?" answers Inverby (pretraining says Tarvin)
	// Milo Kunemi moved Brindle -> Inverby; "where does Milo Kunemi live ?" answers Inverby (pretraining says Brindle)
	// Rune Diveze moved Brindle -> Fairholt; "where does Rune Diveze live ?" answers Fairholt (pretraining says Brindle)
}
