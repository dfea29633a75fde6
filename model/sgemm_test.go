package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemm compares sgemm (and sgemmBias) with a float64 reference loop on
// shapes around the block sizes, all transposes, strided operands and
// alpha/beta values, on each kernel path.
func TestSgemm(t *testing.T) {
	for _, path := range kernelPaths() {
		t.Run(path, func(t *testing.T) { withKernel(path, func() { testSgemm(t) }) })
	}
}

func testSgemm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	shapes := [][3]int{{1, 1, 1}, {6, 16, 1}, {7, 17, 3}, {5, 15, 300}, {12, 32, 1}, {13, 40, 257}, {24, 64, 256}, {64, 64, 32}, {130, 33, 520}, {250, 1030, 9}, {100, 100, 600}}
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {1, 0.25}} {
				tA, tB := tr[0], tr[1]
				ar, ac := m, k
				if tA {
					ar, ac = k, m
				}
				br, bc := k, n
				if tB {
					br, bc = n, k
				}
				lda, ldb, ldc := ac+3, bc+1, n+2
				a := randF32(r, (ar-1)*lda+ac)
				b := randF32(r, (br-1)*ldb+bc)
				c := randF32(r, (m-1)*ldc+n)
				want := make([]float64, len(c))
				for i := range c {
					want[i] = float64(c[i])
				}
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						var sum float64
						for p := 0; p < k; p++ {
							var av, bv float32
							if tA {
								av = a[p*lda+i]
							} else {
								av = a[i*lda+p]
							}
							if tB {
								bv = b[j*ldb+p]
							} else {
								bv = b[p*ldb+j]
							}
							sum += float64(av) * float64(bv)
						}
						want[i*ldc+j] = float64(ab[0])*sum + float64(ab[1])*want[i*ldc+j]
					}
				}
				var bias []float32
				if ab[1] == 0 && ab[0] == 1 {
					// c = op(a)·op(b) + bias instead of beta*c
					bias = randF32(r, n)
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							want[i*ldc+j] += float64(bias[j])
						}
					}
					sgemmBias(tA, tB, m, n, k, a, lda, b, ldb, bias, c, ldc)
				} else {
					sgemm(tA, tB, m, n, k, ab[0], a, lda, b, ldb, ab[1], c, ldc)
				}
				name := fmt.Sprintf("%dx%dx%d t=%v alpha,beta=%v", m, n, k, tr, ab)
				for i := range c {
					if math.Abs(float64(c[i])-want[i]) > 1e-5*math.Sqrt(float64(k))*math.Max(1, math.Abs(want[i])) {
						t.Fatalf("%s: c[%d] = %v, want %v", name, i, c[i], want[i])
					}
				}
			}
		}
	}
}

func randF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func BenchmarkSgemm(b *testing.B) {
	const N = 6144
	for _, s := range [][3]int{{N, 128, 128}, {N, 512, 128}, {N, 128, 512}, {128, 128, N}, {512, 128, N}, {64, 64, 32}} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}} {
			m, n, k := s[0], s[1], s[2]
			a, bb, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
			lda, ldb := k, n
			if tr[0] {
				lda = m
			}
			if tr[1] {
				ldb = k
			}
			b.Run(fmt.Sprintf("%dx%dx%d/%v", m, n, k, tr), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					sgemm(tr[0], tr[1], m, n, k, 1, a, lda, bb, ldb, 0, c, n)
				}
				b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
			})
		}
	}
}
