package garden

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ragtrain/ragtrain/data"
)

// smallConfig is the world most tests use: a tenth of the default.
func smallConfig(seed uint64) Config {
	c := DefaultConfig()
	c.Seed = seed
	c.Gardeners = 120
	c.Biographies = 3000
	c.News = 4000
	c.DatastoreNews = 500
	return c
}

func generate(t *testing.T, c Config) *World {
	t.Helper()
	w, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestValidateNamesKey(t *testing.T) {
	tests := []struct {
		key string
		mod func(*Config)
	}{
		{"world.coverage", func(c *Config) { c.Coverage = 1.5 }},
		{"world.coverage", func(c *Config) { c.Coverage = -0.1 }},
		{"world.coverage", func(c *Config) { c.Coverage = math.NaN() }},
		{"world.gardeners", func(c *Config) { c.Gardeners = 0 }},
		{"world.gardeners", func(c *Config) { c.Gardeners = 1 }},
		{"world.zipf_exponent", func(c *Config) { c.ZipfExponent = 0 }},
		{"world.zipf_exponent", func(c *Config) { c.ZipfExponent = -1.2 }},
		{"world.zipf_exponent", func(c *Config) { c.ZipfExponent = math.Inf(1) }},
		{"world.first_names", func(c *Config) { c.FirstNames = 0 }},
		{"world.first_names", func(c *Config) { c.FirstNames = len(firstNamePool) + 1 }},
		{"world.towns", func(c *Config) { c.Towns = 2 }},
		{"world.plants", func(c *Config) { c.Plants = 1000 }},
		{"world.animals", func(c *Config) { c.Animals = 0 }},
		{"world.biographies", func(c *Config) { c.Biographies = -1 }},
		{"world.news", func(c *Config) { c.News = -5 }},
		{"world.news_repeat", func(c *Config) { c.NewsRepeat = 1.01 }},
		{"world.datastore_news", func(c *Config) { c.DatastoreNews = c.News + 1 }},
		{"world.datastore_news", func(c *Config) { c.DatastoreNews = -1 }},
		{"world.window_words", func(c *Config) { c.WindowWords = 0 }},
		{"world.top_town_share", func(c *Config) { c.TopTownShare = 1 }},
		{"world.top_town_share", func(c *Config) { c.TopTownShare = 0.05 }}, // below 1/16
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range tests {
		c := DefaultConfig()
		tc.mod(&c)
		err := c.Validate()
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Key != tc.key || !strings.HasPrefix(err.Error(), tc.key+": ") {
			t.Errorf("%s: Validate() = %v, want a *KeyError for %s", tc.key, err, tc.key)
		}
		if _, gerr := Generate(c); gerr == nil || gerr.Error() != err.Error() {
			t.Errorf("%s: Generate error %v, want %v", tc.key, gerr, err)
		}
	}
	c := DefaultConfig()
	c.TopTownShare = 1.0 / 16 // exactly uniform is allowed
	if err := c.Validate(); err != nil {
		t.Errorf("top_town_share = 1/towns: %v", err)
	}
}

func TestBucket(t *testing.T) {
	for _, tc := range []struct {
		count int
		want  string
	}{{0, "0"}, {1, "1-2"}, {2, "1-2"}, {3, "3-9"}, {9, "3-9"}, {10, "10-29"}, {29, "10-29"}, {30, ">=30"}, {4000, ">=30"}} {
		if got := Bucket(tc.count); got != tc.want {
			t.Errorf("Bucket(%d) = %q, want %q", tc.count, got, tc.want)
		}
	}
}

// hashDir hashes every file's path and bytes under dir, in lexical path order.
func hashDir(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Write([]byte(rel + "\x00"))
		h.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestWriteIsDeterministic(t *testing.T) {
	root := t.TempDir()
	hash := func(name string, seed uint64) string {
		dir := filepath.Join(root, name)
		if err := generate(t, smallConfig(seed)).Write(dir); err != nil {
			t.Fatal(err)
		}
		return hashDir(t, dir)
	}
	a, b, other := hash("a", 7), hash("b", 7), hash("c", 8)
	if a != b {
		t.Errorf("seed 7 written twice: hashes %s and %s differ", a, b)
	}
	if a == other {
		t.Errorf("seeds 7 and 8 wrote identical files")
	}
	// Rewriting over an existing world leaves no temporary files behind.
	if err := generate(t, smallConfig(7)).Write(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	if h := hashDir(t, filepath.Join(root, "a")); h != a {
		t.Errorf("rewrite changed the files: %s, want %s", h, a)
	}
}

// TestDefaultWorld checks the default-size world: generation time, the Zipf exponent recovered
// from biography counts, coverage and the largest town.
func TestDefaultWorld(t *testing.T) {
	cfg := DefaultConfig()
	start := time.Now()
	w := generate(t, cfg)
	took := time.Since(start)
	t.Logf("default world generated in %v", took)
	if took > 5*time.Second {
		t.Errorf("generation took %v, want < 5s", took)
	}

	// Least squares of log(biographies) on log(rank) over the head ranks 1..50, where the
	// expected count (18000 r^-1.2 / H(400, 1.2) >= 40) keeps Poisson noise small.
	const head = 50
	var xs, ys []float64
	for _, g := range w.Gardeners {
		if g.Rank <= head {
			if g.Biographies == 0 {
				t.Fatalf("rank %d has no biography", g.Rank)
			}
			xs = append(xs, math.Log(float64(g.Rank)))
			ys = append(ys, math.Log(float64(g.Biographies)))
		}
	}
	s := -slope(xs, ys)
	t.Logf("recovered Zipf exponent %.4f (true %.2f)", s, cfg.ZipfExponent)
	if math.Abs(s-cfg.ZipfExponent) > 0.1 {
		t.Errorf("recovered Zipf exponent %.4f, want %.2f +- 0.1", s, cfg.ZipfExponent)
	}

	covered := 0
	for _, g := range w.Gardeners {
		if g.Covered {
			covered++
		}
	}
	frac := float64(covered) / float64(cfg.Gardeners)
	t.Logf("coverage %.4f (%d of %d)", frac, covered, cfg.Gardeners)
	if covered != 340 {
		t.Errorf("covered %d gardeners, want round(0.85*400) = 340", covered)
	}
	top := townSizes(w)[0]
	t.Logf("largest town holds %d of %d", top, cfg.Gardeners)
	if top != 80 {
		t.Errorf("largest town holds %d gardeners, want 0.20*400 = 80", top)
	}
	// Plants and animals are uniform: Pearson's chi-square below its 99.9% quantile.
	for _, tc := range []struct {
		r     Relation
		limit float64 // chi-square 0.999 quantile, df = values - 1
	}{{Grows, 65.2}, {Keeps, 24.3}} {
		vals := w.Values[tc.r]
		obs := make([]float64, len(vals))
		for _, g := range w.Gardeners {
			obs[slices.Index(vals, g.Facts[tc.r])]++
		}
		exp, chi2 := float64(cfg.Gardeners)/float64(len(vals)), 0.0
		for _, o := range obs {
			chi2 += (o - exp) * (o - exp) / exp
		}
		t.Logf("%s: chi-square %.1f over %d values", tc.r.ValueType(), chi2, len(vals))
		if chi2 > tc.limit {
			t.Errorf("%s values not uniform: chi-square %.1f > %.1f (counts %v)", tc.r.ValueType(), chi2, tc.limit, obs)
		}
	}
	counts := make(map[string]int)
	for _, q := range w.Questions {
		counts[q.Bucket]++
	}
	t.Logf("questions per bucket: %v", counts)
}

func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// townSizes returns the number of gardeners in each town, in World.Values[LivesIn] order.
func townSizes(w *World) []int {
	sizes := make([]int, len(w.Values[LivesIn]))
	for _, g := range w.Gardeners {
		sizes[slices.Index(w.Values[LivesIn], g.Facts[LivesIn])]++
	}
	return sizes
}

func TestTownsSkewed(t *testing.T) {
	w := generate(t, smallConfig(3))
	sizes := townSizes(w)
	if sizes[0] != 24 { // 0.20 * 120
		t.Errorf("largest town holds %d of 120, want 24", sizes[0])
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] > sizes[i-1] {
			t.Errorf("town %d holds %d > town %d's %d: sizes must not increase", i, sizes[i], i-1, sizes[i-1])
		}
	}
	if sizes[len(sizes)-1] == 0 {
		t.Errorf("smallest town is empty: %v", sizes)
	}
	// Equal towns when the share is 1/towns.
	c := smallConfig(3)
	c.Towns, c.TopTownShare = 4, 0.25
	for _, s := range townSizes(generate(t, c)) {
		if s != 30 {
			t.Errorf("uniform towns: sizes %v, want 30 each", townSizes(generate(t, c)))
			break
		}
	}
}

func TestCoverage(t *testing.T) {
	for _, cov := range []float64{0, 0.5, 0.85, 1} {
		c := smallConfig(4)
		c.Coverage = cov
		w := generate(t, c)
		covered, entries := 0, 0
		for _, g := range w.Gardeners {
			if g.Covered {
				covered++
			}
		}
		for _, e := range w.Entries {
			if e.Gardener >= 0 {
				entries++
			}
		}
		if want := int(math.Round(cov * 120)); covered != want || entries != want {
			t.Errorf("coverage %v: %d covered, %d entries, want %d", cov, covered, entries, want)
		}
		if got := float64(covered) / 120; math.Abs(got-cov) > 0.5/120 {
			t.Errorf("coverage %v: measured %v", cov, got)
		}
		if len(w.Entries) != entries+c.DatastoreNews {
			t.Errorf("coverage %v: %d entries, want %d gardeners + %d news", cov, len(w.Entries), entries, c.DatastoreNews)
		}
	}
}

func TestEntriesStateTheirFacts(t *testing.T) {
	w := generate(t, smallConfig(5))
	seen := make(map[int]bool)
	for _, e := range w.Entries {
		if e.Gardener < 0 {
			if e.Title != "news" || e.Text() != w.News[e.News].Text {
				t.Errorf("news entry %s: title %q text %q, want news item %d %q", e.ID, e.Title, e.Text(), e.News, w.News[e.News].Text)
			}
			continue
		}
		g := w.Gardeners[e.Gardener]
		if seen[g.ID] {
			t.Errorf("gardener %s has two entries", g.Key)
		}
		seen[g.ID] = true
		n := g.Name()
		want := n + " lives in " + g.Facts[LivesIn] + " . " + n + " grows " + g.Facts[Grows] + " . " + n + " keeps " + g.Facts[Keeps] + " ."
		if e.Text() != want || e.Title != n || e.ID != g.Key || !g.Covered {
			t.Errorf("entry %s (%q, %q), want (%q, %q) for covered gardener %s", e.ID, e.Title, e.Text(), n, want, g.Key)
		}
	}
}

func TestSurnames(t *testing.T) {
	c := DefaultConfig()
	c.Biographies, c.News, c.DatastoreNews = 0, 0, 0
	w := generate(t, c)
	cv := regexp.MustCompile(`^[BDFGKLMNPRSTVZ][aeiou]([bdfgklmnprstvz][aeiou]){0,2}$`)
	// Words typed here independently of the generator's reject list.
	english := []string{"banana", "potato", "tomato", "bike", "made", "time", "note", "love", "rose", "safe", "more", "some", "minute", "nature", "to", "go", "no"}
	bad := rejectedSurnames()
	seen := make(map[string]bool)
	syl := [4]int{}
	for _, g := range w.Gardeners {
		s := g.Surname
		low := strings.ToLower(s)
		switch {
		case !cv.MatchString(s):
			t.Errorf("surname %q is not 1-3 consonant-vowel syllables", s)
		case seen[s]:
			t.Errorf("surname %q used twice", s)
		case bad[low] || slices.Contains(english, low):
			t.Errorf("surname %q is a word", s)
		case !slices.Contains(firstNamePool, g.FirstName) || !slices.Contains(w.FirstNames, g.FirstName):
			t.Errorf("first name %q not from the world's pool", g.FirstName)
		}
		seen[s] = true
		syl[len(s)/2]++
	}
	if syl[1] == 0 || syl[2] == 0 || syl[3] == 0 {
		t.Errorf("syllable counts %v: want surnames of 1, 2 and 3 syllables", syl[1:])
	}
	// Value pools are disjoint, so an answer word names one value of one type.
	all := slices.Concat(firstNamePool, townPool, plantPool, animalPool)
	for i, v := range all {
		if slices.Contains(all[:i], v) || strings.ContainsAny(v, " .") {
			t.Errorf("pool word %q repeated or not one token", v)
		}
	}
}

func TestNews(t *testing.T) {
	w := generate(t, smallConfig(6))
	repeated := 0
	for i, n := range w.News {
		a, b := w.Gardeners[n.A], w.Gardeners[n.B]
		s := newsSentence(a.Name(), b.Name(), n.Relation, n.Value)
		want := s
		if n.Repeated {
			repeated++
			want = s + " " + s
		}
		switch {
		case n.A == n.B:
			t.Errorf("news %d pairs gardener %d with itself", i, n.A)
		case n.Text != want:
			t.Errorf("news %d text %q, want %q", i, n.Text, want)
		case n.Value == a.Facts[n.Relation] || n.Value == b.Facts[n.Relation]:
			t.Errorf("news %d value %q is a fact of one of its gardeners", i, n.Value)
		case !slices.Contains(w.Values[n.Relation], n.Value):
			t.Errorf("news %d value %q is not a %s", i, n.Value, n.Relation.ValueType())
		}
	}
	if repeated != 2000 {
		t.Errorf("%d of 4000 news repeat, want half", repeated)
	}
	var kinds [2]int
	for _, d := range w.Pretrain {
		if d.Kind == "news" {
			kinds[1]++
		} else {
			kinds[0]++
		}
	}
	if kinds != [2]int{3000, 4000} {
		t.Errorf("pretraining corpus holds %v biographies and news, want [3000 4000]", kinds)
	}
	if w.Pretrain[0].Kind == "biography" && w.Pretrain[2999].Kind == "biography" && w.Pretrain[3000].Kind == "news" {
		t.Errorf("pretraining corpus is not shuffled")
	}
}

// bioRE is one fact sentence of a biography.
var bioRE = regexp.MustCompile(`^([A-Z][a-z]+ [A-Z][a-z]+) (lives in|grows|keeps) ([A-Za-z]+) \.$`)

func TestQuestionsAndCounts(t *testing.T) {
	c := smallConfig(9)
	w := generate(t, c)
	dir := t.TempDir()
	if err := w.Write(dir); err != nil {
		t.Fatal(err)
	}
	// Recount every fact from pretrain.txt as written.
	b, err := os.ReadFile(filepath.Join(dir, "pretrain.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != c.Biographies+c.News {
		t.Fatalf("pretrain.txt has %d lines, want %d", len(lines), c.Biographies+c.News)
	}
	byName := make(map[string]int)
	for _, g := range w.Gardeners {
		byName[g.Name()] = g.ID
	}
	rels := map[string]Relation{"lives in": LivesIn, "grows": Grows, "keeps": Keeps}
	counts := make([][NumRelations]int, len(w.Gardeners))
	for _, line := range lines {
		if strings.Contains(line, " met ") || strings.Contains(line, " sold ") || strings.Contains(line, " walked ") {
			continue
		}
		for _, s := range strings.SplitAfter(line, " .") {
			if s == "" {
				continue
			}
			m := bioRE.FindStringSubmatch(strings.TrimSpace(s))
			if m == nil {
				t.Fatalf("biography sentence %q does not parse", s)
			}
			g, r := byName[m[1]], rels[m[2]]
			if w.Gardeners[g].Facts[r] != m[3] {
				t.Fatalf("biography %q states %s, want %s", line, m[3], w.Gardeners[g].Facts[r])
			}
			counts[g][r]++
		}
	}
	if !slices.Equal(counts, w.Counts) {
		t.Errorf("counts recomputed from pretrain.txt differ from World.Counts")
	}
	if len(w.Questions) != 3*len(w.Gardeners) {
		t.Fatalf("%d questions, want %d", len(w.Questions), 3*len(w.Gardeners))
	}
	for i, q := range w.Questions {
		g := w.Gardeners[q.Gardener]
		switch {
		case q.Gardener != i/3 || q.Relation != Relation(i%3):
			t.Errorf("question %d asks (%d, %v), want gardener %d relation %d", i, q.Gardener, q.Relation, i/3, i%3)
		case q.Answer != g.Facts[q.Relation] || strings.Contains(q.Answer, " "):
			t.Errorf("%s: answer %q, want %q", q.ID, q.Answer, g.Facts[q.Relation])
		case q.Count != counts[g.ID][q.Relation] || q.Bucket != Bucket(q.Count):
			t.Errorf("%s: count %d bucket %q, want %d %q", q.ID, q.Count, q.Bucket, counts[g.ID][q.Relation], Bucket(counts[g.ID][q.Relation]))
		case q.HasEntry != g.Covered || q.Split != g.Split():
			t.Errorf("%s: has_entry %v split %s, want %v %s", q.ID, q.HasEntry, q.Split, g.Covered, g.Split())
		case !strings.Contains(q.Cloze, g.Name()) || !strings.Contains(q.Trained, g.Name()) || !strings.Contains(q.Unseen, g.Name()):
			t.Errorf("%s: phrasings %q %q %q do not name %q", q.ID, q.Cloze, q.Trained, q.Unseen, g.Name())
		}
	}
	q := w.Questions[3*5+int(Keeps)]
	n := w.Gardeners[5].Name()
	if q.Cloze != n+" keeps" || q.Trained != "what animal does "+n+" keep ?" || q.Unseen != "what animal is kept by "+n+" ?" {
		t.Errorf("keeps phrasings %q / %q / %q", q.Cloze, q.Trained, q.Unseen)
	}
}

func TestSplitByGardener(t *testing.T) {
	w := generate(t, smallConfig(10))
	dir := t.TempDir()
	if err := w.Write(dir); err != nil {
		t.Fatal(err)
	}
	ds, err := data.Load(filepath.Join(dir, "datastore", "entry"), "train", "test")
	if err != nil {
		t.Fatal(err)
	}
	split := map[string]string{} // gardener key -> split of its queries
	for name, qr := range ds.Qrels {
		for _, qid := range qr.QueryIDs() {
			key, _, _ := strings.Cut(qid, "-")
			if s, ok := split[key]; ok && s != name {
				t.Errorf("gardener %s has queries in %s and %s", key, s, name)
			}
			split[key] = name
		}
	}
	nTrain := 0
	for _, g := range w.Gardeners {
		s, ok := split[g.Key]
		if want := map[bool]string{true: "train", false: "test"}[g.ID%4 == 0]; ok && s != want {
			t.Errorf("gardener %d in %s, want %s", g.ID, s, want)
		}
		if ok != g.Covered {
			t.Errorf("gardener %s: has qrels %v, covered %v", g.Key, ok, g.Covered)
		}
		if g.Split() == "train" {
			nTrain++
		}
	}
	if nTrain != 30 {
		t.Errorf("%d train gardeners of 120, want 30", nTrain)
	}
}

func TestDatastoreChunkings(t *testing.T) {
	w := generate(t, smallConfig(11))
	dir := t.TempDir()
	if err := w.Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, ch := range Chunkings {
		ds, err := data.Load(filepath.Join(dir, "datastore", ch), "train", "test")
		if err != nil {
			t.Fatalf("%s: %v", ch, err)
		}
		chunks, _ := w.Chunks(ch)
		if ds.Corpus.Len() != len(chunks) || ds.Queries.Len() != len(w.Questions) {
			t.Errorf("%s: loaded %d chunks %d queries, want %d %d", ch, ds.Corpus.Len(), ds.Queries.Len(), len(chunks), len(w.Questions))
		}
		judged := 0
		for _, q := range w.Questions {
			rel := ds.Qrels[q.Split].Relevant(q.ID)
			judged += len(rel)
			if q.HasEntry != (len(rel) > 0) {
				t.Errorf("%s: %s has %d relevant chunks, has_entry %v", ch, q.ID, len(rel), q.HasEntry)
			}
			if (ch == "entry" || ch == "sentence") && len(rel) > 1 {
				t.Errorf("%s: %s has %d relevant chunks, want 1", ch, q.ID, len(rel))
			}
			for _, id := range rel {
				i, _ := ds.Corpus.Index(id)
				text := " " + ds.Corpus.Texts[i] + " "
				if ds.Corpus.Titles[i] != w.Gardeners[q.Gardener].Name() || !strings.Contains(text, " "+q.Answer+" ") {
					t.Errorf("%s: relevant chunk %s (%q, %q) does not hold %s's answer %q", ch, id, ds.Corpus.Titles[i], text, q.ID, q.Answer)
				}
				if ch == "sentence" && !strings.Contains(text, cloze(w.Gardeners[q.Gardener].Name(), q.Relation)+" "+q.Answer+" .") {
					t.Errorf("sentence: chunk %q does not state %s", text, q.ID)
				}
			}
		}
		t.Logf("%s: %d chunks, %d relevant judgements", ch, len(chunks), judged)
	}
}

func TestWindowChunksWorkedExample(t *testing.T) {
	w := &World{Config: Config{WindowWords: 8}}
	g := Gardener{ID: 0, Key: "g0000", FirstName: "Ines", Surname: "Ronu", Facts: [NumRelations]string{"Kelso", "fig", "dog"}}
	w.Gardeners = []Gardener{g}
	w.Entries = []Entry{gardenerEntry(&g, g.Facts)}
	chunks, err := w.Chunks("window")
	if err != nil {
		t.Fatal(err)
	}
	want := []Chunk{
		{ID: "g0000-w0", Title: "Ines Ronu", Text: "Ines Ronu lives in Kelso . Ines Ronu", States: [3]bool{true, false, false}},
		{ID: "g0000-w1", Title: "Ines Ronu", Text: "grows fig . Ines Ronu keeps dog .", States: [3]bool{false, true, true}},
	}
	if !slices.Equal(chunks, want) {
		t.Errorf("windows of 8:\n got %+v\nwant %+v", chunks, want)
	}
	if _, err := w.Chunks("paragraph"); err == nil || !strings.Contains(err.Error(), `"paragraph"`) {
		t.Errorf("unknown chunking: err = %v", err)
	}
}

func TestUpdated(t *testing.T) {
	w := generate(t, smallConfig(12))
	before := hashWorld(t, w)
	u, err := w.Updated(0.25, 99)
	if err != nil {
		t.Fatal(err)
	}
	if hashWorld(t, w) != before {
		t.Errorf("Updated changed the original world")
	}
	if len(u.Moves) != 30 {
		t.Fatalf("%d moves, want 0.25*120 = 30", len(u.Moves))
	}
	if &u.Pretrain[0] != &w.Pretrain[0] || !slices.Equal(u.Counts, w.Counts) {
		t.Errorf("pretraining corpus or counts changed")
	}
	entry := u.entryIndex()
	movedIdx := make(map[int]Move)
	for _, m := range u.Moves {
		movedIdx[m.Gardener] = m
		g := u.Gardeners[m.Gardener]
		if m.From == m.To || m.From != w.Gardeners[m.Gardener].Facts[LivesIn] || g.Facts[LivesIn] != m.To {
			t.Errorf("move %+v: gardener now in %s, was in %s", m, g.Facts[LivesIn], w.Gardeners[m.Gardener].Facts[LivesIn])
		}
		if e := entry[m.Gardener]; e >= 0 && !strings.Contains(u.Entries[e].Text(), g.Name()+" lives in "+m.To+" .") {
			t.Errorf("moved gardener's entry %q does not state %s", u.Entries[e].Text(), m.To)
		}
	}
	for i, q := range u.Questions {
		m, moved := movedIdx[q.Gardener]
		switch {
		case q.Relation == LivesIn && moved && (q.Answer != m.To || q.Previous != m.From):
			t.Errorf("%s: answer %q previous %q, want %q %q", q.ID, q.Answer, q.Previous, m.To, m.From)
		case (q.Relation != LivesIn || !moved) && q != w.Questions[i]:
			t.Errorf("%s changed: %+v, was %+v", q.ID, q, w.Questions[i])
		}
	}
	if _, err := w.Updated(1.5, 1); err == nil || !strings.Contains(err.Error(), "fraction") {
		t.Errorf("Updated(1.5): err = %v", err)
	}
}

func TestPoisoned(t *testing.T) {
	w := generate(t, smallConfig(13))
	p, err := w.Poisoned(0.2, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Poisons) != 20 { // 0.2 * 102 covered gardeners
		t.Fatalf("%d poisons, want round(0.2*102) = 20", len(p.Poisons))
	}
	entry := p.entryIndex()
	poisoned := 0
	for _, x := range p.Poisons {
		g := p.Gardeners[x.Gardener]
		e := p.Entries[entry[x.Gardener]]
		if x.True != g.Facts[x.Relation] || x.Wrong == x.True || !slices.Contains(p.Values[x.Relation], x.Wrong) {
			t.Errorf("poison %+v: wrong value must be another %s", x, x.Relation.ValueType())
		}
		if e.Sentences[x.Relation].Text != factSentence(g.Name(), x.Relation, x.Wrong) {
			t.Errorf("poisoned entry states %q", e.Sentences[x.Relation].Text)
		}
	}
	for i, q := range p.Questions {
		if q.Answer != w.Questions[i].Answer {
			t.Errorf("%s: answer changed to %q", q.ID, q.Answer)
		}
		if q.Poisoned != "" {
			poisoned++
		}
	}
	if poisoned != 20 {
		t.Errorf("%d questions marked poisoned, want 20", poisoned)
	}
}

// hashWorld hashes the files the world writes.
func hashWorld(t *testing.T, w *World) string {
	dir := t.TempDir()
	if err := w.Write(dir); err != nil {
		t.Fatal(err)
	}
	return hashDir(t, dir)
}
