package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/golden"
)

// TestGEMVP: gemvp (both entries, every split, the persistent grid at its
// default size and at 1 and 3 blocks, so that a block computes many
// units and its ring runs across them) gives the bits of gemv2 at the
// same split, plain and grouped (each group its own input, and all on
// one), NaN where gemv2 gives NaN (a NaN code, a NaN scale); and MatMul
// and GroupedMatMul with gemvp selected give the bits they give without
// it.
func TestGEMVP(t *testing.T) {
	k := device(t).Kernels()
	cases := []mmCase{
		{compute.FP8, 37, 1024, 128, 128},  // partial units, 2 chunks a lane at split 1
		{compute.FP8, 300, 4096, 128, 128}, // 8 steps a lane at split 1 (U = 2)
		{compute.FP8, 70, 512, 32, 64},     // scale blocks of 4 chunks, rows of 32
		{compute.FP8, 45, 384, 16, 128},    // 3 scale bytes a row: rows' scales not word-aligned
	}
	for ci, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			const G = 3
			rng := rand.New(rand.NewPCG(uint64(ci), 77))
			ms := make([]*compute.Matrix, G)
			for g := range ms {
				ms[g], _ = testMatrix(rng, c.dt, c.rows, c.cols, c.br, c.bc)
			}
			ms[1].Data[5*c.cols+17] = 0xFF // a NaN code in row 5 of group 1
			if c.br < c.rows {
				// A NaN scale: group 2's second block of rows, third of columns.
				ms[2].Scale[(c.cols+c.bc-1)/c.bc+min(2, (c.cols-1)/c.bc)] = 0xFF
			}
			x := randFloats(rng, G*c.cols)
			R, K := c.rows, c.cols
			for si := range 4 {
				rpb := (8 >> si) * 2
				units := (R + rpb - 1) / rpb
				// gemv2 at split si: group 1's matrix alone on its slice of x, and
				// grouped (inputs apart, then one input for all).
				var want [3][]float32
				want[0] = runGroup(t, ms[1:2], x[K:], 1, func(th *Thread, y, xs Ptr, ws []*Matrix, _ Ptr) error {
					w := ws[0]
					a := th.Args().Ptr(y).Ptr(xs).Ptr(w.Data).Ptr(w.Scale).Int(w.Rows).Int(w.Cols).Int(1).
						Int(w.BlockRows).Int(w.BlockCols).Int(w.scaleCols())
					return k.launch(th, k.gemv2[w.DType][0][si], Dim3{X: units}, Dim3{X: 256}, th.Stream(), a)
				})
				for xi, xgs := range []int{K, 0} {
					want[1+xi] = runGroup(t, ms, x, 1, func(th *Thread, y, xs Ptr, ws []*Matrix, tab Ptr) error {
						a := th.Args().Ptr(y).Int(G * R).Int(R).Ptr(xs).Int(G * K).Int(xgs).Ptr(tab).Int(R).Int(K).Int(1).
							Int(ws[0].BlockRows).Int(ws[0].BlockCols).Int(ws[0].scaleCols())
						return k.launch(th, k.gemv2g[ws[0].DType][0][si], Dim3{X: units, Y: G}, Dim3{X: 256}, th.Stream(), a)
					})
				}
				for _, rc := range gemvpCases() {
					ui, pf := rc.ring, rc.pf
					k.gemvpPF = pf
					for _, grid := range []int{0, 1, 3} {
						what := fmt.Sprintf("%v split %d grid %d prefetch %d", gemvpRings[ui], 1<<si, grid, pf)
						got := runGroup(t, ms[1:2], x[K:], 1, func(th *Thread, y, xs Ptr, ws []*Matrix, _ Ptr) error {
							return k.gemvpAt(th, th.Stream(), y, 0, xs, 0, ws[0], 1, 0, ui, si, rpb, grid)
						})
						sameBitsNaN(t, what, got, want[0], 5)
						for xi, xgs := range []int{K, 0} {
							got := runGroup(t, ms, x, 1, func(th *Thread, y, xs Ptr, ws []*Matrix, tab Ptr) error {
								return k.gemvpAt(th, th.Stream(), y, R, xs, xgs, ws[0], G, tab, ui, si, rpb, grid)
							})
							sameBitsNaN(t, fmt.Sprintf("%s grouped xgs %d", what, xgs), got, want[1+xi], R+5)
						}
					}
				}
				k.gemvpPF = 0
			}
			// Through MatMul and GroupedMatMul's paths, gemvp selected or not.
			var ref [2][]float32
			defer func(v int) { k.gemvpV = v }(k.gemvpV)
			for v := range len(gemvpRings) + 1 {
				k.gemvpV = v
				plain := runGroup(t, ms[:1], x, 1, func(th *Thread, y, xs Ptr, ws []*Matrix, _ Ptr) error {
					return k.matMulGEMV(th, th.Stream(), y, xs, 1, ws[0])
				})
				grouped := runGroup(t, ms, x, 1, func(th *Thread, y, xs Ptr, ws []*Matrix, tab Ptr) error {
					return k.groupedGEMV(th, th.Stream(), y, xs, 1, ws[0], G, tab)
				})
				if v == 0 {
					ref[0], ref[1] = plain, grouped
					continue
				}
				sameBitsNaN(t, fmt.Sprintf("MatMul gemvp %v", gemvpRings[v-1]), plain, ref[0], -1)
				sameBitsNaN(t, fmt.Sprintf("GroupedMatMul gemvp %v", gemvpRings[v-1]), grouped, ref[1], R+5)
			}
		})
	}
}

