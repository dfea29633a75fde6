// Package bounded is the one way the toolkit opens a file it reads: regular files only (a
// device such as /dev/zero, a FIFO or a directory is refused before a byte is read, and a FIFO
// is never waited on), and no more bytes than a stated maximum for that kind of file. Every
// size a file states is then checked by its parser against the bytes that are really there.
//
// It is not a sandbox: paths are followed as given (symbolic links included); only what the
// link finally names is checked.
package bounded

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// The stated maximum of each kind of file the toolkit reads whole. Streamed files (corpora,
// qrels, TREC runs, shards) are opened with NoLimit: their readers bound each line or record.
const (
	KiB = int64(1) << 10
	MiB = int64(1) << 20
	GiB = int64(1) << 30

	Recipe       = 1 * MiB   // recipe TOML
	ConfigJSON   = 1 * MiB   // config.json, modules.json, sentence-transformers' small JSON files, trainer_state.json
	SmallFile    = 1 * MiB   // one-line pointer files (latest, .lock), done markers
	RunState     = 1 * GiB   // what a run writes and reads back: metrics, progress, mined examples, labels
	Tokenizer    = 512 * MiB // tokenizer.json, vocab.txt
	TeacherCache = 4 * GiB   // teacher_scores.tsv
	Weights      = 256 * GiB // model.safetensors, optimizer.safetensors, pytorch_model.bin, .npy: their headers are checked against the file size
	NoLimit      = int64(-1) // a streamed file: regular, any size
)

// ErrNotRegular is wrapped by the error of Open and ReadFile for a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error of Open and ReadFile for a file above its kind's maximum.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading and returns the file and its size. It refuses, with an error
// naming the path, anything but a regular file, and a file larger than max bytes (max < 0: no
// limit). The caller closes the file.
func Open(path string, max int64) (*os.File, int64, error) {
	f, err := openNonblock(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(st.Mode()))
	}
	if max >= 0 && st.Size() > max {
		f.Close()
		return nil, 0, fmt.Errorf("%s: %w: %d bytes, the maximum for this kind of file is %d", path, ErrTooLarge, st.Size(), max)
	}
	return f, st.Size(), nil
}

// ReadFile is os.ReadFile through Open: a regular file of at most max bytes (max < 0: no
// limit), read into one buffer of its stated size. A file that changes size while it is read
// is an error.
func ReadFile(path string, max int64) ([]byte, error) {
	f, size, err := Open(path, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, size)
	if _, err := io.ReadFull(f, buf); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%s: shrank while being read (%d bytes stated)", path, size)
		}
		return nil, err
	}
	var one [1]byte
	if n, _ := f.Read(one[:]); n > 0 {
		return nil, fmt.Errorf("%s: grew while being read (%d bytes stated)", path, size)
	}
	return buf, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}

// OpenRegular is Open without a size limit, for a file read as a stream whose reader bounds
// each line or record itself (a corpus, qrels, a TREC run, a shard).
func OpenRegular(path string) (*os.File, error) {
	f, _, err := Open(path, NoLimit)
	return f, err
}

// SHA256 returns the hex SHA-256 of the regular file at path, read as a stream.
func SHA256(path string) (string, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
