package scifactverify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// Choosing the Self-RAG decoder's top_k and rel_threshold on dev (scifact_verify.select_top_k,
// select_rel_threshold), before eval_split is read: each Self-RAG system (selfrag_bm25,
// selfrag_minilm, oracle_selfrag) decodes the dev claims once, at the grid's largest k and its
// lowest threshold (runs/dev.<system>.decisions.jsonl, reused on resume when it holds exactly
// that); every (k, threshold) of the grid is assembled from those decisions -- an abstract among
// the claim's first k is emitted when p([Relevant]) >= threshold and the support group's argmax
// is [Fully supported] or [Contradicted], as decoding at that threshold would -- and scored by
// SciFact's abstract-level Label-Only F1. The first best in grid order (k ascending, then the
// threshold ascending) is the system's choice on eval_split; the oracle reads every cited
// abstract, so only its threshold is chosen. The grid's scores go to
// runs/dev.<system>.select.tsv, the choice to metrics.json (dev/<system>/top_k,
// dev/<system>/rel_threshold, dev/<system>/abstract_label_only/f1).

// choice is a Self-RAG system's decoding choice: abstracts read per claim and the relevance cut.
type choice struct {
	k         int
	threshold float64
}

// decision is one line of runs/<split>.<system>.decisions.jsonl (predictClaim's trace): the
// fields assembling a prediction needs.
type decision struct {
	ID        int              `json:"id"`
	Doc       int              `json:"doc"`
	Label     eval.VerifyLabel `json:"label"`
	Sentences []int            `json:"sentences"`
	PRelevant float64          `json:"p_relevant"`
	PSup      float64          `json:"p_supported"`
	PCon      float64          `json:"p_contradicts"`
	PNoSupp   float64          `json:"p_insufficient"`
}

// cutByRelevance reports whether the decoder stopped at the relevance token (p([Relevant])
// below its threshold: the support group was never read).
func (d decision) cutByRelevance() bool { return d.PSup == 0 && d.PCon == 0 && d.PNoSupp == 0 }

// selectOnDev chooses each Self-RAG system's top_k and rel_threshold on the dev claims (a no-op
// unless select_top_k or select_rel_threshold is set).
func (r *verifyRun) selectOnDev(ctx context.Context) error {
	c := r.c
	if !c.selecting() {
		return nil
	}
	var gold []eval.SciFactClaim
	for _, cl := range r.l.dev.claims {
		gold = append(gold, r.l.dev.gold[cl.ID])
	}
	r.metrics["dev/claims"] = float64(len(gold))
	ks, ts := c.grid()
	for _, sys := range c.Systems {
		if !isSelfRAG(sys) {
			continue
		}
		ds, err := r.devDecisions(ctx, sys, ks[len(ks)-1], ts[0])
		if err != nil {
			return fmt.Errorf("%s on dev: %w", sys, err)
		}
		oracle := strings.HasPrefix(sys, "oracle_")
		best, bestF1, tsv, err := chooseOnGrid(gold, r.l.dev.claims, ds, ks, ts, oracle)
		if err != nil {
			return fmt.Errorf("%s on dev: %w", sys, err)
		}
		if err := atomicfile.WriteFile(filepath.Join(r.dir, experiment.RunsDir, "dev."+sys+".select.tsv"), tsv); err != nil {
			return err
		}
		r.choices[sys] = best
		if !oracle {
			r.metrics["dev/"+sys+"/top_k"] = float64(best.k)
		}
		r.metrics["dev/"+sys+"/rel_threshold"], r.metrics["dev/"+sys+"/abstract_label_only/f1"] = best.threshold, bestF1
		fmt.Fprintf(r.o.Out, "scifact_verify: %s chosen on %d dev claims: top_k = %d, rel_threshold = %g (abstract Label-Only F1 %.4f of %d grid points; runs/dev.%s.select.tsv)\n",
			sys, len(gold), best.k, best.threshold, bestF1, bytes.Count(tsv, []byte("\n"))-1, sys)
	}
	return nil
}

// chooseOnGrid scores every (k, threshold) of the grid (ks, ts ascending) on the gold claims,
// assembled from ds (every abstract a claim read when all: the oracle, whose k is then the
// largest), and returns the first best by abstract Label-Only F1, its F1 and the grid's scores
// as a table (top_k, rel_threshold, then the four F1s, one row per point).
func chooseOnGrid(gold []eval.SciFactClaim, claims []Claim, ds []decision, ks []int, ts []float64, all bool) (choice, float64, []byte, error) {
	if all {
		ks = ks[len(ks)-1:]
	}
	best, bestF1 := choice{}, -1.0
	var tsv bytes.Buffer
	tsv.WriteString("top_k\trel_threshold\tabstract_label_only_f1\tabstract_rationalized_f1\tsentence_selection_f1\tsentence_label_f1\n")
	for _, k := range ks {
		for _, t := range ts {
			sc, err := eval.ScoreSciFact(gold, assemble(claims, ds, k, t, all))
			if err != nil {
				return choice{}, 0, nil, err
			}
			fmt.Fprintf(&tsv, "%d\t%g\t%.6f\t%.6f\t%.6f\t%.6f\n", k, t, sc.AbstractLabelOnly.F1, sc.AbstractRationalized.F1,
				sc.SentenceSelection.F1, sc.SentenceLabel.F1)
			if sc.AbstractLabelOnly.F1 > bestF1 {
				best, bestF1 = choice{k: k, threshold: t}, sc.AbstractLabelOnly.F1
			}
		}
	}
	return best, bestF1, tsv.Bytes(), nil
}

