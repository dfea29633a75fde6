package data

import (
	"errors"
	"fmt"
	"io"
)

// ErrStopScan, returned by a ScanCorpus callback, ends the scan without an error.
var ErrStopScan = errors.New("data: stop scan")

// ScanCorpus reads the BEIR corpus.jsonl at path one document at a time from byte offset from,
// and calls fn with each document and the byte offset of its line, in file order: the reader
// of a shard of the corpus (a worker of the encoding pipeline reads only its own lines). from
// must be 0 with line 1, or the offset fn was given for a document whose Line is line. The
// scan ends at the end of the file, after limit documents (limit <= 0: no limit), or when fn
// returns an error: ErrStopScan ends it with nil, any other error is returned as it is.
//
// Each line is checked as LoadCorpus checks it, with the same errors naming path and line;
// blank lines are skipped and a byte-order mark before line 1 is ignored. It keeps nothing, so
// a duplicate id is not its error (CorpusReader checks them).
func ScanCorpus(path string, from int64, line, limit int, fn func(d Document, offset int64) error) error {
	if from < 0 || line < 1 || (from == 0) != (line == 1) {
		return fmt.Errorf("%s: scan from byte %d as line %d: want byte 0 as line 1, or a later line's offset", path, from, line)
	}
	j, err := openJSONL(path, "title", "text")
	if err != nil {
		return err
	}
	defer j.close()
	if _, err := j.f.Seek(from, io.SeekStart); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	j.r.Reset(j.f)
	j.line, j.off = line-1, from
	for n := 0; limit <= 0 || n < limit; n++ {
		rec, err := j.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(Document(rec), j.recOff); err != nil {
			if errors.Is(err, ErrStopScan) {
				return nil
			}
			return err
		}
	}
	return nil
}
