package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// hcWeights draws a site's mix weights for hc streams of D: fn of about
// unit products with the normalized streams (so that the sigmoids and the
// softmax are not saturated), base, scale, a norm weight, and the params.
func hcWeights(rng *rand.Rand, hc, D int) (fn *compute.Matrix, base, scale, normW []float32, p compute.HCParams) {
	nMix := (2 + hc) * hc
	fn = &compute.Matrix{DType: compute.F32, Rows: nMix, Cols: hc * D, Data: make([]byte, 4*nMix*hc*D)}
	for i := range nMix * hc * D {
		binary.LittleEndian.PutUint32(fn.Data[4*i:], math.Float32bits(float32(rng.NormFloat64()/math.Sqrt(float64(hc*D)))))
	}
	base, scale = randFloats(rng, nMix), []float32{0.7, 1.3, 2.1}
	normW = randFloats(rng, D)
	p = compute.HCParams{HC: hc, D: D, NormEps: 1e-6, Eps: 1e-6, SinkhornIters: 20}
	return fn, base, scale, normW, p
}

// TestBackendHCPre: HCPre (hc_mix_partial and hc_pre_split) and the RMS
// norm after it give the CPU's x, post and comb within rounding, with and
// without a norm weight, on the Flash width (4 streams of 4096), a width
// that leaves threads without columns, 3 streams, and 8 streams of 2048
// (partials too many to stage in shared memory, and a Sinkhorn of more
// entries than a warp has lanes).
func TestBackendHCPre(t *testing.T) {
	be := newBackend(t, Strict)
	ref := cpu.New(2)
	for ci, c := range []struct{ hc, D int }{{4, 4096}, {4, 1000}, {3, 700}, {8, 2048}} {
		rng := rand.New(rand.NewPCG(uint64(ci), 17))
		hc, D := c.hc, c.D
		nMix := (2 + hc) * hc
		fn, base, scale, normW, p := hcWeights(rng, hc, D)
		const eps = 1e-5
		for _, T := range []int{1, 3} {
			h := randFloats(rng, T*hc*D)
			for _, withW := range []bool{true, false} {
				name := fmt.Sprintf("hc %d D %d T %d weight %v", hc, D, T, withW)
				var w []float32
				if withW {
					w = normW
				}
				vec := func(v []float32) compute.Tensor {
					if v == nil {
						return compute.Tensor{}
					}
					tv, err := be.Vector(v)
					if err != nil {
						t.Fatal(err)
					}
					return tv
				}
				alloc := func(r, cols int) compute.Tensor {
					a, err := be.Alloc(compute.F32, r, cols)
					if err != nil {
						t.Fatal(err)
					}
					return a
				}
				hw := &compute.HC{Fn: fn, Base: vec(base), Scale: vec(scale)}
				ht, xt, pt, ct := alloc(T, hc*D), alloc(T, D), alloc(T, hc), alloc(T, hc*hc)
				be.Write(ht, h)
				be.HCPre(xt, pt, ct, ht, hw, p)
				be.RMSNorm(xt, xt, vec(w), eps)
				x, post, comb := make([]float32, T*D), make([]float32, T*hc), make([]float32, T*hc*hc)
				for _, r := range []struct {
					dst []float32
					src compute.Tensor
				}{{x, xt}, {post, pt}, {comb, ct}} {
					if err := be.Read(r.dst, r.src); err != nil {
						t.Fatal(err)
					}
				}
				// The CPU multiplies fn by the normalized streams; the
				// kernels scale the sums: rounding apart.
				cx, cp, cc := make([]float32, T*D), make([]float32, T*hc), make([]float32, T*hc*hc)
				cw := &compute.HC{Fn: fn, Base: cpu.Wrap(base, 1, nMix), Scale: cpu.Wrap(scale, 1, 3)}
				ref.HCPre(cpu.Wrap(cx, T, D), cpu.Wrap(cp, T, hc), cpu.Wrap(cc, T, hc*hc), cpu.Wrap(slices.Clone(h), T, hc*D), cw, p)
				var cwt compute.Tensor
				if withW {
					cwt = cpu.Wrap(w, 1, D)
				}
				ref.RMSNorm(cpu.Wrap(cx, T, D), cpu.Wrap(cx, T, D), cwt, eps)
				for _, o := range []struct {
					what      string
					got, want []float32
				}{{"x", x, cx}, {"post", post, cp}, {"comb", comb, cc}} {
					for i := range o.want {
						if d := math.Abs(float64(o.got[i] - o.want[i])); d > 1e-4*(1+math.Abs(float64(o.want[i]))) {
							t.Fatalf("%s: %s[%d] = %g, the CPU's %g", name, o.what, i, o.got[i], o.want[i])
						}
					}
				}
			}
		}
	}
}