// gemvpCases is TestGEMVP's rings and L2 prefetches (gemvpPF: none, or
// every unit's rows, which must leave every value as it is): each ring
// once with each.
func gemvpCases() []struct{ ring, pf int } {
	var cs []struct{ ring, pf int }
	for ui := range gemvpRings {
		for _, pf := range []int{0, gemvpPFAll} {
			cs = append(cs, struct{ ring, pf int }{ui, pf})
		}
	}
	return cs
}

// sameBitsNaN fails unless got and want are the same bits (both NaN
// counts as the same) and, when nanAt >= 0, got[nanAt] is NaN.
func sameBitsNaN(t *testing.T, what string, got, want []float32, nanAt int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	if nanAt >= 0 && !math.IsNaN(float64(got[nanAt])) {
		t.Errorf("%s: value %d = %v, want NaN (a NaN code)", what, nanAt, got[nanAt])
	}
	for i := range got {
		a, b := got[i], want[i]
		if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
			t.Errorf("%s: value %d = %g (%#x), gemv2 %g (%#x)", what, i, a, math.Float32bits(a), b, math.Float32bits(b))
			return
		}
	}
}

// TestGEMVXP: gemvxp_fp8 (gemvx with its loads in a ring, persistent
// blocks at the default grid and at 1 and 3 blocks) gives gemvx's bits at
// 1, 3 and 8 tokens on gemvxCases' FP8 shapes (warps without steps, scale
// blocks of 16 columns), alone and grouped (3 matrices, a NaN code in
// one), and through gemvx with gemvxpCols taking them.
func TestGEMVXP(t *testing.T) {
	skipNoGEMVX(t)
	k := device(t).Kernels()
	for ci, c := range gemvxCases {
		if c.dt != compute.FP8 {
			continue
		}
		t.Run(c.String(), func(t *testing.T) {
			const G = 3
			rng := rand.New(rand.NewPCG(uint64(ci), 91))
			ms := make([]*compute.Matrix, G)
			for g := range ms {
				ms[g], _ = testMatrix(rng, c.dt, c.rows, c.cols, c.br, c.bc)
			}
			ms[1].Data[3*c.cols+40] = 0x7F // a NaN code in row 3 of group 1
			R, K := c.rows, c.cols
			x := randFloats(rng, 8*G*K)
			for _, T := range []int{1, 3, 8} {
				for _, set := range []struct {
					ms    []*compute.Matrix
					nanAt int
				}{{ms[:1], -1}, {ms, R + 3}} {
					n := len(set.ms)
					want := runVX(t, set.ms, x, T)
					for _, grid := range []int{0, 1, 3} {
						got := runGroup(t, set.ms, x, T, func(th *Thread, y, xs Ptr, ws []*Matrix, tab Ptr) error {
							return k.gemvxpAt(th, th.Stream(), y, n*R, R, xs, n*K, K, T, ws[0], n, tab, grid)
						})
						sameBitsNaN(t, fmt.Sprintf("T=%d groups %d grid %d", T, n, grid), got, want, set.nanAt)
					}
					got := runVXCols(t, set.ms, x, T, K)
					sameBitsNaN(t, fmt.Sprintf("gemvx with gemvxpCols, T=%d groups %d", T, n), got, want, set.nanAt)
				}
			}
		})
	}
}

