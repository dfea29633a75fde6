package checkpoints

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// ChecksumFile is the sidecar of a checkpoint directory: one line per file of the checkpoint,
// "<sha256 hex>  <name>" in name order, the format of sha256sum(1) (`sha256sum -c
// checksums.sha256` checks it by hand). Save writes it last into the checkpoint's temporary
// directory, so it is complete before the directory is renamed into place; LoadDir checks every
// file it lists before reading any, as Lucene checks a CRC32 footer on open. The files
// themselves are unchanged: model.safetensors stays loadable by any safetensors library.
const ChecksumFile = "checksums.sha256"

// ErrCorrupt is wrapped by the error of LoadDir (and Load) for a checkpoint file whose bytes
// are not those written.
var ErrCorrupt = errors.New("checksum mismatch")

// Warnings receives the line Load writes when it falls back from a damaged latest checkpoint
// to the newest intact one.
var Warnings io.Writer = os.Stderr

// writeChecksums writes dir/ChecksumFile over every regular file in dir.
func writeChecksums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries { // sorted by name
		if !e.Type().IsRegular() || e.Name() == ChecksumFile || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		sum, err := bounded.SHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return atomicfile.WriteFile(filepath.Join(dir, ChecksumFile), []byte(b.String()))
}

// ParseChecksums parses a ChecksumFile (name names it in errors): "<64 hex>  <file name>"
// lines, each name a plain file name given once.
func ParseChecksums(name string, b []byte) (map[string]string, error) {
	out := map[string]string{}
	text := string(b)
	if text != "" && !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("%s: the last line has no newline (truncated?)", name)
	}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if text == "" {
			break
		}
		sum, file, ok := strings.Cut(line, "  ")
		if _, err := hex.DecodeString(sum); !ok || err != nil || len(sum) != 64 || strings.ToLower(sum) != sum {
			return nil, fmt.Errorf("%s:%d: want \"<sha256 hex>  <file>\"", name, i+1)
		}
		if file == "" || file == "." || file == ".." || strings.ContainsAny(file, "/\\\x00") {
			return nil, fmt.Errorf("%s:%d: %q is not a file name of the checkpoint directory", name, i+1, file)
		}
		if _, dup := out[file]; dup {
			return nil, fmt.Errorf("%s:%d: %s listed twice", name, i+1, file)
		}
		out[file] = sum
	}
	return out, nil
}

// VerifyDir checks every file the checkpoint directory's ChecksumFile lists against its sum;
// the error names the first damaged or missing file and wraps ErrCorrupt. A directory without
// a ChecksumFile (written before checksums existed) passes.
func VerifyDir(dir string) error {
	path := filepath.Join(dir, ChecksumFile)
	b, err := bounded.ReadFile(path, bounded.SmallFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	sums, err := ParseChecksums(path, b)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range sums {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		got, err := bounded.SHA256(filepath.Join(dir, n))
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: missing (listed in %s): %w", filepath.Join(dir, n), ChecksumFile, ErrCorrupt)
		} else if err != nil {
			return err
		}
		if got != sums[n] {
			return fmt.Errorf("%s: sha256 %s, %s says %s (the file is damaged): %w", filepath.Join(dir, n), got, ChecksumFile, sums[n], ErrCorrupt)
		}
	}
	return nil
}

// fallback is Load's answer to a damaged latest checkpoint (damage, in dir/latest's directory
// latest): the newest other complete checkpoint directory of dir (by modification time, the
// time Save renamed it into place) that loads intact, with a line to Warnings saying so; the
// original error when there is none.
func fallback(dir, latest string, damage error) (*Checkpoint, error) {
	names, err := Checkpoints(dir)
	if err != nil {
		return nil, damage
	}
	type cand struct {
		name string
		mod  int64
	}
	var cs []cand
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(dir, n)); n != latest && err == nil {
			cs = append(cs, cand{n, st.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int { return int(min(max(b.mod-a.mod, -1), 1)) })
	for _, c := range cs {
		ck, err := LoadDir(filepath.Join(dir, c.name))
		if err == nil {
			fmt.Fprintf(Warnings, "checkpoints: %v; using %s, the newest intact checkpoint\n", damage, ck.Dir)
			return ck, nil
		}
	}
	return nil, damage
}
