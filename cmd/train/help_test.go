package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runChild runs the command (this test binary as main, see TestMain) with args and returns its
// stdout, stderr and exit status.
func runChild(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestHelpExitsZero: -h, --help and help print the usage, every subcommand with a line of its
// own and the flags of both, to stdout, and exit 0; so does `train export -h`.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}, {"-recipe", "x.toml", "-h"}} {
		out, errOut, code := runChild(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
		for _, w := range []string{"train -recipe R [-resume DIR]", "train export -run RUN -out DIR", "train help",
			"-recipe", "-resume", "-run", "-out", "-embeddings"} {
			if !strings.Contains(out, w) {
				t.Errorf("%v: help lacks %q:\n%s", args, w, out)
			}
		}
	}
	// no usage string holds a back-quoted word, which flag.PrintDefaults takes for the flag's
	// value name ("-model train export" instead of "-model string")
	out, _, _ := runChild(t, "generate", "-h")
	if !strings.Contains(out, "-model string") {
		t.Errorf("generate -h: no \"-model string\" line:\n%s", out)
	}
	out, errOut, code := runChild(t, "export", "-h")
	if code != 0 || !strings.Contains(out, "train export -run RUN -out DIR") || !strings.Contains(out, "-embeddings") {
		t.Errorf("export -h: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestUsageErrorsExitOne: an unknown flag, a stray argument and a missing -recipe exit 1 with
// the error on stderr.
func TestUsageErrorsExitOne(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{nil, "-recipe is required"},
		{[]string{"export", "-run", "x"}, "-run and -out are required"},
	} {
		out, errOut, code := runChild(t, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 and %q on stderr", c.args, code, out, errOut, c.want)
		}
	}
}