// devDecisions decodes the dev claims with system sys at k abstracts and relevance cut t (the
// Self-RAG reader; every cited abstract for the oracle) and returns the decisions, reading them
// from runs/dev.<sys>.decisions.jsonl instead when that file holds exactly them (a resumed run).
func (r *verifyRun) devDecisions(ctx context.Context, sys string, k int, t float64) ([]decision, error) {
	path := filepath.Join(r.dir, experiment.RunsDir, "dev."+sys+".decisions.jsonl")
	_, source, _ := strings.Cut(sys, "_")
	want := func(cl Claim) []int {
		if source == SelfRAGPhase { // oracle_selfrag
			return cl.Cited
		}
		ids := r.l.devRanked[source][cl.ID]
		return ids[:min(k, len(ids))]
	}
	b, err := bounded.ReadFile(path, bounded.RunState)
	if err == nil {
		ds, err := parseDecisions(path, b)
		if err == nil && decodedAs(ds, r.l.dev.claims, want, t) {
			fmt.Fprintf(r.o.Out, "scifact_verify: %s: the dev decisions of %s reused (%d)\n", sys, path, len(ds))
			return ds, nil
		}
		why := "other claims, abstracts or threshold"
		if err != nil {
			why = err.Error()
		}
		fmt.Fprintf(r.o.Out, "scifact_verify: %s: %s is not this decoding (k %d, threshold %g: %s): decoded again\n", sys, path, k, t, why)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	readers := withThreshold(r.readers, t)
	l := *r.l
	l.evals, l.ranked = r.l.dev, r.l.devRanked
	var trace bytes.Buffer
	if _, err := predict(ctx, sys, readers, &l, k, r.o.Progress, &trace); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(path, trace.Bytes()); err != nil {
		return nil, err
	}
	return parseDecisions(path, trace.Bytes())
}

// parseDecisions reads a decisions file, one JSON object per line; an error names the line.
func parseDecisions(path string, b []byte) ([]decision, error) {
	var out []decision
	err := eachJSONLine(path, b, func(d *decision) error {
		out = append(out, *d)
		return nil
	})
	return out, err
}

// decodedAs reports whether ds are the decisions of decoding claims' abstracts want(claim), in
// order, at relevance cut t or lower (no abstract cut by relevance with p([Relevant]) >= t).
func decodedAs(ds []decision, claims []Claim, want func(Claim) []int, t float64) bool {
	i := 0
	for _, cl := range claims {
		for _, doc := range want(cl) {
			if i == len(ds) || ds[i].ID != cl.ID || ds[i].Doc != doc || (ds[i].cutByRelevance() && ds[i].PRelevant >= t) {
				return false
			}
			i++
		}
	}
	return i == len(ds)
}

// assemble builds the predictions of decoding at k abstracts (all when all) and relevance cut t
// from decisions made at a larger k and a lower cut: per claim, its first k decisions, each
// emitted when p([Relevant]) >= t and its label is not an abstention.
func assemble(claims []Claim, ds []decision, k int, t float64, all bool) []eval.SciFactPrediction {
	byClaim := map[int][]decision{}
	for _, d := range ds {
		byClaim[d.ID] = append(byClaim[d.ID], d)
	}
	out := make([]eval.SciFactPrediction, len(claims))
	for i, cl := range claims {
		p := eval.SciFactPrediction{ID: cl.ID, Evidence: map[int]eval.SciFactPredAbstract{}}
		read := byClaim[cl.ID]
		if !all {
			read = read[:min(k, len(read))]
		}
		for _, d := range read {
			if d.Label != "" && d.PRelevant >= t {
				p.Evidence[d.Doc] = eval.SciFactPredAbstract{Label: d.Label, Sentences: append([]int{}, d.Sentences...)}
			}
		}
		out[i] = p
	}
	return out
}

// withThreshold is readers with the Self-RAG reader's relevance cut set to t (a copy: the
// run's readers are left as they are).
func withThreshold(readers map[string]*reader, t float64) map[string]*reader {
	sr := *readers[SelfRAGPhase]
	sr.relThreshold = t
	out := maps.Clone(readers)
	out[SelfRAGPhase] = &sr
	return out
}

// isSelfRAG reports whether system sys is read by the Self-RAG reader.
func isSelfRAG(sys string) bool { return strings.HasPrefix(sys, "selfrag_") || sys == "oracle_selfrag" }
