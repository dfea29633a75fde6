package losses

import (
	"fmt"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// spladeDistill builds case c's loss directly (SpladeMarginMSE or SpladeKLDistill) over the
// inputs q, p and teacher.
func spladeDistill(c goldenCase, tauS, tauT float64, w *FlopsWeights) builder {
	return func(in map[string]*G.Node) (*G.Node, error) {
		if c["kind"] == "splade_margin_mse" {
			return SpladeMarginMSE(in["q"], in["p"], in["teacher"], w)
		}
		return SpladeKLDistill(in["q"], in["p"], in["teacher"], tauS, tauT, w)
	}
}

// TestSpladeDistillGolden matches the four PyTorch cases of testdata/splade_distill.json
// (tools/golden/gen_splade_distill_golden.py: two of splade_margin_mse, two of
// splade_kl_distill with 2 and 3 hard negatives per query and other temperatures): the loss,
// grad_q and grad_p, to 1e-6 relative in float64 and 1e-4 in float32, directly and through the
// losses table; the distillation term alone (the FLOPS weights 0) matches PyTorch's too.
func TestSpladeDistillGolden(t *testing.T) {
	cases := loadGoldenFile(t, "testdata/splade_distill.json")
	if len(cases) != 4 {
		t.Fatalf("%d cases, want 4", len(cases))
	}
	for ci, c := range cases {
		q, qs := c.array(t, "q")
		p, ps := c.array(t, "p")
		tv, ts := c.array(t, "teacher")
		ins := []input{{"q", qs, q, true}, {"p", ps, p, true}, {"teacher", ts, tv, false}}
		tauS, tauT := c.num(t, "temperature"), c.num(t, "teacher_temperature")
		w := FlopsWeights{Query: c.num(t, "lambda_q"), Passage: c.num(t, "lambda_d")}
		name := c["kind"].(string)
		for _, dt := range dtypes {
			rtol, atol := tolerances(dt)
			t.Run(fmt.Sprintf("%s/case%d/%v", name, ci, dt), func(t *testing.T) {
				loss, grads := mustEval(t, dt, spladeDistill(c, tauS, tauT, &w), ins...)
				wantLateGolden(t, c, loss, grads, rtol, atol)
				var none FlopsWeights
				distill, _ := mustEval(t, dt, spladeDistill(c, tauS, tauT, &none), ins...)
				wantLoss(t, distill, c.num(t, "distill"), rtol)
			})
			t.Run(fmt.Sprintf("registered/%s/case%d/%v", name, ci, dt), func(t *testing.T) {
				spec, err := Lookup(name)
				if err != nil || spec.Batch != Contrastive || !spec.Teacher {
					t.Fatalf("Lookup: %+v, %v", spec, err)
				}
				teacher := denseOf(t, c, "teacher", dt)
				loss, grads := mustEval(t, dt, func(in map[string]*G.Node) (*G.Node, error) {
					return spec.Build(Inputs{Q: in["q"], P: in["p"], Temperature: tauS, TeacherTemperature: tauT, Similarity: Dot, Flops: &w, Teacher: teacher})
				}, ins[:2]...)
				wantLateGolden(t, c, loss, grads, rtol, atol)
			})
		}
	}
}

// TestSpladeDistillFiniteDiff checks both losses' gradients by central differences at other
// FLOPS weights and temperatures.
func TestSpladeDistillFiniteDiff(t *testing.T) {
	for _, ci := range []int{1, 3} {
		c := loadGoldenFile(t, "testdata/splade_distill.json")[ci]
		q, qs := c.array(t, "q")
		p, ps := c.array(t, "p")
		tv, ts := c.array(t, "teacher")
		w := FlopsWeights{Query: 0.7, Passage: 0.2}
		checkFiniteDiff(t, spladeDistill(c, 0.8, 1.5, &w), 1e-6, 1e-8, input{"q", qs, q, true}, input{"p", ps, p, true}, input{"teacher", ts, tv, false})
	}
}

// TestSpladeDistillRefuses: the registered losses refuse cosine similarity, a batch without
// the teacher's scores or with scores of another shape, splade_margin_mse with two negatives
// per query and splade_kl_distill with none, each with an error naming the loss.
func TestSpladeDistillRefuses(t *testing.T) {
	g := G.NewGraph()
	mat := func(r, c int) *G.Node {
		return G.NewMatrix(g, tensor.Float64, G.WithShape(r, c), G.WithValue(tensor.New(tensor.WithShape(r, c), tensor.Of(tensor.Float64))))
	}
	teacher := func(r, c int) *tensor.Dense { return tensor.New(tensor.WithShape(r, c), tensor.Of(tensor.Float64)) }
	var w FlopsWeights
	for _, c := range []struct {
		loss string
		in   Inputs
		want string
	}{
		{"splade_kl_distill", Inputs{Q: mat(2, 5), P: mat(6, 5), Similarity: Cosine, Flops: &w, Teacher: teacher(2, 3), Temperature: 1, TeacherTemperature: 1}, "dot product"},
		{"splade_kl_distill", Inputs{Q: mat(2, 5), P: mat(6, 5), Similarity: Dot, Flops: &w, Temperature: 1, TeacherTemperature: 1}, "without Inputs.Teacher"},
		{"splade_kl_distill", Inputs{Q: mat(2, 5), P: mat(6, 5), Similarity: Dot, Flops: &w, Teacher: teacher(2, 2), Temperature: 1, TeacherTemperature: 1}, "want (2, 3)"},
		{"splade_kl_distill", Inputs{Q: mat(2, 5), P: mat(2, 5), Similarity: Dot, Flops: &w, Teacher: teacher(2, 1), Temperature: 1, TeacherTemperature: 1}, "M >= 1"},
		{"splade_kl_distill", Inputs{Q: mat(2, 5), P: mat(6, 5), Similarity: Dot, Teacher: teacher(2, 3), Temperature: 1, TeacherTemperature: 1}, "nil FLOPS weights"},
		{"splade_margin_mse", Inputs{Q: mat(2, 5), P: mat(6, 5), Similarity: Dot, Flops: &w, Teacher: teacher(2, 3)}, "one hard negative"},
		{"splade_margin_mse", Inputs{Q: mat(2, 5), P: mat(5, 5), Similarity: Dot, Flops: &w, Teacher: teacher(2, 3)}, "want B(1+M)"},
	} {
		spec, err := Lookup(c.loss)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := spec.Build(c.in); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(strings.ToLower(err.Error()), "splade") {
			t.Errorf("%s: err = %v, want one saying %q", c.loss, err, c.want)
		}
	}
}
