package scifactverify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/schollz/progressbar/v3"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
)

// predictClaim verifies one claim with a reader over docs: the Self-RAG reader or the plain
// one ("selfrag", "plain") emits each abstract it does not abstain on; closed-book
// ("closedbook") attaches its label to docs[0] with no rationale.
//
// trace, when not nil, receives one JSON line per (claim, abstract) read: the reflection
// probabilities and the decoded answer.
func predictClaim(r *reader, how string, claim Claim, docs []*Doc, trace *bytes.Buffer) (eval.SciFactPrediction, error) {
	p := eval.SciFactPrediction{ID: claim.ID, Evidence: map[int]eval.SciFactPredAbstract{}}
	if how == "closedbook" {
		if len(docs) == 0 {
			return p, nil
		}
		lab, err := r.closedBook(claim.Text)
		if err != nil {
			return p, err
		}
		p.Evidence[docs[0].ID] = eval.SciFactPredAbstract{Label: lab, Sentences: []int{}}
		return p, nil
	}
	for _, d := range docs {
		if _, done := p.Evidence[d.ID]; done {
			continue
		}
		var v verdict
		var err error
		if how == SelfRAGPhase {
			v, err = r.selfrag(claim.Text, d)
		} else {
			v, err = r.plain(claim.Text, d)
		}
		if err != nil {
			return p, fmt.Errorf("claim %d, doc %d: %w", claim.ID, d.ID, err)
		}
		if trace != nil {
			b, err := json.Marshal(map[string]any{"id": claim.ID, "doc": d.ID, "label": v.label, "sentences": append([]int{}, v.sents...),
				"p_relevant": v.pRel, "p_supported": v.pSup, "p_contradicts": v.pCon, "p_insufficient": v.pNoSupp, "text": v.text,
				"passage": v.window, "passages": v.passages})
			if err != nil {
				return p, err
			}
			trace.Write(append(b, '\n'))
		}
		if v.label != "" {
			p.Evidence[d.ID] = eval.SciFactPredAbstract{Label: v.label, Sentences: append([]int{}, v.sents...)}
		}
	}
	return p, nil
}

// predict runs one system over the eval claims, with a progress bar on progress and the
// trace as predictClaim's.
func predict(ctx context.Context, sys string, readers map[string]*reader, l *loaded, topK int, progress io.Writer, trace *bytes.Buffer) ([]eval.SciFactPrediction, error) {
	how, source, _ := strings.Cut(sys, "_")
	k := topK
	if how != SelfRAGPhase {
		k = 1 // plain and closed-book read the top-1 abstract
	}
	if how == "oracle" {
		how = source // oracle_plain, oracle_selfrag: the cited abstracts
	}
	r := readers[how]
	if r == nil {
		return nil, fmt.Errorf("no %s reader", how)
	}
	bar := progressbar.NewOptions(len(l.evals.claims), progressbar.OptionSetWriter(progress), progressbar.OptionSetDescription(sys),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(24), progressbar.OptionSetPredictTime(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(progress) }))
	var out []eval.SciFactPrediction
	for _, cl := range l.evals.claims {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ids []int
		if strings.HasPrefix(sys, "oracle_") {
			ids = cl.Cited
		} else {
			ids = l.ranked[source][cl.ID]
			ids = ids[:min(k, len(ids))]
		}
		docs := make([]*Doc, len(ids))
		for i, d := range ids {
			docs[i] = l.corpus.ByID[d]
		}
		p, err := predictClaim(r, how, cl, docs, trace)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
		_ = bar.Add(1)
	}
	return out, nil
}

// writePredictions writes SciFact's prediction format, one line per claim in order, doc ids
// ascending (a temporary file renamed into place):
//
//	{"id": 13, "evidence": {"<doc_id>": {"sentences": [0, 3], "label": "SUPPORT"}}}
func writePredictions(path string, preds []eval.SciFactPrediction) error {
	var b bytes.Buffer
	for _, p := range preds {
		docs := make([]int, 0, len(p.Evidence))
		for d := range p.Evidence {
			docs = append(docs, d)
		}
		slices.Sort(docs)
		fmt.Fprintf(&b, `{"id": %d, "evidence": {`, p.ID)
		for i, d := range docs {
			pa := p.Evidence[d]
			sents, err := json.Marshal(append([]int{}, pa.Sentences...))
			if err != nil {
				return err
			}
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `"%d": {"sentences": %s, "label": %q}`, d, sents, pa.Label)
		}
		b.WriteString("}}\n")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b.Bytes())
}

