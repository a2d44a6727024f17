package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
)

// moeCase is a MoE layer of random experts of one format: D wide, I inner,
// the router favouring expert 0 by bias so that it fills several tiles of
// every size while the others get a few pairs each; and a shared expert.
type moeCase struct {
	dt      compute.DType
	D, I, E int
	args    *compute.MoEArgs
	bias    []float32
}

func newMoECase(rng *rand.Rand, dt compute.DType, D, I, E, K int) *moeCase {
	c := &moeCase{dt: dt, D: D, I: I, E: E}
	gate, _ := testMatrix(rng, compute.F32, E, D, 0, 0)
	c.bias = make([]float32, E)
	c.bias[0] = 10
	c.args = &compute.MoEArgs{Gate: gate, K: K, Scoring: compute.SqrtSoftplus, RoutedScale: 1.5, Limit: 7}
	for range E {
		w1, _ := testMatrix(rng, dt, I, D, 128, 128)
		w2, _ := testMatrix(rng, dt, D, I, 128, 128)
		w3, _ := testMatrix(rng, dt, I, D, 128, 128)
		c.args.Experts = append(c.args.Experts, compute.SwiGLU{W1: w1, W2: w2, W3: w3})
	}
	// A shared expert (the CPU's MoE takes one), narrower.
	s1, _ := testMatrix(rng, dt, 128, D, 128, 128)
	s2, _ := testMatrix(rng, dt, D, 128, 128, 128)
	s3, _ := testMatrix(rng, dt, 128, D, 128, 128)
	c.args.Shared = compute.SwiGLU{W1: s1, W2: s2, W3: s3}
	return c
}

// run returns the layer's output for x (T rows) on be, with moePT tiles
// (0: moeTile's) and run 8's kernels when r8.
func (c *moeCase) run(t *testing.T, be *Backend, x []float32, T, pt int, r8 bool) []float32 {
	t.Helper()
	be.moePT, be.moeR8 = pt, r8
	defer func() { be.moePT, be.moeR8 = 0, false }()
	a := *c.args
	bias, err := be.Vector(c.bias)
	if err != nil {
		t.Fatal(err)
	}
	a.Bias = bias
	xt, err := be.Alloc(compute.F32, T, c.D)
	if err != nil {
		t.Fatal(err)
	}
	yt, err := be.Alloc(compute.F32, T, c.D)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := be.Alloc(compute.I32, 1, T)
	if err != nil {
		t.Fatal(err)
	}
	be.Write(xt, x)
	be.MoE(yt, xt, tok, &a)
	y := make([]float32, T*c.D)
	if err := be.Read(y, yt); err != nil {
		t.Fatal(err)
	}
	return y
}

// nearCPU fails t unless every output is within 1e-5 of the CPU's,
// relative to the layer's largest output (at least 1: the CPU sums in its
// own order), and returns the largest difference and that scale.
func nearCPU(t *testing.T, name string, got, want []float32) (worst, big float64) {
	t.Helper()
	big = 1.0
	for _, v := range want {
		big = max(big, math.Abs(float64(v)))
	}
	for i := range got {
		d := math.Abs(float64(got[i]-want[i])) / big
		if !(d <= 1e-5) {
			t.Fatalf("%s: y[%d] = %v, CPU %v (largest |y| %g)", name, i, got[i], want[i], big)
		}
		worst = max(worst, d)
	}
	return worst, big
}

