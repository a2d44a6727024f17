package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
)

// gemmxCases are shapes gemmx takes (K a multiple of 32): partial tiles of
// rows, FP8 blocks narrower than a tile, and K long enough to be cut into
// parts (gemmxSplits > 1).
var gemmxCases = []mmCase{
	{compute.BF16, 130, 256, 0, 0},
	{compute.FP8, 300, 512, 128, 128},
	{compute.FP8, 70, 96, 32, 48},
	{compute.FP4, 131, 800, 0, 0},
	{compute.FP8, 129, 2048, 128, 128},
	{compute.FP4, 256, 4096, 0, 0},
}

// runGroup uploads the G matrices ms (and their table when G > 1) and T
// rows of x ([T][G·K]), runs fn into a poisoned y ([T][G·R]) and returns
// y: the harness of runX and runVX.
func runGroup(t *testing.T, ms []*compute.Matrix, x []float32, T int,
	fn func(th *Thread, y, x Ptr, ws []*Matrix, tab Ptr) error) []float32 {
	t.Helper()
	G, R, K := len(ms), ms[0].Rows, ms[0].Cols
	y := make([]float32, T*G*R)
	do(t, func(th *Thread) error {
		var ws []*Matrix
		host := make([]uint64, 0, 2*G)
		for _, m := range ms {
			w, err := th.UploadMatrix(m, th.Stream())
			if err != nil {
				return err
			}
			defer th.FreeMatrix(w)
			ws = append(ws, w)
			host = append(host, uint64(w.Data), uint64(w.Scale))
		}
		var tab Ptr
		if G > 1 {
			p, err := upload(th, host)
			if err != nil {
				return err
			}
			defer th.Free(p)
			tab = p
		}
		xs, err := upload(th, x[:T*G*K])
		if err != nil {
			return err
		}
		defer th.Free(xs)
		ys, err := allocPoisoned(th, len(y))
		if err != nil {
			return err
		}
		defer th.Free(ys)
		if err := fn(th, ys, xs, ws, tab); err != nil {
			return err
		}
		return download(th, y, ys)
	})
	return y
}

// runX runs gemmx on the G matrices ms (one table when G > 1) for T tokens
// of x ([T][G·K], group g's input at column g·K), into y ([T][G·R]),
// through the parts buffer when split.
func runX(t *testing.T, ms []*compute.Matrix, x []float32, T int, split bool) []float32 {
	t.Helper()
	k := device(t).Kernels()
	G, R, K := len(ms), ms[0].Rows, ms[0].Cols
	return runGroup(t, ms, x, T, func(th *Thread, ys, xs Ptr, ws []*Matrix, tab Ptr) error {
		xh, xl, err := allocSplit(th, T*G*K)
		if err != nil {
			return err
		}
		defer th.Free(xh)
		defer th.Free(xl)
		if err := k.splitX(th, th.Stream(), xh, xl, xs, T*G*K); err != nil {
			return err
		}
		var part Ptr
		if split {
			S := gemmxSplits(G*blocks(R, gemmxRows), K)
			if part, err = allocPoisoned(th, G*S*T*R); err != nil {
				return err
			}
			defer th.Free(part)
		}
		return k.matMulX(th, th.Stream(), ys, G*R, R, xh, xl, G*K, K, T, ws[0], G, tab, part)
	})
}