// VerifyOptions are the choices of Verify.
type VerifyOptions struct {
	Reader string // "selfrag" (default) or "plain"
	TopK   int    // abstracts read per claim; 0: the run's choice on dev, else its top_k (selfrag), or 1 (plain)
	Corpus string // a SciFact corpus.jsonl; "": the run's data.dir/verify/corpus.jsonl
	Out    io.Writer
	// Progress receives the progress bar and the truncation line (nil: discarded); the summary
	// line on Out repeats the truncation counts.
	Progress io.Writer
}

// Verify runs the reader a scifact_verify run trained (its <run>/<reader> checkpoint, the
// adapters merged into init_from's model) on a file of claims, one JSON object per line with
// "id" (int) and "claim" (text), retrieving from the corpus with BM25, and writes SciFact-format
// predictions to outPath (a temporary file renamed into place): each abstract the reader does
// not abstain on, with its label and rationale sentence indices into the corpus' sentences.
func Verify(runDir, claimsPath, outPath string, o VerifyOptions) error {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Reader == "" {
		o.Reader = SelfRAGPhase
	}
	if o.Reader != SelfRAGPhase && o.Reader != PlainPhase {
		return fmt.Errorf("verify: reader %q: want selfrag or plain", o.Reader)
	}
	rec, err := configs.Load(filepath.Join(runDir, experiment.ResolvedRecipeFile))
	if err != nil {
		return err
	}
	if rec.Kind != Kind {
		return fmt.Errorf("verify: %s is a %s run, want %s", runDir, rec.Kind, Kind)
	}
	c := Of(rec)
	ck, err := checkpoints.Load(filepath.Join(runDir, o.Reader))
	if err != nil {
		return fmt.Errorf("verify: the %s reader: %w", o.Reader, err)
	}
	m, tok, _, err := export.OpenReaderLM(ck)
	if err != nil {
		return err
	}
	merged, err := m.MergeLoRA()
	if err != nil {
		return err
	}
	dec, err := model.NewLlamaDecoder(merged)
	if err != nil {
		return err
	}
	f, err := newFormat(tok, c.AbstractTokens, c.MaxLength)
	if err != nil {
		return err
	}
	if o.Corpus == "" {
		o.Corpus = filepath.Join(VerifyDir(rec.Data.Dir), "corpus.jsonl")
	}
	corpus, err := ReadCorpus(o.Corpus)
	if err != nil {
		return err
	}
	claims, err := ReadClaims(claimsPath, corpus)
	if err != nil {
		return err
	}
	k, threshold := o.TopK, c.RelThreshold
	if o.Reader == SelfRAGPhase { // the settings the run chose on dev for selfrag_bm25, if it did
		m, err := experiment.ReadMetrics(runDir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if v, ok := m["dev/selfrag_bm25/rel_threshold"]; ok {
			threshold = v
		}
		if v, ok := m["dev/selfrag_bm25/top_k"]; ok && k <= 0 {
			k = int(v)
		}
	}
	if k <= 0 {
		k = 1
		if o.Reader == SelfRAGPhase {
			k = c.TopK
		}
	}
	if k > 100 {
		return fmt.Errorf("verify: top-k %d: want at most 100", k)
	}
	ranked, err := retrieve(claims, k, bm25(corpus).Search)
	if err != nil {
		return err
	}
	l := &loaded{f: f, corpus: corpus, evals: &split{claims: claims}, ranked: map[string]map[int][]int{"bm25": ranked}}
	r := &reader{f: f, dec: dec, relThreshold: threshold}
	preds, err := predict(context.Background(), o.Reader+"_bm25", map[string]*reader{o.Reader: r}, l, k, o.Progress, nil)
	if err != nil {
		return err
	}
	if err := writePredictions(outPath, preds); err != nil {
		return err
	}
	n := 0
	for _, p := range preds {
		n += len(p.Evidence)
	}
	cut := f.cut.report(o.Progress, "verify")
	fmt.Fprintf(o.Out, "verify: %d claims, %d abstracts emitted (%s reader, top %d BM25 of %d abstracts) -> %s; %s\n",
		len(claims), n, o.Reader, k, len(corpus.Order), outPath, cut)
	return nil
}