// TestBackendHCHead: HCHead (hc_mix_partial, hc_mix_reduce, hc_head_finish)
// gives the CPU's x within rounding, and hc_mix_reduce's staged sums give
// the bits of its sums from global memory (hcReduceApart): the Flash width,
// a width that leaves threads without columns, 3 streams, and 8 streams of
// 8192 (more partials than hc_mix_reduce stages).
func TestBackendHCHead(t *testing.T) {
	be := newBackend(t, Strict)
	ref := cpu.New(2)
	for ci, c := range []struct{ hc, D int }{{4, 4096}, {4, 1000}, {3, 700}, {8, 8192}} {
		rng := rand.New(rand.NewPCG(uint64(ci), 29))
		hc, D := c.hc, c.D
		fn := &compute.Matrix{DType: compute.F32, Rows: hc, Cols: hc * D, Data: make([]byte, 4*hc*hc*D)}
		for i := range hc * hc * D {
			binary.LittleEndian.PutUint32(fn.Data[4*i:], math.Float32bits(float32(rng.NormFloat64()/math.Sqrt(float64(hc*D)))))
		}
		base, scale := randFloats(rng, hc), []float32{0.9}
		p := compute.HCParams{HC: hc, D: D, NormEps: 1e-6, Eps: 1e-6, SinkhornIters: 20}
		bt, err := be.Vector(base)
		if err != nil {
			t.Fatal(err)
		}
		st, err := be.Vector(scale)
		if err != nil {
			t.Fatal(err)
		}
		for _, T := range []int{1, 3} {
			name := fmt.Sprintf("hc %d D %d T %d", hc, D, T)
			h := randFloats(rng, T*hc*D)
			run := func(apart bool) []float32 {
				be.hcReduceApart = apart
				defer func() { be.hcReduceApart = false }()
				ht, err := be.Alloc(compute.F32, T, hc*D)
				if err != nil {
					t.Fatal(err)
				}
				xt, err := be.Alloc(compute.F32, T, D)
				if err != nil {
					t.Fatal(err)
				}
				be.Write(ht, h)
				be.HCHead(xt, ht, &compute.HC{Fn: fn, Base: bt, Scale: st}, p)
				x := make([]float32, T*D)
				if err := be.Read(x, xt); err != nil {
					t.Fatal(err)
				}
				return x
			}
			got, apart := run(false), run(true)
			if !slices.Equal(bitsOf(got), bitsOf(apart)) {
				t.Errorf("%s: hc_mix_reduce's staged sums give other bits than its sums from global memory", name)
			}
			want := make([]float32, T*D)
			ref.HCHead(cpu.Wrap(want, T, D), cpu.Wrap(slices.Clone(h), T, hc*D),
				&compute.HC{Fn: fn, Base: cpu.Wrap(base, 1, hc), Scale: cpu.Wrap(scale, 1, 1)}, p)
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-4*(1+math.Abs(float64(want[i])))) {
					t.Fatalf("%s: x[%d] = %g, the CPU's %g", name, i, got[i], want[i])
				}
			}
		}
	}
}

