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

// TestBackendMoE runs the routed experts of FP4 and FP8 layers through the
// grouped kernels with every tile (1, 2, 4 and 8 pairs, and moeTile's
// choice), at a batch where one expert fills several tiles of each size:
// the default kernels (moe.cu's _sx entries) must give
// run 8's kernels' bits (moeR8) for every tile, and so must moe.cu's
// _sxp entries (moeSXP) for tiles of 1 and 2, every tile the same bits
// as every other (a pair's sums never depend on its tile), and the CPU's
// values within rounding (1e-5 of the largest output). The shapes leave lanes without chunks, row
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
				big := 1.0
				for _, v := range want {
					big = max(big, math.Abs(float64(v)))
				}
				worst := 0.0
				for i := range got {
					d := math.Abs(float64(got[i]-want[i])) / big
					if !(d <= 1e-5) {
						t.Fatalf("%s: y[%d] = %v, CPU %v (largest |y| %g)", name, i, got[i], want[i], big)
					}
					worst = max(worst, d)
				}
				t.Logf("%s: largest difference from the CPU %.3g of the largest |y| (%.4g)", name, worst, big)
			}
		}
	}
}