// TestBackendMoE runs the routed experts of FP4 and FP8 layers through the
// grouped kernels with every tile (1, 2, 4 and 8 pairs, and moeTile's
// choice), at a batch where one expert fills several tiles of each size:
// the default kernels (moe.cu's _sx entries) must give
// run 8's kernels' bits (moeR8) for every tile, and so must moe.cu's
// _sxp entries (moeSXP) for tiles of 1 and 2, every tile the same bits
// as every other (a pair's sums never depend on its tile), and the CPU's
// values within rounding (1e-5 of the largest output); at one token,
// moe_route_sort the bits of moe_route_b and moe_sort. The shapes leave lanes without chunks, row
// groups past the matrix's end and several chunks a lane.
func TestBackendMoE(t *testing.T) {
	be := newBackend(t, Strict)
	ref := cpu.New(2)
	for _, dt := range []compute.DType{compute.FP4, compute.FP8} {
		rng := rand.New(rand.NewPCG(7, uint64(dt)))
		const D, I, E, K = 1280, 544, 8, 2
		c := newMoECase(rng, dt, D, I, E, K)
		for _, T := range []int{3, 24} {
			x := randFloats(rng, T*D)
			want := make([]float32, T*D)
			a := *c.args
			a.Bias = cpu.Wrap(slices.Clone(c.bias), 1, E)
			ref.MoE(cpu.Wrap(want, T, D), cpu.Wrap(slices.Clone(x), T, D), cpu.WrapI32(make([]int32, T), 1, T), &a)
			var first []float32
			for _, pt := range []int{0, 1, 2, 4, 8} {
				name := fmt.Sprintf("%v T=%d tile %d", dt, T, pt)
				got := c.run(t, be, x, T, pt, false)
				old := c.run(t, be, x, T, pt, true)
				if !slices.Equal(bitsOf(got), bitsOf(old)) {
					t.Errorf("%s: the default kernels' bits differ from run 8's", name)
				}
				if pt == 0 {
					be.routeR8 = true
					r := c.run(t, be, x, T, pt, false)
					be.routeR8 = false
					if !slices.Equal(bitsOf(r), bitsOf(got)) {
						t.Errorf("%s: run 8's moe_route gives other bits than moe_route_b", name)
					}
				}
				if pt == 1 {
					be.moeP1R8 = true
					p1 := c.run(t, be, x, T, pt, false)
					be.moeP1R8 = false
					if !slices.Equal(bitsOf(p1), bitsOf(got)) {
						t.Errorf("%s: run 8's kernels for tiles of 1 give other bits than the _sx entries", name)
					}
				}
				if pt <= 2 { // got took the _sxp entries (moeSXP, T > 1)
					be.moeSXP = false
					sx := c.run(t, be, x, T, pt, false)
					be.moeSXP = true
					if !slices.Equal(bitsOf(sx), bitsOf(got)) {
						t.Errorf("%s: moe.cu's _sx entries give other bits than the _sxp ones", name)
					}
				}
				if first == nil {
					first = got
				} else if !slices.Equal(bitsOf(got), bitsOf(first)) {
					t.Errorf("%s: bits differ from moeTile's tile", name)
				}
				// The CPU sums in its own order: rounding apart, relative
				// to the layer's largest output.
				worst, big := nearCPU(t, name, got, want)
				t.Logf("%s: largest difference from the CPU %.3g of the largest |y| (%.4g)", name, worst, big)
			}
		}
		// One token: moe_route_sort (routing and sort in one block) gives
		// the bits of moe_route_b and moe_sort, and the CPU's values.
		x := randFloats(rng, D)
		want := make([]float32, D)
		a := *c.args
		a.Bias = cpu.Wrap(slices.Clone(c.bias), 1, E)
		ref.MoE(cpu.Wrap(want, 1, D), cpu.Wrap(slices.Clone(x), 1, D), cpu.WrapI32(make([]int32, 1), 1, 1), &a)
		got := c.run(t, be, x, 1, 0, false)
		be.routeSortOff = true
		apart := c.run(t, be, x, 1, 0, false)
		be.routeSortOff = false
		if !slices.Equal(bitsOf(got), bitsOf(apart)) {
			t.Errorf("%v T=1: moe_route_sort gives other bits than moe_route_b and moe_sort", dt)
		}
		nearCPU(t, fmt.Sprintf("%v T=1", dt), got, want)
	}
}