// TestBackendHCPostPreNorm: HCPostPreNorm (hc_post_pre) gives the bits of
// HCPost, HCPre and RMSNorm on their own launches, and the CPU's values
// within rounding, for the streams, x, post and comb: the Flash width,
// widths that leave threads of a segment without columns, 3 streams, with
// and without a site before it (y) and a norm weight, 1 and 3 tokens and
// again (the counters reset), and shapes past the kernel's limits (8
// streams, 4097 columns: the three ops); hc_post_pre_o4 (the large
// batches' entry, taken here at every batch) the same bits; and the three
// ops where the device holds no more blocks than the batch has tokens;
// with the dry blocks (HC_WARM) the same bits.
func TestBackendHCPostPreNorm(t *testing.T) {
	be := newBackend(t, Strict)
	ref := cpu.New(2)
	for ci, c := range []struct{ hc, D int }{{4, 4096}, {4, 1000}, {3, 700}, {8, 2048}, {4, 4097}} {
		rng := rand.New(rand.NewPCG(uint64(ci), 41))
		hc, D := c.hc, c.D
		nMix := (2 + hc) * hc
		fn, base, scale, normW, p := hcWeights(rng, hc, D)
		const eps = 1e-5
		vec := func(v []float32) compute.Tensor {
			if v == nil {
				return compute.Tensor{}
			}
			tv, err := be.Vector(v)
			if err != nil {
				t.Fatal(err)
			}
			return tv
		}
		hw := &compute.HC{Fn: fn, Base: vec(base), Scale: vec(scale)}
		for _, T := range []int{1, 3, 1} {
			h := randFloats(rng, T*hc*D)
			y := randFloats(rng, T*D)
			postIn := randFloats(rng, T*hc)
			combIn := randFloats(rng, T*hc*hc)
			for _, v := range []struct{ site, weight bool }{{true, true}, {false, true}, {true, false}} {
				name := fmt.Sprintf("hc %d D %d T %d site %v weight %v", hc, D, T, v.site, v.weight)
				var w []float32
				if v.weight {
					w = normW
				}
				run := func(fused bool) (out [4][]float32) {
					t.Helper()
					mark := be.ScratchMark()
					defer be.ResetScratch(mark)
					// Outputs start as NaN: scratch would otherwise hold the
					// last run's values at the same addresses.
					up := func(v []float32, r, cols int) compute.Tensor {
						a := be.Scratch(compute.F32, r, cols)
						if v == nil {
							v = make([]float32, r*cols)
							for i := range v {
								v[i] = float32(math.NaN())
							}
						}
						be.Write(a, v)
						return a
					}
					ht, xt, pt, ct := up(h, T, hc*D), up(nil, T, D), up(nil, T, hc), up(nil, T, hc*hc)
					var yt, pit, cit compute.Tensor
					if v.site {
						yt, pit, cit = up(y, T, D), up(postIn, T, hc), up(combIn, T, hc*hc)
					}
					be.hcFusedOff = !fused
					be.HCPostPreNorm(ht, yt, pit, cit, xt, pt, ct, hw, p, vec(w), eps)
					be.hcFusedOff = false
					for i, r := range []struct {
						n   int
						src compute.Tensor
					}{{T * hc * D, ht}, {T * D, xt}, {T * hc, pt}, {T * hc * hc, ct}} {
						out[i] = make([]float32, r.n)
						if err := be.Read(out[i], r.src); err != nil {
							t.Fatal(err)
						}
					}
					return out
				}
				n0 := be.hcFusedLaunches
				be.hcO2 = true
				apart, fused := run(false), run(true)
				be.hcO2 = false
				if want := hc <= hcFused && D <= hcFusedMaxCol; (be.hcFusedLaunches > n0) != want {
					t.Errorf("%s: hc_post_pre launched %d times (want it: %v)", name, be.hcFusedLaunches-n0, want)
				}
				be.hcO4MinT = 1
				o4 := run(true)
				be.hcO4MinT = 0
				be.hcWarm, be.hcO2 = true, true
				warm := run(true)
				be.hcWarm, be.hcO2 = false, false
				// As many tokens as the device holds blocks: the three ops
				// (the waiting blocks could fill every SM).
				slots, slotsO4 := be.hcSlots, be.hcSlotsO4
				be.hcSlots, be.hcSlotsO4 = T, T
				n1 := be.hcFusedLaunches
				capped := run(true)
				be.hcSlots, be.hcSlotsO4 = slots, slotsO4
				if be.hcFusedLaunches != n1 {
					t.Errorf("%s: hc_post_pre launched for a batch of %d with room for %d blocks", name, T, T)
				}
				what := [4]string{"h", "x", "post", "comb"}
				for i := range apart {
					if !slices.Equal(bitsOf(fused[i]), bitsOf(apart[i])) {
						t.Errorf("%s: %s differs from the three ops'", name, what[i])
					}
					if !slices.Equal(bitsOf(o4[i]), bitsOf(fused[i])) {
						t.Errorf("%s: %s from hc_post_pre_o4 differs from hc_post_pre's", name, what[i])
					}
					if !slices.Equal(bitsOf(warm[i]), bitsOf(fused[i])) {
						t.Errorf("%s: %s with the dry blocks (HC_WARM) differs from hc_post_pre's", name, what[i])
					}
					if !slices.Equal(bitsOf(capped[i]), bitsOf(apart[i])) {
						t.Errorf("%s: %s with hc_post_pre's blocks capped differs from the three ops'", name, what[i])
					}
				}
				// The CPU's three ops.
				ch := slices.Clone(h)
				if v.site {
					ref.HCPost(cpu.Wrap(ch, T, hc*D), cpu.Wrap(y, T, D), cpu.Wrap(postIn, T, hc), cpu.Wrap(combIn, T, hc*hc), p)
				}
				cx, cp, cc := make([]float32, T*D), make([]float32, T*hc), make([]float32, T*hc*hc)
				cw := &compute.HC{Fn: fn, Base: cpu.Wrap(base, 1, nMix), Scale: cpu.Wrap(scale, 1, 3)}
				ref.HCPre(cpu.Wrap(cx, T, D), cpu.Wrap(cp, T, hc), cpu.Wrap(cc, T, hc*hc), cpu.Wrap(ch, T, hc*D), cw, p)
				var cwt compute.Tensor
				if v.weight {
					cwt = cpu.Wrap(w, 1, D)
				}
				ref.RMSNorm(cpu.Wrap(cx, T, D), cpu.Wrap(cx, T, D), cwt, eps)
				for i, want := range [4][]float32{ch, cx, cp, cc} {
					for k := range want {
						if d := math.Abs(float64(fused[i][k] - want[k])); d > 1e-4*(1+math.Abs(float64(want[k]))) {
							t.Fatalf("%s: %s[%d] = %g, the CPU's %g", name, what[i], k, fused[i][k], want[k])
						}
					}
				}
			}
		}
	}
}

