package main

import (
	"strings"
	"testing"
)

// TestVerifyUsage: `train verify -h` prints its flags and exits 0; missing flags, a bad -reader
// and a directory that is no run exit 1 with one line on stderr naming the problem.
func TestVerifyUsage(t *testing.T) {
	out, errOut, code := runChild(t, "verify", "-h")
	if code != 0 || !strings.Contains(out, "train verify -run RUN -claims FILE -out FILE") || !strings.Contains(out, "-top-k") {
		t.Errorf("verify -h: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "-run", dir}, "-run, -claims and -out are required"},
		{[]string{"verify", "-run", dir, "-claims", "c.jsonl", "-out", "p.jsonl", "-reader", "oracle"}, `reader "oracle": want selfrag or plain`},
		{[]string{"verify", "-run", dir, "-claims", "c.jsonl", "-out", "p.jsonl"}, "recipe.resolved.toml"},
		{[]string{"verify", "-run", dir, "-claims", "c.jsonl", "-out", "p.jsonl", "-top-k", "-1"}, "-top-k -1"},
	} {
		_, errOut, code := runChild(t, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errOut, c.want)
		}
	}
}
