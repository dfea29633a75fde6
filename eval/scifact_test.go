package eval

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Gold claims of the hand-made cases.
var (
	sfC1 = SciFactClaim{ID: 1, Evidence: map[int]SciFactGoldAbstract{
		10: {Label: Support, Sets: [][]int{{0, 1}, {5}}}}}
	sfC2 = SciFactClaim{ID: 2, Evidence: map[int]SciFactGoldAbstract{}} // NEI
	sfC3 = SciFactClaim{ID: 3, Evidence: map[int]SciFactGoldAbstract{
		30: {Label: Contradict, Sets: [][]int{{2}}},
		31: {Label: Support, Sets: [][]int{{4, 6}}}}}
)

func sfPred(id int, ev map[int]SciFactPredAbstract) SciFactPrediction {
	if ev == nil {
		ev = map[int]SciFactPredAbstract{}
	}
	return SciFactPrediction{ID: id, Evidence: ev}
}

// prf is an expected (correct, retrieved, relevant) with its P, R, F1 computed by hand.
type prf struct {
	c, ret, rel int
	p, r, f     float64
}

func checkPRF(t *testing.T, name string, got PRF, want prf) {
	t.Helper()
	if got.Correct != want.c || got.Retrieved != want.ret || got.Relevant != want.rel {
		t.Errorf("%s counts: got correct %d retrieved %d relevant %d, want %d %d %d",
			name, got.Correct, got.Retrieved, got.Relevant, want.c, want.ret, want.rel)
	}
	for _, x := range []struct {
		what      string
		got, want float64
	}{{"precision", got.Precision, want.p}, {"recall", got.Recall, want.r}, {"F1", got.F1, want.f}} {
		if math.Abs(x.got-x.want) > 1e-15 {
			t.Errorf("%s %s = %.17g, want %.17g", name, x.what, x.got, x.want)
		}
	}
}