// TestMatMulX checks gemmx against the exact product of the unrounded
// activations (the split leaves ~2^-17 of x; each of the two products a
// 16-column step rounds once, taken as truncation, and so does each part's
// addition) and against the CPU; running the parts in one block or in
// separate blocks gives the same bits.
func TestMatMulX(t *testing.T) {
	device(t)
	if !device(t).Kernels().gemmxFits(&Matrix{DType: compute.FP8, Rows: 128, Cols: 128, BlockRows: 128, BlockCols: 128}) {
		t.Skip("cuda: no gemmx on this device (needs bfloat16 tensor cores)")
	}
	be := cpu.New(2)
	for ci, c := range gemmxCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 21))
			m, dense := testMatrix(rng, c.dt, c.rows, c.cols, c.br, c.bc)
			for _, T := range []int{3, 64, 100} {
				if c.cols >= 2048 && T > 64 {
					continue
				}
				x := randFloats(rng, T*c.cols)
				got := runX(t, []*compute.Matrix{m}, x, T, false)
				S := gemmxSplits(blocks(c.rows, gemmxRows), c.cols)
				if split := runX(t, []*compute.Matrix{m}, x, T, true); !slices.Equal(bitsOf(split), bitsOf(got)) {
					t.Errorf("T=%d: the %d parts in separate blocks differ from one block", T, S)
				}
				want := make([]float32, T*c.rows)
				be.MatMulF32(want, x, T, m)
				ref, mag := exactProducts(dense, x, c.rows, c.cols, T, nil)
				tight := float64(2*((c.cols+15)/16)+16+S)*0x1p-22 + 0x1p-16
				checkProduct(t, got, want, ref, mag, tight, tight+2*gamma(c.cols))
			}
		})
	}
}

// TestMatMulXDecodeR22 checks gemmx_fp8's decode (gvx_dec2's placement
// and bfloat16 multiplies where every product is a normal bfloat16, the
// software decode elsewhere) against run 22's software decode of every
// chunk (gemmx_fp8_r22), bit for bit: scale bytes at and around the
// fast range's ends [10, 246] and where the one multiply becomes two
// (134, 135), NaN and subnormal scales, every e4m3 code (zeros, subnormals
// and a NaN code among them), with the matrix marked NaN-free and not.
func TestMatMulXDecodeR22(t *testing.T) {
	k := device(t).Kernels()
	if !k.gemmxFits(&Matrix{DType: compute.FP8, Rows: 128, Cols: 128, BlockRows: 128, BlockCols: 128}) || k.gemmxFP8R22 == 0 {
		t.Skip("cuda: no gemmx on this device (needs bfloat16 tensor cores)")
	}
	const R, K, B, T = 160, 1024, 32, 70
	rng := rand.New(rand.NewPCG(7, 24))
	edges := []byte{0, 1, 2, 9, 10, 11, 60, 100, 120, 127, 133, 134, 135, 136, 200, 245, 246, 247, 250, 254, 255}
	for _, nanFree := range []bool{false, true} {
		m, _ := testMatrix(rng, compute.FP8, R, K, B, B)
		for i := range m.Data {
			m.Data[i] = byte(i * 37 % 256) // every code in every row
			if m.Data[i]&0x7F == 0x7F {
				m.Data[i] ^= 1
			}
		}
		for i := range m.Scale {
			m.Scale[i] = edges[i%len(edges)]
			if i%len(edges) == 0 && i > 0 {
				m.Scale[i] = byte(112 + rng.IntN(16))
			}
		}
		if m.NaNFree = nanFree; !nanFree {
			m.Data[9*K+70] = 0x7F // a NaN code in row 9
			m.Data[100*K+513] = 0xFF
		}
		x := randFloats(rng, T*K)
		got := runX(t, []*compute.Matrix{m}, x, T, false)
		k.useR22 = true
		want := runX(t, []*compute.Matrix{m}, x, T, false)
		k.useR22 = false
		if n := countDiff(bitsOf(got), bitsOf(want)); n > 0 {
			t.Errorf("NaN-free %v: %d of %d outputs differ from run 22's decode", nanFree, n, len(got))
		}
	}
}

