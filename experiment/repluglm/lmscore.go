package repluglm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// CacheFile is the run directory's cache of the frozen LM's scores: one line per (claim id,
// passage id), log P_LM(claim | abstract, instruction) in nats, in the teacher-cache format
// (internal/teachercache: a header naming the LM and the layout by a SHA-256, the pairs count
// and the SHA-256 of the lines, so that a file of another LM or layout, cut short or edited, is
// refused before any score is used).
const CacheFile = "lm_scores.tsv"

// layoutVersion changes when the way a pair is laid out for the LM changes (the cache key).
const layoutVersion = "replug_lm/1"

// scorer reads (abstract, claim) pairs with the frozen LM: the abstract's tokens (cut to
// AbstractTokens), "\n" and the instruction, then the claim's tokens (cut to ClaimTokens),
// whose log-likelihood it returns (Shi et al. 2023, eq. 3: log P_LM(y | d, x) with y the claim
// and x the instruction).
type scorer struct {
	dec *model.LlamaDecoder
	tok *tokenize.GGUFTokenizer
	c   *Config
	sep []int // "\n" + instruction

	pairs, cutAbstracts, cutClaims int // what the scorer read and cut
}

func newScorer(m *model.Llama, tok *tokenize.GGUFTokenizer, c *Config) (*scorer, error) {
	dec, err := model.NewLlamaDecoder(m)
	if err != nil {
		return nil, err
	}
	sep := "\n"
	if c.Instruction != "" {
		sep += c.Instruction
	}
	s := &scorer{dec: dec, tok: tok, c: c, sep: tok.Encode(sep)}
	if n := c.AbstractTokens + len(s.sep) + c.ClaimTokens; n > m.Cfg.MaxPosition {
		return nil, fmt.Errorf("replug_lm.abstract_tokens: %d abstract + %d instruction + %d claim tokens (replug_lm.claim_tokens) = %d, over the LM's context of %d",
			c.AbstractTokens, len(s.sep), c.ClaimTokens, n, m.Cfg.MaxPosition)
	}
	return s, nil
}

// cacheKey names the LM and the layout its scores are of: the SHA-256 of the LM file's SHA-256,
// the layout version, the token bounds and the instruction.
func cacheKey(lmSHA256 string, c *Config) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00abstract_tokens=%d\x00claim_tokens=%d\x00instruction=%q", lmSHA256, layoutVersion, c.AbstractTokens, c.ClaimTokens, c.Instruction))
	return hex.EncodeToString(h[:])
}

// claimTokens is y: the claim's tokens (after a space when an instruction precedes it), cut to
// ClaimTokens.
func (s *scorer) claimTokens(text string) []int {
	if s.c.Instruction != "" {
		text = " " + text
	}
	ids := s.tok.Encode(text)
	if len(ids) > s.c.ClaimTokens {
		s.cutClaims++
		ids = ids[:s.c.ClaimTokens]
	}
	return ids
}

// prefix is the abstract's tokens, cut to AbstractTokens, then "\n" and the instruction.
func (s *scorer) prefix(abstract string) []int {
	ids := s.tok.Encode(abstract)
	if len(ids) > s.c.AbstractTokens {
		s.cutAbstracts++
		ids = ids[:s.c.AbstractTokens]
	}
	return append(ids, s.sep...)
}

// score returns log P_LM(claim | abstract_i, instruction) for every abstract, in nats: the sum
// over the claim's tokens of the log-softmax of the LM's next-token logits (float64 sums). The
// abstracts go through the LM together, so a claim's k scores come from one batch whatever
// was cached before (a resumed run scores as the uninterrupted one).
func (s *scorer) score(abstracts []string, claim string) ([]float64, error) {
	y := s.claimTokens(claim)
	if len(y) == 0 {
		return nil, fmt.Errorf("claim %q has no tokens", claim)
	}
	n := len(abstracts)
	caches := make([]*model.LlamaCache, n)
	prefixes := make([][]int, n)
	for i, a := range abstracts {
		prefixes[i] = s.prefix(a)
		c, err := s.dec.NewCache(len(prefixes[i]) + len(y))
		if err != nil {
			return nil, err
		}
		caches[i] = c
	}
	s.pairs += n
	out := make([]float64, n)
	last, err := s.dec.Forward(caches, prefixes, false) // [V] per abstract: scores y[0]
	if err != nil {
		return nil, err
	}
	for i := range n {
		out[i] = logSoftmaxAt(last[i], y[0])
	}
	if len(y) == 1 {
		return out, nil
	}
	rest := make([][]int, n)
	for i := range rest {
		rest[i] = y[:len(y)-1] // row j scores y[j+1]
	}
	rows, err := s.dec.Forward(caches, rest, true)
	if err != nil {
		return nil, err
	}
	V := len(last[0])
	for i := range n {
		for j := 1; j < len(y); j++ {
			out[i] += logSoftmaxAt(rows[i][(j-1)*V:j*V], y[j])
		}
	}
	return out, nil
}

// logSoftmaxAt is log softmax(logits)[i] in float64, max-subtracted.
func logSoftmaxAt(logits []float32, i int) float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	return float64(logits[i]) - mx - math.Log(sum)
}