// TestBackendRMSNormRoPE: RMSNormRoPE (rmsnorm_rope) gives the bits of
// RMSNorm followed by RoPE, and the CPU's values within rounding, on the
// Flash shapes (64 query heads of 512 turning their last 64 channels
// without a weight; the kv vector with one), rows that leave threads
// without values or pairs, a single row of the widest size the kernel
// takes, and one past it (the two ops).
func TestBackendRMSNormRoPE(t *testing.T) {
	be := newBackend(t, Strict)
	ref := cpu.New(2)
	for ci, c := range []struct {
		T, heads, n, nf int
		weight          bool
	}{{2, 64, 512, 32, false}, {3, 1, 512, 32, true}, {4, 3, 300, 7, true}, {1, 1, 4096, 256, true}, {2, 2, 4200, 16, false}} {
		rng := rand.New(rand.NewPCG(uint64(ci), 29))
		rows := c.T * c.heads
		x := randFloats(rng, rows*c.n)
		x[5] = float32(math.NaN()) // a NaN row stays NaN, the others untouched
		pos := make([]int32, c.T)
		for i := range pos {
			pos[i] = int32(rng.IntN(70000))
		}
		inv := make([]float32, c.nf)
		for i := range inv {
			inv[i] = float32(math.Pow(10000, -float64(2*i)/float64(2*c.nf)))
		}
		var w []float32
		if c.weight {
			w = randFloats(rng, c.n)
		}
		const eps = 1e-6
		name := fmt.Sprintf("%d×%d rows of %d, %d pairs, weight %v", c.T, c.heads, c.n, c.nf, c.weight)
		run := func(fused bool) []float32 {
			t.Helper()
			xt, err := be.Alloc(compute.F32, rows, c.n)
			if err != nil {
				t.Fatal(err)
			}
			be.Write(xt, x)
			pt, err := be.Alloc(compute.I32, 1, c.T)
			if err != nil {
				t.Fatal(err)
			}
			be.Write(pt, pos)
			it, err := be.Vector(inv)
			if err != nil {
				t.Fatal(err)
			}
			var wt compute.Tensor
			if w != nil {
				if wt, err = be.Vector(w); err != nil {
					t.Fatal(err)
				}
			}
			if fused {
				be.RMSNormRoPE(xt, wt, eps, pt, c.heads, it)
			} else {
				be.RMSNorm(xt, xt, wt, eps)
				be.RoPE(xt, pt, c.heads, it, false)
			}
			out := make([]float32, rows*c.n)
			if err := be.Read(out, xt); err != nil {
				t.Fatal(err)
			}
			return out
		}
		want, got := run(false), run(true)
		if !slices.Equal(bitsOf(got), bitsOf(want)) {
			t.Errorf("%s: RMSNormRoPE differs from RMSNorm and RoPE", name)
		}
		cx := slices.Clone(x)
		var cw compute.Tensor
		if w != nil {
			cw = cpu.Wrap(w, 1, c.n)
		}
		ref.RMSNorm(cpu.Wrap(cx, rows, c.n), cpu.Wrap(cx, rows, c.n), cw, eps)
		ref.RoPE(cpu.Wrap(cx, rows, c.n), cpu.WrapI32(pos, 1, c.T), c.heads, cpu.Wrap(inv, 1, c.nf), false)
		for i := range cx {
			if math.IsNaN(float64(cx[i])) != math.IsNaN(float64(got[i])) || math.Abs(float64(got[i]-cx[i])) > 1e-5*(1+math.Abs(float64(cx[i]))) {
				t.Fatalf("%s: value %d = %g, the CPU's %g", name, i, got[i], cx[i])
			}
		}
	}
}