func TestScoreSciFactHandMade(t *testing.T) {
	S, C := Support, Contradict
	zero := func(ret, rel int) prf { return prf{0, ret, rel, 0, 0, 0} }
	for _, tc := range []struct {
		name                    string
		gold                    []SciFactClaim
		preds                   []SciFactPrediction
		labelOnly, rationalized prf
		selection, selLabel     prf
	}{
		{
			name:  "correct label, wrong rationale",
			gold:  []SciFactClaim{sfC1},
			preds: []SciFactPrediction{sfPred(1, map[int]SciFactPredAbstract{10: {S, []int{2, 3}}})},
			// Label-Only: 1 correct of 1 predicted, 1 gold; no gold set among {2, 3}.
			labelOnly: prf{1, 1, 1, 1, 1, 1}, rationalized: zero(1, 1),
			selection: zero(2, 3), selLabel: zero(2, 3),
		},
		{
			name:  "more than 3 sentences, gold sets only after the third",
			gold:  []SciFactClaim{sfC1},
			preds: []SciFactPrediction{sfPred(1, map[int]SciFactPredAbstract{10: {S, []int{7, 8, 9, 5, 0, 1}}})},
			// Abstract level looks at {7, 8, 9} only; sentence level credits 5, 0, 1 of 6.
			labelOnly: prf{1, 1, 1, 1, 1, 1}, rationalized: zero(1, 1),
			selection: prf{3, 6, 3, 0.5, 1, 2.0 / 3}, selLabel: prf{3, 6, 3, 0.5, 1, 2.0 / 3},
		},
		{
			name:         "more than 3 sentences, a gold set among the first 3",
			gold:         []SciFactClaim{sfC1},
			preds:        []SciFactPrediction{sfPred(1, map[int]SciFactPredAbstract{10: {S, []int{7, 5, 8, 9}}})},
			labelOnly:    prf{1, 1, 1, 1, 1, 1},
			rationalized: prf{1, 1, 1, 1, 1, 1},
			// 5 of 4 predicted sentences; 3 gold sentences.
			selection: prf{1, 4, 3, 0.25, 1.0 / 3, 2.0 / 7}, selLabel: prf{1, 4, 3, 0.25, 1.0 / 3, 2.0 / 7},
		},
		{
			name: "a prediction on a non-gold abstract",
			gold: []SciFactClaim{sfC1},
			preds: []SciFactPrediction{sfPred(1, map[int]SciFactPredAbstract{
				10: {S, []int{5}}, 99: {S, []int{0}}})},
			labelOnly: prf{1, 2, 1, 0.5, 1, 2.0 / 3}, rationalized: prf{1, 2, 1, 0.5, 1, 2.0 / 3},
			// 1 of 2 predicted sentences, 1 of 3 gold: F1 = 2(1/2)(1/3)/(5/6) = 2/5.
			selection: prf{1, 2, 3, 0.5, 1.0 / 3, 0.4}, selLabel: prf{1, 2, 3, 0.5, 1.0 / 3, 0.4},
		},
		{
			name:      "a gold NEI claim with a prediction",
			gold:      []SciFactClaim{sfC2},
			preds:     []SciFactPrediction{sfPred(2, map[int]SciFactPredAbstract{20: {C, []int{1}}})},
			labelOnly: zero(1, 0), rationalized: zero(1, 0), // recall 0/0 = 0
			selection: zero(1, 0), selLabel: zero(1, 0),
		},
		{
			name:      "empty predictions (precision 0/0 = 0, as the official safe_divide)",
			gold:      []SciFactClaim{sfC1, sfC2, sfC3},
			preds:     []SciFactPrediction{sfPred(1, nil), sfPred(2, nil), sfPred(3, nil)},
			labelOnly: zero(0, 3), rationalized: zero(0, 3),
			selection: zero(0, 6), selLabel: zero(0, 6),
		},
		{
			name: "wrong label, right rationale",
			gold: []SciFactClaim{sfC3},
			preds: []SciFactPrediction{sfPred(3, map[int]SciFactPredAbstract{
				30: {S, []int{2}}, 31: {S, []int{4, 6}}})},
			labelOnly: prf{1, 2, 2, 0.5, 0.5, 0.5}, rationalized: prf{1, 2, 2, 0.5, 0.5, 0.5},
			selection: prf{3, 3, 3, 1, 1, 1}, selLabel: prf{2, 3, 3, 2.0 / 3, 2.0 / 3, 2.0 / 3},
		},
		{
			name:      "part of a gold set",
			gold:      []SciFactClaim{sfC3},
			preds:     []SciFactPrediction{sfPred(3, map[int]SciFactPredAbstract{31: {S, []int{4}}})},
			labelOnly: prf{1, 1, 2, 1, 0.5, 2.0 / 3}, rationalized: zero(1, 2),
			selection: zero(1, 3), selLabel: zero(1, 3),
		},
		{
			name: "label only, no rationale",
			gold: []SciFactClaim{sfC3},
			preds: []SciFactPrediction{sfPred(3, map[int]SciFactPredAbstract{
				30: {C, nil}, 31: {S, []int{}}})},
			labelOnly: prf{2, 2, 2, 1, 1, 1}, rationalized: zero(2, 2),
			selection: zero(0, 3), selLabel: zero(0, 3),
		},
		{
			// doc/evaluation.md's worked example (claim 52), its "REFUTES" written CONTRADICT.
			name: "evaluation.md example",
			gold: []SciFactClaim{{ID: 52, Evidence: map[int]SciFactGoldAbstract{
				11: {Label: S, Sets: [][]int{{0, 1}, {11}}},
				15: {Label: S, Sets: [][]int{{4}}}}}},
			preds: []SciFactPrediction{sfPred(52, map[int]SciFactPredAbstract{
				11: {S, []int{1, 11, 13}}, 16: {C, []int{18, 20}}})},
			labelOnly: prf{1, 2, 2, 0.5, 0.5, 0.5}, rationalized: prf{1, 2, 2, 0.5, 0.5, 0.5},
			selection: prf{1, 5, 4, 0.2, 0.25, 2.0 / 9}, selLabel: prf{1, 5, 4, 0.2, 0.25, 2.0 / 9},
		},
		{
			// Micro-average: claims 1 ("non-gold abstract"), 2 ("NEI") and 3 ("wrong label")
			// together; counts add up, then divide: abstract 2/5 and 2/3 give F1 1/2.
			name: "micro-average over claims",
			gold: []SciFactClaim{sfC1, sfC2, sfC3},
			preds: []SciFactPrediction{
				sfPred(1, map[int]SciFactPredAbstract{10: {S, []int{5}}, 99: {S, []int{0}}}),
				sfPred(2, map[int]SciFactPredAbstract{20: {C, []int{1}}}),
				sfPred(3, map[int]SciFactPredAbstract{30: {S, []int{2}}, 31: {S, []int{4, 6}}}),
			},
			labelOnly: prf{2, 5, 3, 0.4, 2.0 / 3, 0.5}, rationalized: prf{2, 5, 3, 0.4, 2.0 / 3, 0.5},
			selection: prf{4, 6, 6, 2.0 / 3, 2.0 / 3, 2.0 / 3}, selLabel: prf{3, 6, 6, 0.5, 0.5, 0.5},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ScoreSciFact(tc.gold, tc.preds)
			if err != nil {
				t.Fatal(err)
			}
			checkPRF(t, "abstract Label-Only", m.AbstractLabelOnly, tc.labelOnly)
			checkPRF(t, "abstract Label+Rationale", m.AbstractRationalized, tc.rationalized)
			checkPRF(t, "sentence Selection-Only", m.SentenceSelection, tc.selection)
			checkPRF(t, "sentence Selection+Label", m.SentenceLabel, tc.selLabel)
			if m.Claims != len(tc.preds) {
				t.Errorf("claims %d, want %d", m.Claims, len(tc.preds))
			}
		})
	}
}

