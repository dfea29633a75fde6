package knnlmlm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// ScoreDir holds a split's scoring so far, <split>.json: the grid's sums after each abstract
// scored, written atomically, so that a killed run resumes the scoring (hours at full size:
// one search of the datastore per held-out token) from the next abstract. What the sums are
// of is the state's hash (scoreHash); a state of anything else is refused.
const ScoreDir = "scoring"

// ScorePhaseName names the scoring for Options.InterruptPhase (InterruptAt: abstracts this run
// scores before it stops) in the tests of resume.
const ScorePhaseName = "scoring"

// maxScoreState bounds a <split>.json: at most 6 bins x 64 temperatures x 65 λ (maxGrid and
// λ = 0) sums, about 25,000 numbers of at most ~25 characters, under 0.7 MB.
const maxScoreState = 1 << 20

// scoreState is a split's <split>.json: the first Done abstracts of the split scored into the
// grid's sums (every float64 written as the shortest decimal that reads back to its bits, so
// a resumed run continues from the uninterrupted run's exact sums).
type scoreState struct {
	Hash          string        `json:"hash"`
	Done          int           `json:"done"` // abstracts of the split scored, in order
	Tokens        int           `json:"tokens"`
	LMSeconds     float64       `json:"lm_seconds"`
	SearchSeconds float64       `json:"search_seconds"`
	NLL           [][][]float64 `json:"nll"` // [bin][temperature][lambda]
	N             []int         `json:"n"`   // tokens per bin
	Nearest       float64       `json:"nearest"`
}

// scoreHash names what a split's scoring is of: the datastore (its manifest hash), the split,
// its abstracts in order with their tokens, k, the search and its HNSW settings, the seed and
// both grids.
func (r *lmRun) scoreHash(name string, ids []string, g *grid) string {
	c := r.c
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00k=%d\x00search=%s/%d/%d/%d\x00seed=%d\x00T=%v\x00lambda=%v\x00",
		datastoreHash(r.sha, c, r.rec.Data.TitleField, r.storeIDs), name, c.K, c.Search, c.HNSWM, c.HNSWEfConstruction, c.HNSWEfSearch, r.rec.Seed, g.temps, g.lambdas)
	var b [8]byte
	for _, id := range ids {
		fmt.Fprintf(h, "%s\x00", id)
		for _, t := range r.seqs[id] {
			binary.LittleEndian.PutUint64(b[:], uint64(t))
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func scorePath(dir, name string) string { return filepath.Join(dir, ScoreDir, name+".json") }

// readScore restores g from dir's state of split name (done 0 when there is none); a state of
// other scoring or of a grid of another size is refused, naming the file.
func readScore(dir, name, hash string, g *grid, nIDs int) (*scoreState, error) {
	path := scorePath(dir, name)
	b, err := bounded.ReadFile(path, maxScoreState)
	if errors.Is(err, fs.ErrNotExist) {
		return &scoreState{Hash: hash}, nil
	}
	if err != nil {
		return nil, err
	}
	var s scoreState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Hash != hash {
		return nil, fmt.Errorf("%s: the scoring of another datastore, split, k, search or grid (hash %s, this run's %s); remove it to score %s again", path, s.Hash, hash, name)
	}
	if s.Done < 0 || s.Done > nIDs || len(s.NLL) != len(g.nll) || len(s.N) != len(g.n) {
		return nil, fmt.Errorf("%s: %d of %d abstracts done, %d and %d bins (want %d)", path, s.Done, nIDs, len(s.NLL), len(s.N), len(g.n))
	}
	for b := range s.NLL {
		if len(s.NLL[b]) != len(g.temps) {
			return nil, fmt.Errorf("%s: nll[%d] has %d temperatures, want %d", path, b, len(s.NLL[b]), len(g.temps))
		}
		for t := range s.NLL[b] {
			if len(s.NLL[b][t]) != len(g.lambdas) {
				return nil, fmt.Errorf("%s: nll[%d][%d] has %d lambdas, want %d", path, b, t, len(s.NLL[b][t]), len(g.lambdas))
			}
			copy(g.nll[b][t], s.NLL[b][t])
		}
	}
	copy(g.n, s.N)
	g.nearest = s.Nearest
	return &s, nil
}

// writeScore writes s with g's sums atomically.
func writeScore(dir, name string, s *scoreState, g *grid) error {
	s.NLL, s.N, s.Nearest = g.nll, g.n, g.nearest
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("%s: %w", scorePath(dir, name), err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ScoreDir), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(scorePath(dir, name), append(b, '\n'))
}