// TestBackendRingKernels decodes the shipped model (FP8 projections, FP4
// experts) in batches of 1 and 4, Strict and Fast (gemvh off), with the ring kernels
// on (gemvp, gemvxp for every width, moep) and off: the logits must be the
// same bits. At batch 1 gemvp computes every FP8 product (moep is for
// batches of more than one token); at batch 4 gemvxp the Fast FP8
// products and, in Strict mode, moep the experts. Steps after the first replay captured graphs.
// It fails if the knobs selected nothing: the kernels launched must
// differ.
func TestBackendRingKernels(t *testing.T) {
	dir := repoPath(t, "models/strata-kjv")
	c, err := golden.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Mode{Strict, Fast} {
		be := newBackend(t, mode)
		m := loadOn(t, dir, be)
		// The Kernels are the device's, shared by every test: leave them
		// as they were.
		defer func(v, cols int) { be.k.gemvpV, be.k.gemvxpCols = v, cols }(be.k.gemvpV, be.k.gemvxpCols)
		// Fast products of one token on gemvp, not gemvh.
		be.gemvh = false
		for _, B := range []int{1, 4} {
			const steps = 5
			set := func(on bool) {
				if on {
					be.k.gemvpV, be.k.gemvxpCols, be.moeSXP = 2, math.MaxInt, true
				} else {
					be.k.gemvpV, be.k.gemvxpCols, be.moeSXP = 0, 0, false
				}
			}
			// The logits of a plain run (graphs from the second step), and
			// the kernels a profiled one launched (each launch timed).
			launched := func(on bool) ([][]float32, map[string]bool) {
				set(on)
				defer set(false)
				out := decodeBatch(t, m, c.InputIDs, B, steps)
				be.StartProfile()
				decodeBatch(t, m, c.InputIDs, B, 2)
				p, err := be.StopProfile()
				if err != nil {
					t.Fatal(err)
				}
				names := map[string]bool{}
				for n := range p.Kernels {
					names[n] = true
				}
				return out, names
			}
			want, off := launched(false)
			got, on := launched(true)
			what := fmt.Sprintf("%s batch %d", map[Mode]string{Strict: "strict", Fast: "fast"}[mode], B)
			var ring []string
			for n := range on {
				if !off[n] {
					ring = append(ring, n)
				}
			}
			slices.Sort(ring)
			if len(ring) == 0 {
				t.Errorf("%s: the ring kernels' knobs changed no kernel", what)
			}
			for p := range want {
				if !slices.Equal(bitsOf(got[p]), bitsOf(want[p])) {
					t.Fatalf("%s step %d: logits differ with the ring kernels %v", what, p, ring)
				}
			}
			fmt.Printf("RING %s: %d steps bit-identical with %v\n", what, steps, ring)
		}
	}
}

// TestBackendGEMVPChain: GroupedMatMulThen through gemvp_fp8_u2s3_chain
// (one launch, the blocks claiming the two products' units) gives
// GroupedMatMul's u and MatMul's y bit for bit, for FP8 matrices whose
// products both take gemvp's split-1 entries (wo_b's 520 rows end in a
// partial unit), twice in a row (the launch leaves its counters zero for
// the next); with two tokens, or the chain off, it launches no chain.
func TestBackendGEMVPChain(t *testing.T) {
	const G, Ra, Ka, Rb = 4, 256, 512, 520
	for _, mode := range []Mode{Strict, Fast} {
		be := newBackend(t, mode)
		be.gemvh = false
		rng := rand.New(rand.NewPCG(5, 11))
		ws := make([]*compute.Matrix, G)
		for g := range ws {
			ws[g], _ = testMatrix(rng, compute.FP8, Ra, Ka, 128, 128)
		}
		wb, _ := testMatrix(rng, compute.FP8, Rb, G*Ra, 128, 128)
		for _, w := range append(ws[:G:G], wb) {
			if err := be.Upload(w); err != nil {
				t.Fatal(err)
			}
		}
		for _, T := range []int{1, 2} {
			x, err := be.Alloc(compute.F32, T, G*Ka)
			if err != nil {
				t.Fatal(err)
			}
			be.Write(x, randFloats(rng, T*G*Ka))
			run := func(chain bool) (u, y []float32) {
				be.gemvpChainOn = chain
				defer func() { be.gemvpChainOn = false }()
				ut, err := be.Alloc(compute.F32, T, G*Ra)
				if err != nil {
					t.Fatal(err)
				}
				yt, err := be.Alloc(compute.F32, T, Rb)
				if err != nil {
					t.Fatal(err)
				}
				defer be.Free(ut)
				defer be.Free(yt)
				be.GroupedMatMulThen(yt, ut, x, ws, wb)
				u, y = make([]float32, T*G*Ra), make([]float32, T*Rb)
				if err := be.Read(u, ut); err != nil {
					t.Fatal(err)
				}
				if err := be.Read(y, yt); err != nil {
					t.Fatal(err)
				}
				return u, y
			}
			wantU, wantY := run(false)
			if be.chainLaunches != 0 {
				t.Fatalf("%s T=%d: %d chain launches with the chain off", modeName(mode), T, be.chainLaunches)
			}
			for round := range 2 {
				u, y := run(true)
				what := fmt.Sprintf("%s T=%d round %d", modeName(mode), T, round)
				sameBitsNaN(t, what+" u", u, wantU, -1)
				sameBitsNaN(t, what+" y", y, wantY, -1)
			}
			want := map[int]int{1: 2, 2: 0}[T]
			if be.chainLaunches != want {
				t.Errorf("%s T=%d: %d chain launches, want %d", modeName(mode), T, be.chainLaunches, want)
			}
			be.chainLaunches = 0
			be.Free(x)
		}
	}
}