// TestBackendFusedOps: a golden model's logits on the full and decode
// paths, strict and fast, are the same bits with the fused launches
// (rmsnorm_rope, hc_post_pre, attn_combine's turn) as with
// each op on its own launches: the fusion changes the schedule, not a
// value.
func TestBackendFusedOps(t *testing.T) {
	eachGoldenMode(t, fusedGoldens, func(t *testing.T, dir string, c *golden.Case, mode Mode) {
		var fb *Backend
		// attn_fd (STRATA_CUDA_ATTN_FD) turns in its own launch: the split
		// kernels here, whose attn_combine turns.
		fused := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { fb = be; be.attnFDMaxT = 0 })
		if fb.hcFusedLaunches == 0 || fb.attnTurnLaunches == 0 {
			t.Fatalf("fused launches: %d hc_post_pre, %d attn_combine turning; want some of each", fb.hcFusedLaunches, fb.attnTurnLaunches)
		}
		apart := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) {
			be.normRoPEOff, be.hcFusedOff, be.attnRoPEApart, be.attnFDMaxT = true, true, true, 0
		})
		samePaths(t, fused, apart, "with the ops on their own launches")
		fmt.Printf("FUSED %s %s: full and decode logits identical with the fused launches and without\n", filepath.Base(dir), modeName(mode))
	})
}

// fusedGoldens are TestBackendFusedOps' cases (STRATA_FUSED_GOLDENS, a
// comma list, narrows them for the emulator).
var fusedGoldens = func() []string {
	if v := os.Getenv("STRATA_FUSED_GOLDENS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"testdata/golden/deepseek-v4/flash-ratios", "testdata/golden/deepseek-v4-extra/hc3-csa8"}
}()
