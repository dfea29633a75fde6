//go:build ignore

// gen_sgemm512 writes sgemm512_amd64.s, the AVX-512 micro-kernel of
// sgemm: go generate ./model (or go run gen_sgemm512.go > sgemm512_amd64.s).
//
// The kernel multiplies p packed 6-row panels of A (packA's layout, panel
// stride aStride floats) by q packed 16-column panels of B (packB's layout,
// panel stride bStride floats) into a 6p x 16q block of C, with one zmm
// accumulator per row and 16 columns: each c[i][j] is the FMA chain
// Σ_p a[i][p]·b[p][j] from zero in the order of p, as in sgemmKernel6x16, so
// both kernels give the same bits. The flags -p and -q choose other shapes
// (6p·q accumulators + q B registers + broadcasts must fit in 32 zmm); the
// shipped shape is 12 x 32 (-p 2 -q 2).
//
// With -bf16 (12 x 32 only) it writes sbgemm512_amd64.s instead: the same loop over pairs of k,
// each element of the packed operands a uint32 holding two bfloat16 values (packBBF16's panels
// of B; A's 12 rows row-major, aStride pairs apart, so that packABF16 converts a row of A in
// place: bf16.go), with VDPBF16PS (AVX512-BF16; Go's assembler has no mnemonic for it, so the generator
// writes its EVEX bytes, evexDPBF16PS) in place of VFMADD231PS: lane j of an accumulator adds
// a_odd·b_odd, then a_even·b_even, each rounded to float32 (Intel SDM, VDPBF16PS).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	p := flag.Int("p", 2, "6-row A panels")
	q := flag.Int("q", 2, "16-column B panels")
	bf16 := flag.Bool("bf16", false, "write the bfloat16 kernel (VDPBF16PS on packed pairs)")
	out := flag.String("o", "", "output file (default standard output)")
	flag.Parse()
	src := gen(*p, *q, *bf16)
	if *out == "" {
		fmt.Print(src)
		return
	}
	if err := os.WriteFile(*out, []byte(src), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// evexDPBF16PS encodes VDPBF16PS zmm(dst), zmm(src1), zmm(src2) (Intel operand order):
// EVEX.512.F3.0F38.W0 52 /r, register form, no mask (checked against GNU as).
func evexDPBF16PS(dst, src1, src2 int) string {
	inv := func(x, bit int) int { return 1 - (x>>bit)&1 }
	p0 := inv(dst, 3)<<7 | inv(src2, 4)<<6 | inv(src2, 3)<<5 | inv(dst, 4)<<4 | 0b10 // R X B R' 00 mm=0F38
	p1 := (^src1&0xF)<<3 | 1<<2 | 0b10                                               // W0 vvvv 1 pp=F3
	p2 := 0b10<<5 | inv(src1, 4)<<3                                                  // z=0 L'L=512 b=0 V' aaa=0
	modrm := 0xC0 | (dst&7)<<3 | src2&7
	return fmt.Sprintf("BYTE $0x62; BYTE $0x%02X; BYTE $0x%02X; BYTE $0x%02X; BYTE $0x52; BYTE $0x%02X // VDPBF16PS Z%d, Z%d, Z%d",
		p0, p1, p2, modrm, src2, src1, dst)
}

func gen(P, Q int, bf16 bool) string {
	MR := 6 * P
	nacc := MR * Q
	g := &kernelGen{P: P, Q: Q, MR: MR, NR: 16 * Q, nacc: nacc, nb: 32 - nacc - Q, bf16: bf16}
	if g.nb < 1 || P > 4 || Q > 4 {
		panic(fmt.Sprintf("%d x %d does not fit in 32 zmm registers", g.MR, g.NR))
	}
	if bf16 && P != 2 {
		panic("-bf16 writes the 12 x 32 kernel only (-p 2)")
	}
	g.header()
	g.prologue()
	g.loop()
	g.stores()
	return g.w.String()
}

// kernelGen writes one kernel: MR = 6P rows by NR = 16Q columns, nacc accumulators, nb broadcast
// registers.
type kernelGen struct {
	P, Q, MR, NR, nacc, nb int
	bf16                   bool
	w                      strings.Builder
}

func (g *kernelGen) f(format string, args ...any) { fmt.Fprintf(&g.w, format+"\n", args...) }

// acc is the accumulator register of row i, columns 16j..16j+15.
func (g *kernelGen) acc(i, j int) int { return 32 - g.nacc + i*g.Q + j }

func (g *kernelGen) name() string {
	if g.bf16 {
		return fmt.Sprintf("sbgemmKernel%dx%dBF16", g.MR, g.NR)
	}
	return fmt.Sprintf("sgemmKernel%dx%dAVX512", g.MR, g.NR)
}

// kname is the name of the loop count argument (k, or kp pairs of k).
func (g *kernelGen) kname() string {
	if g.bf16 {
		return "kp"
	}
	return "k"
}

// panel addresses the idx-th panel from base with the stride register (stride3 holds 3*stride).
func panel(base string, idx int, stride, stride3 string) string {
	switch idx {
	case 0:
		return "(" + base + ")"
	case 1:
		return "(" + base + ")(" + stride + "*1)"
	case 2:
		return "(" + base + ")(" + stride + "*2)"
	default:
		return "(" + base + ")(" + stride3 + "*1)"
	}
}

// aRow addresses row i of A at the current k: a panel and offset (float32), or one of three row
// pointers SI, R12 = SI + 5 rows, R13 = SI + 10 rows plus 0..4 row strides (bf16).
func (g *kernelGen) aRow(i int) string {
	if g.bf16 {
		base := []string{"SI", "R12", "R13"}[i/5]
		return "(" + base + ")" + []string{"", "(R10*1)", "(R10*2)", "(AX*1)", "(R10*4)"}[i%5]
	}
	return fmt.Sprintf("%d%s", (i%6)*4, panel("SI", i/6, "R10", "R12"))
}

// fma adds B register b times broadcast register bc into accumulator acc.
func (g *kernelGen) fma(acc, b, bc int) string {
	if g.bf16 {
		return evexDPBF16PS(acc, b, bc)
	}
	return fmt.Sprintf("VFMADD231PS Z%d, Z%d, Z%d", b, bc, acc)
}

func (g *kernelGen) header() {
	flags, elem := "", "float32"
	if g.bf16 {
		flags, elem = " -bf16", "uint32"
	}
	g.f("// Code generated by gen_sgemm512.go -p %d -q %d%s; DO NOT EDIT.", g.P, g.Q, flags)
	g.f("")
	g.f("//go:build !noasm")
	g.f("")
	g.f("#include \"textflag.h\"")
	g.f("")
	g.f("// func %s(%s int, a *%s, aStride int, b *%s, bStride int, c *float32, ldc int, bias *float32, add bool)", g.name(), g.kname(), elem, elem)
	g.f("//")
	if g.bf16 {
		g.f("// kp pairs of k: a and b hold bfloat16 pairs (low half the even p, high half the odd),")
		g.f("// the accumulators add the odd product, then the even one (VDPBF16PS); row i of A is")
		g.f("// a[i*aStride + q] (12 rows row-major, pair q). Otherwise as the float32 kernel:")
	}
	g.f("// c[i*ldc+j] (+)= Σ_p A[i][p] * B[p][j] for i < %d, j < %d, p < k (k >= 1),", g.MR, g.NR)
	g.f("// adding to c when add is set, else overwriting it with the sum plus")
	g.f("// bias[j] (when bias is not nil). Row i of A is a[(i/6)*aStride + p*6 + i%%6],")
	g.f("// column j of B is b[(j/16)*bStride + p*16 + j%%16]: %d packed 6-row panels", g.P)
	g.f("// and %d packed 16-column panels, as sgemmKernel6x16 reads one of each.", g.Q)
	g.f("// Accumulators: row i, columns 16j..16j+15 in Z%d + %d*i + j; B in Z0..Z%d;", g.acc(0, 0), g.Q, g.Q-1)
	g.f("// broadcasts of A in Z%d..Z%d.", g.Q, g.Q+g.nb-1)
}

// prologue loads the arguments and clears the accumulators.
func (g *kernelGen) prologue() {
	g.f("TEXT ·%s(SB), NOSPLIT, $0-65", g.name())
	g.f("\tMOVQ %s+0(FP), CX", g.kname())
	g.f("\tMOVQ a+8(FP), SI")
	g.f("\tMOVQ aStride+16(FP), R10")
	g.f("\tSHLQ $2, R10")
	g.f("\tMOVQ b+24(FP), DI")
	g.f("\tMOVQ bStride+32(FP), R11")
	g.f("\tSHLQ $2, R11")
	g.f("\tMOVQ c+40(FP), DX")
	g.f("\tMOVQ ldc+48(FP), R8")
	g.f("\tSHLQ $2, R8")
	if g.P > 3 || g.Q > 3 {
		g.f("\tLEAQ (R10)(R10*2), R12")
		g.f("\tLEAQ (R11)(R11*2), R13")
	}
	if g.bf16 { // aRow's row pointers and 3 row strides
		g.f("\tLEAQ (R10)(R10*2), AX")
		g.f("\tLEAQ (SI)(R10*4), R12")
		g.f("\tADDQ R10, R12")
		g.f("\tLEAQ (R12)(R10*4), R13")
		g.f("\tADDQ R10, R13")
	}
	for i := 0; i < g.MR; i++ {
		for j := 0; j < g.Q; j++ {
			a := g.acc(i, j)
			g.f("\tVPXORD Z%d, Z%d, Z%d", a, a, a)
		}
	}
}

// loop is the loop over k (pairs of k): B's panels, then each row's broadcast and products.
func (g *kernelGen) loop() {
	g.f("")
	g.f("loop:")
	for j := 0; j < g.Q; j++ {
		g.f("\tVMOVUPS %s, Z%d", panel("DI", j, "R11", "R13"), j)
	}
	for i := 0; i < g.MR; i++ {
		r := g.Q + i%g.nb
		g.f("\tVBROADCASTSS %s, Z%d", g.aRow(i), r)
		for j := 0; j < g.Q; j++ {
			g.f("\t%s", g.fma(g.acc(i, j), j, r))
		}
	}
	if g.bf16 {
		g.f("\tADDQ $4, SI")
		g.f("\tADDQ $4, R12")
		g.f("\tADDQ $4, R13")
	} else {
		g.f("\tADDQ $24, SI")
	}
	g.f("\tADDQ $64, DI")
	g.f("\tDECQ CX")
	g.f("\tJNZ  loop")
}

// rowStores writes every accumulator to its row of c, row after row (op: what each does).
func (g *kernelGen) rowStores(op func(acc, j int)) {
	for i := 0; i < g.MR; i++ {
		if i > 0 {
			g.f("\tADDQ R8, DX")
		}
		for j := 0; j < g.Q; j++ {
			op(g.acc(i, j), j)
		}
	}
}

// stores adds the accumulators to c (add) or writes them, plus bias when given.
func (g *kernelGen) stores() {
	g.f("")
	g.f("\tMOVB add+64(FP), AL")
	g.f("\tTESTB AL, AL")
	g.f("\tJZ   store")
	g.rowStores(func(a, j int) {
		g.f("\tVADDPS %d(DX), Z%d, Z%d", 64*j, a, a)
		g.f("\tVMOVUPS Z%d, %d(DX)", a, 64*j)
	})
	g.f("\tVZEROUPPER")
	g.f("\tRET")
	g.f("")
	g.f("store:")
	g.f("\tMOVQ bias+56(FP), R9")
	g.f("\tTESTQ R9, R9")
	g.f("\tJZ   plain")
	for j := 0; j < g.Q; j++ {
		g.f("\tVMOVUPS %d(R9), Z%d", 64*j, j)
	}
	for i := 0; i < g.MR; i++ {
		for j := 0; j < g.Q; j++ {
			a := g.acc(i, j)
			g.f("\tVADDPS Z%d, Z%d, Z%d", j, a, a)
		}
	}
	g.f("")
	g.f("plain:")
	g.rowStores(func(a, j int) { g.f("\tVMOVUPS Z%d, %d(DX)", a, 64*j) })
	g.f("\tVZEROUPPER")
	g.f("\tRET")
}
