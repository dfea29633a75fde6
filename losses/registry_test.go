package losses

import (
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestRegistry(t *testing.T) {
	if got := Names(Contrastive); !slices.Equal(got, []string{"infonce", "margin_mse", "matryoshka_infonce", "splade", "splade_kl_distill", "splade_margin_mse"}) {
		t.Errorf("contrastive losses %v", got)
	}
	if got := Names(LateInteraction); !slices.Equal(got, []string{"colbert_contrastive", "colbert_kl_distill"}) {
		t.Errorf("late-interaction losses %v", got)
	}
	if got := Names(Lists); !slices.Equal(got, []string{"attention_distill", "emdr2", "kl_distill", "listwise", "loo_distill", "pairwise", "perplexity_distill", "pointwise"}) {
		t.Errorf("list losses %v", got)
	}
	for name, labels := range map[string]Labels{"listwise": GradedLabels, "pointwise": BinaryLabels, "pairwise": NoLabels, "kl_distill": NoLabels} {
		s, err := Lookup(name)
		if err != nil || s.Labels != labels {
			t.Errorf("Lookup(%q) = %+v, %v", name, s, err)
		}
	}
	for _, name := range Names("") {
		s, _ := Lookup(name)
		want := false
		switch name {
		case "margin_mse", "kl_distill", "colbert_kl_distill", "splade_kl_distill", "splade_margin_mse", "attention_distill", "emdr2", "loo_distill", "perplexity_distill":
			want = true
		}
		if s.Teacher != want {
			t.Errorf("%s: Teacher = %v, want %v", name, s.Teacher, want)
		}
	}
	if _, err := Lookup("no_such_loss"); err == nil {
		t.Error("Lookup of an unregistered loss succeeded")
	}
}

// TestRegistryBuildsTheLosses: a list loss built through the table equals the loss called
// directly on the same scores.
func TestRegistryBuildsTheLosses(t *testing.T) {
	const B, K = 2, 3
	scores := []float64{0.5, -1, 2, 0.1, 0.3, -0.7}
	run := func(build func(g *G.ExprGraph, s *G.Node) (*G.Node, error)) float64 {
		g := G.NewGraph()
		s := G.NewVector(g, tensor.Float64, G.WithShape(B*K), G.WithName("s"),
			G.WithValue(tensor.New(tensor.WithShape(B*K), tensor.WithBacking(append([]float64(nil), scores...)))))
		out, err := build(g, s)
		if err != nil {
			t.Fatal(err)
		}
		vm := G.NewTapeMachine(g)
		defer vm.Close()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		return out.Value().Data().(float64)
	}
	labels := tensor.New(tensor.WithShape(B, K), tensor.WithBacking([]float64{1, 0, 0, 1, 0, 0}))
	for _, name := range []string{"listwise", "pointwise", "pairwise"} {
		spec, _ := Lookup(name)
		got := run(func(g *G.ExprGraph, s *G.Node) (*G.Node, error) {
			return spec.Build(Inputs{Scores: s, B: B, K: K, Labels: labels})
		})
		want := run(func(g *G.ExprGraph, s *G.Node) (*G.Node, error) {
			a, err := G.Reshape(s, tensor.Shape{B, K})
			if err != nil {
				return nil, err
			}
			y := G.NewMatrix(g, tensor.Float64, G.WithShape(B, K), G.WithName("y"), G.WithValue(labels))
			switch name {
			case "listwise":
				return Listwise(a, y)
			case "pointwise":
				return Pointwise(a, y)
			}
			pos := G.NewVector(g, tensor.Float64, G.WithShape(B*(K-1)), G.WithName("pos"), G.WithValue(tensor.New(tensor.WithShape(B*(K-1)), tensor.WithBacking([]float64{0.5, 0.5, 0.1, 0.1}))))
			neg := G.NewVector(g, tensor.Float64, G.WithShape(B*(K-1)), G.WithName("neg"), G.WithValue(tensor.New(tensor.WithShape(B*(K-1)), tensor.WithBacking([]float64{-1, 2, 0.3, -0.7}))))
			return Pairwise(pos, neg)
		})
		if got != want {
			t.Errorf("%s: %v through the table, %v called directly", name, got, want)
		}
	}
}