func TestScoreSciFactRejects(t *testing.T) {
	S := Support
	for _, tc := range []struct {
		name  string
		gold  []SciFactClaim
		preds []SciFactPrediction
		want  string
	}{
		{"unknown claim", []SciFactClaim{sfC1}, []SciFactPrediction{sfPred(1, nil), sfPred(7, nil)}, "claim 7, not a gold claim"},
		{"duplicate claim", []SciFactClaim{sfC1}, []SciFactPrediction{sfPred(1, nil), sfPred(1, nil)}, "claim 1 predicted twice"},
		{"missing claim", []SciFactClaim{sfC1, sfC2}, []SciFactPrediction{sfPred(2, nil)}, "1 gold claims have no prediction (first: 1)"},
		{"NEI label", []SciFactClaim{sfC1}, []SciFactPrediction{sfPred(1, map[int]SciFactPredAbstract{10: {"NOT_ENOUGH_INFO", nil}})}, `label "NOT_ENOUGH_INFO"`},
		{"negative sentence", []SciFactClaim{sfC1}, []SciFactPrediction{sfPred(1, map[int]SciFactPredAbstract{10: {S, []int{-1}}})}, "sentence index -1 is negative"},
		{"repeated sentence", []SciFactClaim{sfC1}, []SciFactPrediction{sfPred(1, map[int]SciFactPredAbstract{10: {S, []int{3, 3}}})}, "sentence index 3 appears twice"},
		{"overlapping gold sets", []SciFactClaim{{ID: 1, Evidence: map[int]SciFactGoldAbstract{10: {Label: S, Sets: [][]int{{1}, {1, 2}}}}}}, []SciFactPrediction{sfPred(1, nil)}, "gold claim 1: doc 10: evidence sets: sentence index 1 appears twice"},
	} {
		_, err := ScoreSciFact(tc.gold, tc.preds)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestReadAndScoreSciFactFiles reads four real test claims and hand-made predictions for them
// (eval/testdata/scifact/README.md) and checks figures computed by hand.
func TestReadAndScoreSciFactFiles(t *testing.T) {
	gold, err := ReadSciFactGold("testdata/scifact/claims.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(gold) != 4 || gold[1].ID != 3 || len(gold[1].Evidence[14717500].Sets) != 2 ||
		gold[2].Evidence[18174210].Label != Contradict || len(gold[0].Evidence) != 0 {
		t.Fatalf("gold read as %+v", gold)
	}
	preds, err := ReadSciFactPredictions("testdata/scifact/preds.jsonl", gold)
	if err != nil {
		t.Fatal(err)
	}
	if s := preds[1].Evidence[14717500].Sentences; len(s) != 4 || s[0] != 7 {
		t.Fatalf("prediction order not kept: %v", s)
	}
	m, err := ScoreSciFact(gold, preds)
	if err != nil {
		t.Fatal(err)
	}
	// Claim 1 (NEI): 1 predicted abstract, 1 sentence. Claim 3: label right, {7} among the
	// first 3 of [7 2 0 5]; sentences 7, 2, 5 credited of 4. Claim 42: label wrong, sentence 10
	// selected. Claim 70: both labels right; [5] misses set {5, 6} in 5956380, is set {5} in
	// 4414547. Abstracts: 5 predicted, 4 gold, 3 label-right, 2 rationalized. Sentences:
	// 8 predicted, 9 gold, 5 selected, 4 with the right label.
	checkPRF(t, "abstract Label-Only", m.AbstractLabelOnly, prf{3, 5, 4, 0.6, 0.75, 2.0 / 3})
	checkPRF(t, "abstract Label+Rationale", m.AbstractRationalized, prf{2, 5, 4, 0.4, 0.5, 4.0 / 9})
	checkPRF(t, "sentence Selection-Only", m.SentenceSelection, prf{5, 8, 9, 5.0 / 8, 5.0 / 9, 10.0 / 17})
	checkPRF(t, "sentence Selection+Label", m.SentenceLabel, prf{4, 8, 9, 0.5, 4.0 / 9, 8.0 / 17})
}

func TestReadSciFactRejects(t *testing.T) {
	dir := t.TempDir()
	gold := `{"id": 1, "claim": "c", "evidence": {"10": [{"sentences": [0], "label": "SUPPORT"}]}, "cited_doc_ids": [10]}` + "\n"
	for _, tc := range []struct {
		name, gold, preds, want string
	}{
		{"gold: mixed labels", `{"id": 1, "evidence": {"10": [{"sentences": [0], "label": "SUPPORT"}, {"sentences": [1], "label": "CONTRADICT"}]}}`, "", `gold.jsonl:1: evidence: doc 10: set 1: label "CONTRADICT" differs`},
		{"gold: duplicate claim", gold + "\n" + gold, "", "gold.jsonl:3: id: claim 1 already on line 1"},
		{"gold: empty set", `{"id": 1, "evidence": {"10": [{"sentences": [], "label": "SUPPORT"}]}}`, "", "gold.jsonl:1: evidence: doc 10: an empty evidence set"},
		{"gold: unknown field", `{"id": 1, "evidense": {}}`, "", `gold.jsonl:1: json: unknown field "evidense"`},
		{"gold: bad doc id", `{"id": 1, "evidence": {"x1": []}}`, "", `gold.jsonl:1: evidence: doc id "x1" is not`},
		{"pred: unknown claim", gold, `{"id": 2, "evidence": {}}`, "pred.jsonl:1: id: claim 2 is not a gold claim"},
		{"pred: duplicate claim", gold, "{\"id\": 1, \"evidence\": {}}\n{\"id\": 1, \"evidence\": {}}", "pred.jsonl:2: id: claim 1 already on line 1"},
		{"pred: NEI label", gold, `{"id": 1, "evidence": {"10": {"sentences": [], "label": "NOT_ENOUGH_INFO"}}}`, `pred.jsonl:1: evidence: doc 10: label "NOT_ENOUGH_INFO" is not SUPPORT or CONTRADICT`},
		{"pred: negative sentence", gold, `{"id": 1, "evidence": {"10": {"sentences": [2, -1], "label": "SUPPORT"}}}`, "pred.jsonl:1: evidence: doc 10: sentences: sentence index -1 is negative"},
		{"pred: duplicate doc", gold, `{"id": 1, "evidence": {"10": {"sentences": [], "label": "SUPPORT"}, "10": {"sentences": [], "label": "SUPPORT"}}}`, "pred.jsonl:1: evidence: doc 10 appears twice"},
		{"pred: missing evidence", gold, `{"id": 1}`, "pred.jsonl:1: evidence: field missing"},
		{"pred: missing label", gold, `{"id": 1, "evidence": {"10": {"sentences": [1]}}}`, "pred.jsonl:1: evidence: doc 10: field label missing"},
		{"pred: missing sentences", gold, `{"id": 1, "evidence": {"10": {"label": "SUPPORT"}}}`, "pred.jsonl:1: evidence: doc 10: field sentences missing"},
		{"pred: not JSON", gold, `{"id": 1, `, "pred.jsonl:1: unexpected EOF"},
	} {
		gp, pp := filepath.Join(dir, "gold.jsonl"), filepath.Join(dir, "pred.jsonl")
		if err := os.WriteFile(gp, []byte(tc.gold), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pp, []byte(tc.preds), 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := ReadSciFactGold(gp)
		if err == nil {
			_, err = ReadSciFactPredictions(pp, g)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadSciFactGold(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: error %v, want not a regular file", err)
	}
}
