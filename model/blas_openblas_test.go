//go:build openblas

package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
)

// withoutExt runs f with the package's own kernel in place of OpenBLAS.
func withoutExt(f func()) {
	ext := sgemmExt
	sgemmExt = nil
	defer func() { sgemmExt = ext }()
	f()
}

// TestOpenBLASAgreement compares OpenBLAS's Sgemm (this build) with the
// package's AVX2 kernel (or gonum) on the product shapes of the retriever
// recipe's training step, every transpose and bias: both must agree within
// float32 rounding of a k-term sum.
func TestOpenBLASAgreement(t *testing.T) {
	if BLAS() != "OpenBLAS" {
		t.Fatalf("BLAS() = %q in a build with -tags openblas", BLAS())
	}
	r := rand.New(rand.NewPCG(3, 4))
	shapes := [][3]int{{6144, 128, 128}, {6144, 512, 128}, {128, 512, 6144}, {64, 64, 32}, {32, 64, 128}, {7, 17, 300}}
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			tA, tB := tr[0], tr[1]
			lda, ldb := k, n
			if tA {
				lda = m
			}
			if tB {
				ldb = k
			}
			a, b, bias := randF32(r, m*k), randF32(r, k*n), randF32(r, n)
			got, want := make([]float32, m*n), make([]float32, m*n)
			gotB, wantB := make([]float32, m*n), make([]float32, m*n)
			sgemm(tA, tB, m, n, k, 0.5, a, lda, b, ldb, 0, got, n)
			sgemmBias(tA, tB, m, n, k, a, lda, b, ldb, bias, gotB, n)
			withoutExt(func() {
				sgemm(tA, tB, m, n, k, 0.5, a, lda, b, ldb, 0, want, n)
				sgemmBias(tA, tB, m, n, k, a, lda, b, ldb, bias, wantB, n)
			})
			name := fmt.Sprintf("%dx%dx%d t=%v", m, n, k, tr)
			tol := 2e-6 * math.Sqrt(float64(k))
			agree(t, name, got, want, tol)
			agree(t, name+" bias", gotB, wantB, tol)
		}
	}
}

// TestOpenBLASTransformerStep runs the forward and backward pass of a
// shared 2-layer Transformer bi-encoder (float32) with OpenBLAS and with
// the package's kernel: loss and every parameter gradient must agree within
// float32 tolerance.
func TestOpenBLASTransformerStep(t *testing.T) {
	cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 300, Hidden: 32, Layers: 2, Heads: 4, FFN: 64, MaxPosition: 16, Dropout: 0.1}
	run := func() (float64, [][]float64) {
		m, err := NewBiEncoder(cfg, true, 7)
		if err != nil {
			t.Fatal(err)
		}
		pg := newPairGraphQP(t, m, 4, 8, 16)
		grads, err := gorgonia.Grad(pg.loss, pg.binder.Nodes()...)
		if err != nil {
			t.Fatal(err)
		}
		vm := gorgonia.NewTapeMachine(pg.g)
		defer vm.Close()
		r := rand.New(rand.NewPCG(1, 2))
		qi, qm, qt := tinyBatch(r, 4, 16, cfg.Vocab)
		pi, pm, pt := tinyBatch(r, 8, 16, cfg.Vocab)
		if err := pg.qIn.Let(qi, qm, qt); err != nil {
			t.Fatal(err)
		}
		if err := pg.pIn.Let(pi, pm, pt); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		gs := make([][]float64, len(grads))
		for i, g := range grads {
			gs[i] = values(g.Value())
		}
		return scalar(t, pg.loss), gs
	}
	loss, grads := run()
	var loss0 float64
	var grads0 [][]float64
	withoutExt(func() { loss0, grads0 = run() })
	if math.Abs(loss-loss0) > 1e-4*math.Max(1, math.Abs(loss0)) {
		t.Fatalf("loss: OpenBLAS %v, kernel %v", loss, loss0)
	}
	// Each gradient within 1e-4 of its largest entry; gradients that vanish
	// in exact arithmetic (the key bias: softmax ignores a constant shift)
	// hold rounding noise, so the scale is at least 1e-6 of the largest
	// entry of all.
	var global float64
	for _, g := range grads0 {
		for _, v := range g {
			global = math.Max(global, math.Abs(v))
		}
	}
	if global == 0 {
		t.Fatal("every gradient is zero")
	}
	for i := range grads {
		scale := 1e-6 * global
		for _, v := range grads0[i] {
			scale = math.Max(scale, math.Abs(v))
		}
		for j := range grads[i] {
			if math.Abs(grads[i][j]-grads0[i][j]) > 1e-4*scale {
				t.Fatalf("gradient %d [%d]: OpenBLAS %v, kernel %v (scale %v)", i, j, grads[i][j], grads0[i][j], scale)
			}
		}
	}
}

func agree(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	for i := range got {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > tol*math.Max(1, math.Abs(float64(want[i]))) {
			t.Fatalf("%s: c[%d]: OpenBLAS %v, kernel %v", name, i, got[i], want[i])
		}
	}
}
