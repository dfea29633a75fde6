package model

// gemvRows computes out = x·wᵀ for a few rows of x ([m,k]) and w [n,k] (out [m,n]): the
// products of incremental decoding, where m (sequences in the batch) is small and sgemm's
// packing of w and its 6-row panels would cost more than the product. Each worker takes a
// block of w's rows and multiplies it by every row of x while the block is in cache; each
// output is one dot product (AVX2 FMA in 8 lanes where available).
func gemvRows(out, x, w []float32, m, n, k int) {
	parallelFor((n+3)/4, 8*m*k, func(lo, hi int) {
		var acc [8]float32
		for jb := lo; jb < hi; jb++ {
			j := 4 * jb
			rows := min(4, n-j)
			for r := 0; r < m; r++ {
				xr := x[r*k : (r+1)*k]
				done := 0
				pair := rows == 4 && r+1 < m // rows r and r+1 in one pass over w's block
				switch {
				case pair:
					done = dot4x2Vec(&acc, x[r*k:], k, k, w[j*k:], k)
				case rows == 4:
					done = dot4Vec((*[4]float32)(acc[:4]), xr, w[j*k:], k)
				}
				if done == 0 {
					acc = [8]float32{}
				}
				gemvTail(out[r*n+j:r*n+j+rows], acc[:4], xr, w[j*k:], k, done)
				if pair && done > 0 {
					r++
					gemvTail(out[r*n+j:r*n+j+rows], acc[4:], x[r*k:(r+1)*k], w[j*k:], k, done)
				}
			}
		}
	})
}

// gemvTail sets o[q] = acc[q] + Σ_{i>=done} xr[i]·w[q·k+i] for each of the rows q of w.
func gemvTail(o, acc, xr, w []float32, k, done int) {
	for q := range o {
		s := acc[q]
		wq := w[q*k : (q+1)*k]
		for i := done; i < k; i++ {
			s += xr[i] * wq[i]
		}
		o[q] = s
	}
}