// countDiff returns how many elements of a and b differ.
func countDiff(a, b []uint32) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestMatMulXBatchInvariant checks that a token's gemmx product does not
// depend on its position in the batch or on the other tokens.
func TestMatMulXBatchInvariant(t *testing.T) {
	device(t)
	if !device(t).Kernels().gemmxFits(&Matrix{DType: compute.FP8, Rows: 128, Cols: 128, BlockRows: 128, BlockCols: 128}) {
		t.Skip("cuda: no gemmx on this device (needs bfloat16 tensor cores)")
	}
	for ci, c := range gemmxCases[:5] {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 22))
			m, _ := testMatrix(rng, c.dt, c.rows, c.cols, c.br, c.bc)
			const T, small, at = 130, 9, 5
			x := randFloats(rng, T*c.cols)
			full := runX(t, []*compute.Matrix{m}, x, T, false)
			for _, tok := range []int{0, 77, 129} {
				xb := randFloats(rng, small*c.cols)
				copy(xb[at*c.cols:(at+1)*c.cols], x[tok*c.cols:(tok+1)*c.cols])
				b := runX(t, []*compute.Matrix{m}, xb, small, true)
				if !slices.Equal(bitsOf(b[at*c.rows:(at+1)*c.rows]), bitsOf(full[tok*c.rows:(tok+1)*c.rows])) {
					t.Errorf("token %d: product at position %d of %d differs from position %d of %d", tok, at, small, tok, T)
				}
			}
		})
	}
}

// TestMatMulXGrouped checks gemmx's grouped form (strided inputs and
// outputs, the matrices from a table) against the CPU product of each
// group, in both launch forms, and that an FP8 NaN code makes its row's
// outputs NaN as on the CPU.
func TestMatMulXGrouped(t *testing.T) {
	device(t)
	if !device(t).Kernels().gemmxFits(&Matrix{DType: compute.FP8, Rows: 128, Cols: 128, BlockRows: 128, BlockCols: 128}) {
		t.Skip("cuda: no gemmx on this device (needs bfloat16 tensor cores)")
	}
	be := cpu.New(2)
	const G, R, K, T = 3, 136, 1024, 40
	rng := rand.New(rand.NewPCG(5, 23))
	ms, dense := make([]*compute.Matrix, G), make([][]float32, G)
	for g := range ms {
		ms[g], dense[g] = testMatrix(rng, compute.FP8, R, K, 128, 128)
	}
	ms[1].Data[7*K+300] = 0x7F // a NaN code in row 7 of group 1
	x := randFloats(rng, T*G*K)
	got := runX(t, ms, x, T, false)
	if split := runX(t, ms, x, T, true); !slices.Equal(bitsOf(split), bitsOf(got)) {
		t.Errorf("the parts in separate blocks differ from one block")
	}
	S := gemmxSplits(G*blocks(R, gemmxRows), K)
	xg, want := make([]float32, T*K), make([]float32, T*R)
	for g, m := range ms {
		for tok := range T {
			copy(xg[tok*K:(tok+1)*K], x[(tok*G+g)*K:])
		}
		be.MatMulF32(want, xg, T, m)
		for tok := range T {
			for r := range R {
				v, w := got[(tok*G+g)*R+r], want[tok*R+r]
				if g == 1 && r == 7 {
					if !math.IsNaN(float64(v)) {
						t.Errorf("group 1 token %d row 7 = %v, want NaN", tok, v)
					}
					continue
				}
				var mag float64
				for k := range K {
					mag += math.Abs(float64(xg[tok*K+k]) * float64(dense[g][r*K+k]))
				}
				if bound := (float64(2*K/16+16+S)*0x1p-22+0x1p-16)*mag + 2*gamma(K)*mag; math.Abs(float64(v-w)) > bound || math.IsNaN(float64(v)) {
					t.Errorf("group %d token %d row %d = %v, CPU %v (bound %.3g)", g, tok, r, v, w, bound)
				}
			}
		}
	}
}

// allocSplit allocates splitX's two arrays of n bfloat16s.
func allocSplit(th *Thread, n int) (xh, xl Ptr, err error) {
	if xh, err = th.Alloc(int64(2 * max(n, 8))); err != nil {
		return 0, 0, err
	}
	if xl, err = th.Alloc(int64(2 * max(n, 8))); err != nil {
		th.Free(xh)
		return 0, 0, err
	}
	return xh, xl, nil
}