// TestBackendMoERoute checks the routing's picks where the order is
// decided by its rules rather than by distinct scores: 256 experts, top-6,
// the router's rows repeating every 16 experts and the bias every 64, so
// that experts 64 apart tie exactly (four of the largest bias for the
// three picks left after the NaNs and the +Inf: the lower indices first), two NaN
// biases (above every number, the lower index first), a +Inf and some
// -Inf. moe_route_sort (one token), moe_route_b and run 8's moe_route
// must give the same bits, and the CPU's values within rounding (a
// different pick moves the output by far more).
func TestBackendMoERoute(t *testing.T) {
	be := newBackend(t, Strict)
	ref := cpu.New(2)
	rng := rand.New(rand.NewPCG(23, 5))
	const D, I, E, K = 128, 128, 256, 6
	c := newMoECase(rng, compute.FP8, D, I, E, K)
	rows, _ := testMatrix(rng, compute.F32, 16, D, 0, 0)
	gate := &compute.Matrix{DType: compute.F32, Rows: E, Cols: D, Data: make([]byte, 4*E*D)}
	for e := range E {
		copy(gate.Data[4*D*e:4*D*(e+1)], rows.Data[4*D*(e%16):4*D*(e%16+1)])
	}
	c.args.Gate = gate
	for e := range E {
		c.bias[e] = 0.25 * float32(e/16%4)
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	c.bias[200], c.bias[77], c.bias[5] = nan, nan, inf
	c.bias[9], c.bias[10], c.bias[250] = -inf, -inf, -inf
	for _, T := range []int{1, 3} {
		x := randFloats(rng, T*D)
		want := make([]float32, T*D)
		a := *c.args
		a.Bias = cpu.Wrap(slices.Clone(c.bias), 1, E)
		ref.MoE(cpu.Wrap(want, T, D), cpu.Wrap(slices.Clone(x), T, D), cpu.WrapI32(make([]int32, T), 1, T), &a)
		got := c.run(t, be, x, T, 0, false)
		be.routeR8 = true
		r8 := c.run(t, be, x, T, 0, false)
		be.routeR8 = false
		if !slices.Equal(bitsOf(r8), bitsOf(got)) {
			t.Errorf("T=%d: run 8's moe_route gives other bits than the default routing", T)
		}
		if T == 1 {
			be.routeSortOff = true
			apart := c.run(t, be, x, T, 0, false)
			be.routeSortOff = false
			if !slices.Equal(bitsOf(apart), bitsOf(got)) {
				t.Errorf("T=1: moe_route_sort gives other bits than moe_route_b and moe_sort")
			}
		}
		nearCPU(t, fmt.Sprintf("T=%d", T), got, want)
	}
}

// TestBackendMoEQ checks the Fast FP4 experts on the integer dot products
// (moeq: int8 codes times the activations' three int8 digits) against the
// float32 _sx/_sxp entries (moeQ off: the same shared expert, so the
// difference is the routed experts' alone) and the CPU, with tokens of
// very large and very small activations among them (each 32-column
// block's power-of-two scale), for every tile (a pair's bits never depend
// on its tile, the other pairs or the batch), and that a NaN in one
// token's activations leaves the other tokens' bits alone.
func TestBackendMoEQ(t *testing.T) {
	be := newBackend(t, Fast)
	// The grouped kernels at every batch (gemvx's experts would take
	// these few experts from 3 tokens on).
	be.gemvxMoeOff = true
	ref := cpu.New(2)
	rng := rand.New(rand.NewPCG(11, 4))
	// Widths of a multiple of 128 (the kernel's scale words): 40 and 20
	// chunks a row, so some lanes take two chunks and some none.
	const D, I, E, K = 1280, 640, 8, 2
	c := newMoECase(rng, compute.FP4, D, I, E, K)
	var batch []float32 // T = 24's outputs
	x := randFloats(rng, 24*D)
	for i := range D {
		x[1*D+i] *= 1e5
		x[2*D+i] *= 1e-5
	}
	for _, T := range []int{1, 3, 24} {
		want := make([]float32, T*D)
		a := *c.args
		a.Bias = cpu.Wrap(slices.Clone(c.bias), 1, E)
		ref.MoE(cpu.Wrap(want, T, D), cpu.Wrap(slices.Clone(x[:T*D]), T, D), cpu.WrapI32(make([]int32, T), 1, T), &a)
		be.moeQ = false
		xt := x[:T*D]
		exact := c.run(t, be, xt, T, 0, false)
		be.moeQ = true
		// The launches that read before their waits (moe_down's routing,
		// one token's gate/up activations) give the bits of those that
		// do not.
		be.moeDownEarly, be.moeGateupEarly = false, false
		late := c.run(t, be, xt, T, 0, false)
		be.moeDownEarly, be.moeGateupEarly = true, true
		if got := c.run(t, be, xt, T, 0, false); !slices.Equal(bitsOf(got), bitsOf(late)) {
			t.Errorf("T=%d: the early launches give other bits than the late ones", T)
		}
		var first []float32
		for _, pt := range []int{0, 1, 2, 4, 8} {
			name := fmt.Sprintf("T=%d tile %d", T, pt)
			got := c.run(t, be, xt, T, pt, false)
			if pt == 0 && slices.Equal(bitsOf(got), bitsOf(exact)) {
				t.Fatalf("%s: moeq gave the float32 kernels' bits: it did not run", name)
			}
			if first == nil {
				first = got
			} else if !slices.Equal(bitsOf(got), bitsOf(first)) {
				t.Errorf("%s: bits differ from moeTile's tile", name)
			}
			for _, g := range []int{1, 3} { // row groups a block: the same bits
				be.moeqG = g
				gg := c.run(t, be, xt, T, pt, false)
				be.moeqG = 0
				if !slices.Equal(bitsOf(gg), bitsOf(got)) {
					t.Errorf("%s: %d row groups a block give other bits", name, g)
				}
			}
			if pt == 1 { // the _q4 entries (rings of 4 stages)
				be.moeqS4 = true
				s4 := c.run(t, be, xt, T, pt, false)
				be.moeqS4 = false
				if !slices.Equal(bitsOf(s4), bitsOf(got)) {
					t.Errorf("%s: the _q4 entries give other bits than the _q ones", name)
				}
			}
			be.moeqPF = true // the L2 prefetches: no value changes
			pf := c.run(t, be, xt, T, pt, false)
			be.moeqPF = false
			if !slices.Equal(bitsOf(pf), bitsOf(got)) {
				t.Errorf("%s: moeq with its L2 prefetches gives other bits", name)
			}
			var worst, f32 float64
			for tok := range T {
				rms := rmsOf(exact[tok*D : (tok+1)*D])
				wrms := rmsOf(want[tok*D : (tok+1)*D])
				for i := tok * D; i < (tok+1)*D; i++ {
					// x carried to 2^-22 of its blocks' largest values:
					// about the float32 kernels' own distance from the CPU
					// (a few 1e-6 of the token's rms here: the sums cancel
					// terms some 10 times larger); a wrong code or digit
					// errs by O(1).
					d := math.Abs(float64(got[i]-exact[i])) / (math.Abs(float64(exact[i])) + rms)
					worst = max(worst, d)
					f32 = max(f32, math.Abs(float64(exact[i]-want[i]))/(math.Abs(float64(want[i]))+wrms))
					if !(d <= 1e-5) {
						t.Fatalf("%s: y[%d] (token %d) = %v, float32 experts %v (rms %.3g)", name, i, tok, got[i], exact[i], rms)
					}
					// The CPU: the Fast shared expert errs more (split
					// products from 9 tokens on), as TestBackendMoEH.
					if d := math.Abs(float64(got[i] - want[i])); !(d <= 2e-3*(math.Abs(float64(want[i]))+wrms)) {
						t.Fatalf("%s: y[%d] (token %d) = %v, CPU %v (rms %.3g)", name, i, tok, got[i], want[i], wrms)
					}
				}
			}
			t.Logf("%s: against the float32 experts at most %.3g of |y| + the token's rms (they against the CPU %.3g)", name, worst, f32)
		}
		if T == 24 {
			batch = first
		}
	}
	c.checkBatchAndNaN(t, be, x, batch)
}

// TestBackendMoEM checks the Fast FP4 experts on the FP8 tensor cores
// (moem: e4m3 codes times the activations' six base-16 digits) against
// moeq (the same quantized activations, exact integer block sums: the two
// differ by float32 accumulation alone) and the float32 _sx/_sxp entries,
// with tokens of very large and very small activations among them, for
// every tile and several row tiles a block (a pair's bits never depend on
// its tile, the other pairs, the grid or the batch), and that a NaN in one
// token's activations leaves the other tokens' bits alone.
func TestBackendMoEM(t *testing.T) {
	be := newBackend(t, Fast)
	if !be.k.fp8MMA {
		t.Skip("cuda: no wgmma on this device (sm_90a only)")
	}
	be.gemvxMoeOff = true
	rng := rand.New(rand.NewPCG(13, 4))
	// 40 and 20 steps of 4 blocks a row (5 and 2.5 a warp: warps of
	// unequal slices, and some with none at I = 128·2), rows past the
	// last tile of 16 (I = 640 is 40 tiles; D = 1280, 80).
	const D, I, E, K = 1280, 640, 8, 2
	c := newMoECase(rng, compute.FP4, D, I, E, K)
	x := randFloats(rng, 24*D)
	for i := range D {
		x[1*D+i] *= 1e5
		x[2*D+i] *= 1e-5
	}
	var batch []float32
	for _, T := range []int{3, 24} {
		xt := x[:T*D]
		be.moeQ = false
		f32 := c.run(t, be, xt, T, 0, false)
		be.moeQ, be.moeM = true, false
		q := c.run(t, be, xt, T, 0, false)
		be.moeM = true
		var first []float32
		tiles := []int{0, 1, 2, 4, 8} // at T = 3 expert 0 takes 3 pairs
		if T == 24 {
			tiles = []int{0}
		}
		for _, pt := range tiles {
			name := fmt.Sprintf("T=%d tile %d", T, pt)
			n := be.moemLaunches
			got := c.run(t, be, xt, T, pt, false)
			if be.moemLaunches == n {
				t.Fatalf("%s: no moem launch", name)
			}
			if first == nil {
				first = got
				if slices.Equal(bitsOf(got), bitsOf(q)) {
					t.Logf("%s: moem gave moeq's bits", name)
				}
			} else if !slices.Equal(bitsOf(got), bitsOf(first)) {
				t.Errorf("%s: bits differ from moeTile's tile", name)
			}
			for _, g := range []int{1, 3} {
				if pt != 0 {
					break
				}
				be.moemG = g
				other := c.run(t, be, xt, T, pt, false)
				be.moemG = 0
				if !slices.Equal(bitsOf(other), bitsOf(got)) {
					t.Errorf("%s: %d row tiles a block give other bits", name, g)
				}
			}
			var worstQ, worstF float64
			for tok := range T {
				rms := rmsOf(q[tok*D : (tok+1)*D])
				for i := tok * D; i < (tok+1)*D; i++ {
					// Against moeq: the same digits' exact products, other
					// float32 roundings (a few 1e-7 of the token's rms); a
					// wrong code, digit, scale or fragment errs by O(1).
					d := math.Abs(float64(got[i]-q[i])) / (math.Abs(float64(q[i])) + rms)
					worstQ = max(worstQ, d)
					if !(d <= 4e-6) {
						t.Fatalf("%s: y[%d] (token %d) = %v, moeq %v (rms %.3g)", name, i, tok, got[i], q[i], rms)
					}
					d = math.Abs(float64(got[i]-f32[i])) / (math.Abs(float64(f32[i])) + rms)
					worstF = max(worstF, d)
					if !(d <= 1e-5) {
						t.Fatalf("%s: y[%d] (token %d) = %v, float32 experts %v (rms %.3g)", name, i, tok, got[i], f32[i], rms)
					}
				}
			}
			t.Logf("%s: against moeq at most %.3g of |y| + the token's rms, against the float32 experts %.3g", name, worstQ, worstF)
		}
		if T == 24 {
			batch = first
		}
	}
	c.checkBatchAndNaN(t, be, x, batch)
}

// checkBatchAndNaN checks the FP4 experts' batch invariance and NaN
// containment on be: the first 12 tokens of x alone (other tiles, other
// pairs; the Fast shared expert on the same kernels above 8 tokens) give
// the bits of the same tokens in batch (the 24 tokens' outputs), and a NaN
// in token 5 makes its outputs NaN and leaves every other token's bits
// (tiles of 8 pairs stage it beside others).
func (c *moeCase) checkBatchAndNaN(t *testing.T, be *Backend, x, batch []float32) {
	t.Helper()
	D := c.D
	if alone := c.run(t, be, x[:12*D], 12, 0, false); !slices.Equal(bitsOf(alone), bitsOf(batch[:12*D])) {
		t.Errorf("the first 12 tokens alone differ from the same tokens in a batch of 24")
	}
	xn := slices.Clone(x)
	xn[5*D+77] = float32(math.NaN())
	for _, pt := range []int{0, 8} {
		got := c.run(t, be, xn, 24, pt, false)
		for tok := range 24 {
			for i := tok * D; i < (tok+1)*D; i++ {
				if tok == 5 {
					if !math.IsNaN(float64(got[i])) {
						t.Fatalf("tile %d: y[%d] of the NaN token = %v", pt, i, got[i])
					}
				} else if math.Float32bits(got[i]) != math.Float32bits(batch[i]) {
					t.Fatalf("tile %d: y[%d] (token %d) = %v beside a NaN token, %v without", pt, i, tok, got[i], batch[i])
				}
			}
		}
	}
}

// TestBackendWGMMAProbe runs one wgmma_e4m3 (moem.cu: m64n8k32, A from registers
// in mma.sync m16n8k32's fragments, B from shared memory through a
// descriptor) on FP4 codes placed as e4m3 bytes (moem_even's placement)
// and integer digits: every output must be the exact sum. A wrong
// fragment, core-matrix layout or descriptor gives other sums; the
// failure prints the first ones.
func TestBackendWGMMAProbe(t *testing.T) {
	be := newBackend(t, Fast)
	if !be.k.fp8MMA || be.k.fns["wgmma_probe"] == 0 {
		t.Skip("cuda: no FP8 tensor cores on this device")
	}
	e2m1 := []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	digit := []byte{0x00, 0x38, 0x40, 0x44, 0x48, 0x4A, 0x4C, 0x4E, 0x50}
	rng := rand.New(rand.NewPCG(5, 9))
	A, B := make([]byte, 64*32), make([]byte, 8*32)
	av, bv := make([]float64, len(A)), make([]float64, len(B))
	for i := range A {
		c := rng.IntN(16)
		A[i] = byte((c&7)<<2 | (c&8)<<4) // e2m1·2^-6
		av[i] = e2m1[c&7] / 64
		if c&8 != 0 {
			av[i] = -av[i]
		}
	}
	for i := range B {
		d := rng.IntN(16) - 8
		if i/32 >= 6 {
			d = 0
		}
		m := d
		if m < 0 {
			m = -m
		}
		B[i] = digit[m]
		if d < 0 {
			B[i] |= 0x80
		}
		bv[i] = float64(d)
	}
	at, _ := be.Alloc(compute.I32, 1, len(A)/4)
	bt, _ := be.Alloc(compute.I32, 1, len(B)/4)
	dt, _ := be.Alloc(compute.F32, 64, 8)
	be.Write(at, A)
	be.Write(bt, B)
	be.launch("wgmma_probe", Dim3{X: 1}, Dim3{X: 128}, 0, be.args().Ptr(be.ptr(dt)).Ptr(be.ptr(at)).Ptr(be.ptr(bt)))
	got := make([]float32, 64*8)
	if err := be.Read(got, dt); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for r := range 64 {
		for n := range 8 {
			var want float64
			for k := range 32 {
				want += av[r*32+k] * bv[n*32+k]
			}
			if float64(got[r*8+n]) != want {
				if bad < 8 {
					t.Errorf("D[%d][%d] = %v, want %v", r, n, got[r*8+n], want)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of 512 sums wrong", bad)
	}
}

// TestBackendMoECombine checks moe_combine's bits against a float32
// reference that adds the choices in the CPU's order (by expert, then
// choice: a stable sort): 1 to 16 choices, experts repeated within a
// token, in descending and mixed order, a block column past D, with and
// without the shared expert's output.
func TestBackendMoECombine(t *testing.T) {
	be := newBackend(t, Strict)
	rng := rand.New(rand.NewPCG(30, 1))
	const T, D = 3, 300
	for _, K := range []int{1, 2, 6, 8, 16} {
		for _, shared := range []bool{false, true} {
			idx := make([]int32, T*K)
			for tk := range T {
				for k := range K {
					switch tk {
					case 0:
						idx[tk*K+k] = int32(K - k) // descending
					case 1:
						idx[tk*K+k] = int32(rng.IntN(4)) // repeats
					default:
						idx[tk*K+k] = int32(rng.IntN(256))
					}
				}
			}
			wt, ye, sh := randFloats(rng, T*K), randFloats(rng, T*K*D), randFloats(rng, T*D)
			want := make([]float32, T*D)
			for tk := range T {
				ord := make([]int, K)
				for k := range ord {
					ord[k] = k
				}
				slices.SortStableFunc(ord, func(a, b int) int { return int(idx[tk*K+a]) - int(idx[tk*K+b]) })
				for i := range D {
					var acc float32
					for _, k := range ord {
						q := tk*K + k
						acc += float32(wt[q] * ye[q*D+i])
					}
					if shared {
						acc += sh[tk*D+i]
					}
					want[tk*D+i] = acc
				}
			}
			vec := func(v []float32) compute.Tensor {
				x, err := be.Vector(v)
				if err != nil {
					t.Fatal(err)
				}
				return x
			}
			it, err := be.Alloc(compute.I32, 1, T*K)
			if err != nil {
				t.Fatal(err)
			}
			be.Write(it, idx)
			wtt, yet, y := vec(wt), vec(ye), vec(make([]float32, T*D))
			var sp Ptr
			if shared {
				sp = be.ptr(vec(sh))
			}
			be.launch("moe_combine", Dim3{X: T, Y: (D + 255) / 256}, Dim3{X: 256}, 0,
				be.args().Ptr(be.ptr(y)).Ptr(be.ptr(yet)).Ptr(be.ptr(wtt)).Ptr(be.ptr(it)).Ptr(sp).Int(K).Int(D))
			got := make([]float32, T*D)
			if err := be.Read(got, y); err != nil {
				t.Fatal(err)
			}
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Errorf("K=%d shared %v: y[%d] = %v, want %v (the CPU's order)", K, shared, j, got[j], want[j])
					break
				}
			}
		}
	}
}
