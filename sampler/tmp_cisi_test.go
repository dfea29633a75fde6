package sampler

import ("testing"; "strings"; "os")

func TestTmpCISI(t *testing.T) {
	old := cranDir
	_ = old
	c, err := readDir("../datasets/cisi/")
	if err != nil { t.Fatal(err) }
	ex, st, err := Mine(c.train, c.ranking, MineOptions{Negatives: 1, Lo: 1, Hi: 30, Strategy: Random, Seed: 42})
	if err != nil { t.Fatal(err) }
	t.Logf("%+v", st.Examples)
	for _, B := range []int{8, 16, 32} {
		s, err := New(c.collection(), ex, Options{BatchSize: B, HardNegatives: 1, Seed: 42})
		if err != nil { t.Log(err); continue }
		var tot Stats
		for step := range 200 {
			b, st, err := s.Batch(step)
			if err != nil { t.Log(B, err); break }
			if err := ValidateBatch(b, c.train); err != nil { t.Fatal(err) }
			tot.Repeated += st.Repeated; if st.Index == 0 { tot.LeftOver += st.LeftOver }
		}
		t.Logf("B=%d K=%d E=%d repeated %d leftover %d", B, s.BatchesPerEpoch(), s.Len(), tot.Repeated, tot.LeftOver)
	}
	_ = strings.Fields; _ = os.Open
}
