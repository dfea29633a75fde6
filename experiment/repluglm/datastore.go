package repluglm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/index/shard"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/tokenize"
)

// DatastoreDir is where a run keeps its frozen datastore: the passages' vectors as encoded by
// the initial passage tower (index/shard, float32, sha256 manifest), so that a resumed run reads
// them instead of encoding the corpus again.
const DatastoreDir = "datastore"

// datastoreShard is the passages per shard file.
const datastoreShard = 4096

// datastoreHash names what the vectors are of: the passage tower's parameters before training,
// the passage length and the passages' ids in order.
func (r *lmRun) datastoreHash() (string, error) {
	ph, err := indexrefresh.HashParams(r.m.Passage.Params())
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00max_length=%d\x00%s", ph, r.rec.Tokenizer.MaxLength, strings.Join(r.ids, "\x00"))))
	return hex.EncodeToString(h[:]), nil
}

// encodeDatastore returns the datastore's vectors [len(ids) x dim], normalised: read from
// <run>/datastore when a resumed run wrote them (verified: every shard's sha256, and the hash of
// the encoder, length and ids), else encoded with the current passage tower and written.
func (r *lmRun) encodeDatastore() ([]float32, tokenize.TruncCount, error) {
	var cut tokenize.TruncCount
	dir := filepath.Join(r.dir, DatastoreDir)
	want, err := r.datastoreHash()
	if err != nil {
		return nil, cut, err
	}
	dim := r.m.Passage.Dim()
	if _, err := os.Stat(dir); err == nil {
		vecs, err := readDatastore(dir, want, r.ids, dim)
		if err != nil {
			return nil, cut, fmt.Errorf("replug_lm: %s: %w (remove the directory to encode the corpus again)", dir, err)
		}
		fmt.Fprintf(r.o.Out, "datastore: %d passage vectors read from %s (verified)\n", len(r.ids), dir)
		return vecs, cut, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, cut, err
	}
	start := time.Now()
	enc, err := biencoder.NewEncoder(r.m.Passage, r.tok, r.rec.Tokenizer.MaxLength, true) // dynamic padding, with a progress bar
	if err != nil {
		return nil, cut, err
	}
	defer enc.Close()
	enc.Progress, enc.Name = r.o.Progress, "datastore"
	vecs, err := enc.Encode(r.texts, &cut)
	if err != nil {
		return nil, cut, err
	}
	biencoder.NormalizeRows(vecs, dim)
	tokenize.ReportTruncation(r.o.Out, "datastore", r.rec.Tokenizer.MaxLength, tokenize.TruncPart{Name: "passages", Count: &cut})
	fmt.Fprintf(r.o.Out, "datastore: %d passages encoded by the frozen passage tower in %.1fs\n", len(r.ids), time.Since(start).Seconds())
	if _, err := shard.WriteAll(dir, shard.Meta{ModelHash: want, Version: "v1", Dim: dim, DType: shard.Float32}, r.ids, vecs, datastoreShard); err != nil {
		return nil, cut, err
	}
	return vecs, cut, nil
}

// readDatastore reads the vectors of dir, which must be of hash want and hold ids in order,
// each of dim values.
func readDatastore(dir, want string, ids []string, dim int) ([]float32, error) {
	rd, err := shard.OpenVerified(dir)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	if got := rd.Meta().ModelHash; got != want {
		return nil, fmt.Errorf("encoded by another passage tower, length or corpus (hash %s, this run's %s)", got, want)
	}
	if rd.Len() != len(ids) || rd.Dim() != dim {
		return nil, fmt.Errorf("%d vectors of %d values, want %d of %d", rd.Len(), rd.Dim(), len(ids), dim)
	}
	vecs := make([]float32, 0, len(ids)*dim)
	var got []string
	err = rd.ForEach(func(_ int, sids []string, v []float32) error {
		got = append(got, sids...)
		vecs = append(vecs, v...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !slices.Equal(got, ids) {
		return nil, fmt.Errorf("the passages' ids differ from this run's")
	}
	return vecs, nil
}
