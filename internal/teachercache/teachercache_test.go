package teachercache

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const hash = "ab12"

func write(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "teacher_scores.tsv")
	scores := map[Pair]float32{{"q1", "d1"}: -0.02057438, {"q1", "d2"}: 3.5, {"q2", "d1"}: 1e-7}
	if err := Write(path, Header{TeacherSHA256: hash, MaxLength: 256, Teacher: "/x/teacher; odd dir"}, scores); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

func TestRoundTrip(t *testing.T) {
	path, b := write(t)
	if !strings.HasSuffix(string(b), "q1\td1\t-0.02057438\nq1\td2\t3.5\nq2\td1\t1e-07\n") {
		t.Fatalf("file:\n%s", b)
	}
	got := map[Pair]float32{}
	n, err := Read(path, hash, got)
	if err != nil || n != 3 || got[Pair{"q1", "d1"}] != -0.02057438 || got[Pair{"q2", "d1"}] != 1e-7 {
		t.Fatalf("Read = %d, %v, %v", n, got, err)
	}
	h, _, err := Parse(path, bytes.NewReader(b))
	if err != nil || h.Teacher != "/x/teacher; odd dir" || h.MaxLength != 256 {
		t.Fatalf("header %+v, %v", h, err)
	}
	if n, err := Read(filepath.Join(t.TempDir(), "none.tsv"), hash, got); n != 0 || err != nil {
		t.Fatalf("missing file: %d, %v", n, err)
	}
}

// TestDamageRefused: issue 37's teacher_scores.tsv cut inside its last number
// (-0.02057438 -> -0.02) was accepted and changed nDCG; a (query, passage) given twice with
// another score silently replaced the first. Each damage is now refused, naming the file (and
// the line where one is at fault), and nothing of the file is used.
func TestDamageRefused(t *testing.T) {
	path, b := write(t)
	s := string(b)
	for _, c := range []struct{ name, text, want string }{
		{"cut inside the last number", strings.TrimSuffix(s, "1e-07\n") + "1e", path + ":4: score \"1e\""},
		{"number shortened", strings.Replace(s, "-0.02057438", "-0.02", 1), path + ": content sha256"},
		{"last line cut", s[:strings.LastIndex(s[:len(s)-1], "\n")+1], path + ":3: 2 pairs, the header says 3"},
		{"pair twice", s + "q1\td1\t9\n", path + ":5: query \"q1\", passage \"d1\" given again (first at line 2)"},
		{"not a number", strings.Replace(s, "3.5", "3.5x", 1), path + ":3: score \"3.5x\" is not a finite float32"},
		{"NaN", strings.Replace(s, "3.5", "NaN", 1), path + ":3: score \"NaN\""},
		{"two fields", strings.Replace(s, "q2\td1\t", "q2 d1\t", 1), path + ":4: want query-id TAB passage-id TAB score"},
		{"old header", "# ragtrain teacher scores; teacher_sha256 ab12; max_length 256; teacher /x\nq\td\t1\n", path + ":1: the header gives no pairs count and content_sha256"},
		{"foreign", "qid\tpid\tscore\n", path + ":1: not a teacher scores file"},
		{"empty", "", path + ": empty teacher scores file"},
	} {
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got := map[Pair]float32{}
		_, err := Read(path, hash, got)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v\nwant one line starting %q", c.name, err, c.want)
		}
		if len(got) != 0 {
			t.Errorf("%s: %d scores taken from a refused file", c.name, len(got))
		}
	}
	os.WriteFile(path, b, 0o644)
	if _, err := Read(path, "other", map[Pair]float32{}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("another teacher's cache: %v", err)
	}
}

// FuzzParse: any bytes give scores or an error, never a panic; what Parse accepts, Write
// writes back as a file Parse reads to the same header and scores.
func FuzzParse(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "t.tsv")
	Write(path, Header{TeacherSHA256: hash, MaxLength: 8, Teacher: "t"}, map[Pair]float32{{"q", "d"}: 0.5, {"q", "e"}: -2})
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	f.Add([]byte("# ragtrain teacher scores; teacher_sha256 x; max_length 1; pairs 0; content_sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855; teacher t\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, scores, err := Parse("fuzz", bytes.NewReader(b))
		if err != nil {
			return
		}
		out := filepath.Join(t.TempDir(), "t.tsv")
		if err := Write(out, h, scores); err != nil {
			t.Fatal(err)
		}
		back, _ := os.ReadFile(out)
		h2, scores2, err := Parse("back", bytes.NewReader(back))
		if err != nil || h2 != h || !maps.Equal(scores, scores2) {
			t.Fatalf("accepted %q, written back as %q: %+v %v, %v", b, back, h2, scores2, err)
		}
	})
}