// TestBackendMoEFast checks the Fast experts of many pairs an expert
// (gemmx_moe, tiles of up to 64 pairs of one expert) against the CPU
// backend's MoE, for FP4 and FP8 experts, and that a token's output does
// not depend on the batch it came in (its pairs' sums are their own).
func TestBackendMoEFast(t *testing.T) {
	dev := device(t)
	if !dev.Kernels().gemmxFits(&Matrix{DType: compute.FP8, Rows: 128, Cols: 128, BlockRows: 128, BlockCols: 128}) {
		t.Skip("cuda: no gemmx on this device (needs bfloat16 tensor cores)")
	}
	be, err := NewBackendOn(dev, Fast)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	ref := cpu.New(2)
	for _, dt := range []compute.DType{compute.FP4, compute.FP8} {
		t.Run(dt.String(), func(t *testing.T) {
			const E, D, I, K = 8, 256, 160, 3
			rng := rand.New(rand.NewPCG(7, uint64(dt)))
			mk := func(dt compute.DType, rows, cols int) *compute.Matrix {
				m, _ := testMatrix(rng, dt, rows, cols, 128, 128)
				if err := be.Upload(m); err != nil {
					t.Fatal(err)
				}
				return m
			}
			args := compute.MoEArgs{Gate: mk(compute.F32, E, D), K: K, Scoring: compute.SqrtSoftplus, RoutedScale: 1.5, Limit: 7}
			for range E {
				args.Experts = append(args.Experts, compute.SwiGLU{W1: mk(dt, I, D), W2: mk(dt, D, I), W3: mk(dt, I, D)})
			}
			args.Shared = compute.SwiGLU{W1: mk(compute.FP8, I, D), W2: mk(compute.FP8, D, I), W3: mk(compute.FP8, I, D)}
			bias := randFloats(rng, E)
			run := func(m compute.Backend, x []float32, T int) []float32 {
				a := args
				var err error
				if a.Bias, err = m.Vector(bias); err != nil {
					t.Fatal(err)
				}
				xt, _ := m.Alloc(compute.F32, T, D)
				yt, _ := m.Alloc(compute.F32, T, D)
				tt, _ := m.Alloc(compute.I32, 1, T)
				defer m.Free(xt)
				defer m.Free(yt)
				defer m.Free(tt)
				m.Write(xt, x[:T*D])
				m.Write(tt, make([]int32, T))
				m.MoE(yt, xt, tt, &a)
				y := make([]float32, T*D)
				if err := m.Read(y, yt); err != nil {
					t.Fatal(err)
				}
				return y
			}
			const T = 200 // 75 pairs an expert on average: tiles of 64 and the rest
			x := randFloats(rng, T*D)
			got, want := run(be, x, T), run(ref, x, T)
			rms := rmsOf(want)
			// Each product errs by about 2^-16·Σ|w||x| (the split), and with
			// these random weights Σ|w||x| is about sqrt(width) times the
			// output's rms (measured on the H200: 1.1e-4 of the rms for FP8):
			// 2e-3 leaves a margin, and a pair sent to a wrong expert or
			// row errs by the rms itself.
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); !(d <= 2e-3*(math.Abs(float64(want[i]))+rms)) {
					t.Fatalf("y[%d] = %v, CPU %v (rms %.3g)", i, got[i], want[i], rms)
				}
			}
			// The first 100 tokens alone (37.5 pairs an expert, still the
			// tensor cores): the same bits.
			if part := run(be, x, 100); !slices.Equal(bitsOf(part), bitsOf(got[:100*D])) {
				t.Errorf("the first 100 tokens alone differ from the same tokens in a batch of %d", T)
			}
			// Fewer pairs an expert (moeXAll: gemmx_moe below
			// moeTCPairsPerExpert), tiles of about 15 pairs.
			be.moeXAll = true
			defer func() { be.moeXAll = false }()
			const Tf = 40
			got, want = run(be, x, Tf), run(ref, x, Tf)
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); !(d <= 2e-3*(math.Abs(float64(want[i]))+rms)) {
					t.Fatalf("%d tokens: y[%d] = %v, CPU %v (rms %.3g)", Tf, i, got[i], want[i], rms)
				}
			}
		})
	}
}
