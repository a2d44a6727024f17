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

// gemvhCases: partial tiles of 16 rows, one to many 128-column blocks a
// row (3: a split of 2 or more leaves warps without blocks; 65: more than
// 8 blocks a warp to stage), scale blocks of 16, 32 and 128 rows and of
// 128 and 256 columns.
var gemvhCases = []mmCase{
	{compute.FP8, 37, 1024, 128, 128},
	{compute.FP8, 300, 4096, 128, 128},
	{compute.FP8, 70, 384, 32, 256},
	{compute.FP8, 16, 128, 16, 128},
	{compute.FP8, 16, 8320, 16, 128}, // 65 blocks: warp 0 stages two rounds of 8
}

func skipNoGEMVH(t *testing.T) {
	t.Helper()
	if !device(t).Kernels().gemvhFits(&Matrix{DType: compute.FP8, Rows: 16, Cols: 128, BlockRows: 128, BlockCols: 128}) {
		t.Skip("cuda: no gemvh on this device (needs float16 tensor cores)")
	}
}

// gemvhTight is the bound on |gemvh - exact| / Σ|w·x| for rows of K
// columns: the split leaves 2^-22 of each x (and 2^-40 of a block's
// largest, negligible here); each of a block's 8 mmas rounds its sum once
// (taken as a truncation, 2^-23), so do the hi + lo addition, the scale's
// FMA and each of the K/128 blocks' and the split's additions. Dropping
// lo (2^-12 an element) breaks it at K = 128 and 384.
func gemvhTight(K int) float64 { return float64(2*8+K/128+8)*0x1p-23 + 0x1p-21 }

// runH runs gemvhAt on the G matrices ms (one table when G > 1, group g's
// input at x + g·xgs, its output at g·R) at split si (-1: the default)
// and grid (0: the persistent grid).
func runH(t *testing.T, ms []*compute.Matrix, x []float32, xgs, si, grid int) []float32 {
	t.Helper()
	k := device(t).Kernels()
	G, R := len(ms), ms[0].Rows
	return runGroup(t, ms, x, 1, func(th *Thread, y, xs Ptr, ws []*Matrix, tab Ptr) error {
		return k.gemvhAt(th, th.Stream(), y, R, xs, xgs, ws[0], G, tab, si, grid)
	})
}

// TestGEMVH checks gemvh against the exact product of the unrounded
// activations (gemvhTight) and the CPU at every split; that the grid and
// the ring's depth leave every bit as it is; that a group of the grouped
// entry (inputs apart or one for all) is the plain product of that group;
// and that a NaN code, a NaN scale and a NaN activation make NaN where
// they should.
func TestGEMVH(t *testing.T) {
	skipNoGEMVH(t)
	k := device(t).Kernels()
	be := cpu.New(2)
	for ci, c := range gemvhCases {
		t.Run(c.String(), func(t *testing.T) {
			const G = 3
			rng := rand.New(rand.NewPCG(uint64(ci), 53))
			R, K := c.rows, c.cols
			ms, dense := make([]*compute.Matrix, G), make([][]float32, G)
			for g := range ms {
				ms[g], dense[g] = testMatrix(rng, c.dt, R, K, c.br, c.bc)
			}
			x := randFloats(rng, G*K)
			// Group 0's input spans 30 binary orders within a block: the
			// split must keep the small values' share.
			for i := 0; i < K; i += 3 {
				x[i] *= 0x1p-30
			}
			tight := gemvhTight(K)
			ref, mag := exactProducts(dense[0], x, R, K, 1, nil)
			want := make([]float32, R)
			be.MatMulF32(want, x, 1, ms[0])
			var bySplit [4][]float32
			for si := range 4 {
				got := runH(t, ms[:1], x, 0, si, 0)
				checkProduct(t, got, want, ref, mag, tight, tight+2*gamma(K))
				bySplit[si] = got
				for _, grid := range []int{1, 3} {
					sameBitsNaN(t, fmt.Sprintf("split %d grid %d", 1<<si, grid), runH(t, ms[:1], x, 0, si, grid), got, -1)
				}
				k.gemvhS = 1
				sameBitsNaN(t, fmt.Sprintf("split %d, 4 stages", 1<<si), runH(t, ms[:1], x, 0, si, 0), got, -1)
				k.gemvhS = 0
			}
			if si := k.gemvhSplit(1, R, K); !slices.Equal(bitsOf(runH(t, ms[:1], x, 0, -1, 0)), bitsOf(bySplit[si])) {
				t.Errorf("the default split (%d) differs from split %d", 1<<si, 1<<si)
			}

			// Grouped: group 1 gets a NaN code in row 5 and group 2 a NaN
			// scale for its first scale block.
			ms[1].Data[5*K+17] = 0x7F
			ms[2].Scale[0] = 0xFF
			nanRows := map[int]bool{R + 5: true}
			for r := 0; r < min(R, c.br); r++ {
				nanRows[2*R+r] = true
			}
			for _, xgs := range []int{K, 0} {
				for _, grid := range []int{0, 2} {
					si := k.gemvhSplit(G, R, K)
					got := runH(t, ms, x, xgs, si, grid)
					for g := range G {
						alone := runH(t, ms[g:g+1], x[g*xgs:], 0, si, 0)
						for r := range R {
							v, w := got[g*R+r], alone[r]
							if nanRows[g*R+r] != math.IsNaN(float64(v)) {
								t.Errorf("xgs %d grid %d: group %d row %d = %v, NaN expected: %v", xgs, grid, g, r, v, nanRows[g*R+r])
							}
							if math.Float32bits(v) != math.Float32bits(w) && !(v != v && w != w) {
								t.Errorf("xgs %d grid %d: group %d row %d = %v, alone %v", xgs, grid, g, r, v, w)
							}
						}
					}
				}
			}
			ms[1].Data[5*K+17] ^= 0x7F
			ms[2].Scale[0] = 120

			// A NaN activation makes every row NaN, as on the CPU.
			xn := slices.Clone(x[:K])
			xn[K-1] = float32(math.NaN())
			for r, v := range runH(t, ms[:1], xn, 0, -1, 0) {
				if !math.IsNaN(float64(v)) {
					t.Fatalf("a NaN activation: row %d = %v", r, v)
				}
			}
		})
	}
}

// TestBackendGEMVH: a Fast backend's one-token products of FP8 matrices
// (MatMul, GroupedMatMul, MatMuls) go to gemvh with it selected, with
// gemvhAt's bits, and without it, or with fewer tiles than
// gemvhMinTiles, to gemvp, with gemv2's.
func TestBackendGEMVH(t *testing.T) {
	skipNoGEMVH(t)
	be := newBackend(t, Fast)
	rng := rand.New(rand.NewPCG(4, 4))
	const R, K = 200, 1024
	ms := make([]*compute.Matrix, 2)
	for g := range ms {
		ms[g], _ = testMatrix(rng, compute.FP8, R, K, 128, 128)
	}
	x := randFloats(rng, 2*K)
	wantOne := runH(t, ms[:1], x, 0, -1, 0)
	wantTwo := runH(t, ms, x, K, -1, 0)
	strictOne := runGroup(t, ms[:1], x, 1, func(th *Thread, y, xs Ptr, ws []*Matrix, _ Ptr) error {
		return be.k.matMulGEMV(th, th.Stream(), y, xs, 1, ws[0])
	})
	alloc := func(rows, cols int) compute.Tensor {
		v, err := be.Alloc(compute.F32, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	read := func(v compute.Tensor) []float32 {
		out := make([]float32, v.Rows*v.Cols)
		if err := be.Read(out, v); err != nil {
			t.Fatal(err)
		}
		return out
	}
	xt, x1 := alloc(1, 2*K), alloc(1, K)
	be.Write(xt, x)
	be.Write(x1, x[:K])
	for i, off := range []bool{false, true, true} {
		// The third pass keeps gemvh on but below gemvhMinTiles.
		be.gemvh, be.gemvhMinTiles = i != 1, map[bool]int{true: 1 << 30}[i == 2]
		n := be.gemvhLaunches
		y1, y2, ya, yb := alloc(1, R), alloc(1, 2*R), alloc(1, R), alloc(1, R)
		be.MatMul(y1, x1, ms[0])
		be.GroupedMatMul(y2, xt, ms)
		be.MatMuls([]compute.Tensor{ya, yb}, x1, ms)
		one, two, a := read(y1), read(y2), read(ya)
		if off {
			if be.gemvhLaunches != n {
				t.Errorf("pass %d: %d gemvh launches", i, be.gemvhLaunches-n)
			}
			sameBitsNaN(t, fmt.Sprintf("MatMul, gemvh off (pass %d)", i), one, strictOne, -1)
			continue
		}
		if be.gemvhLaunches-n != 4 {
			t.Errorf("%d gemvh launches, want 4", be.gemvhLaunches-n)
		}
		sameBitsNaN(t, "MatMul", one, wantOne, -1)
		sameBitsNaN(t, "GroupedMatMul", two, wantTwo, -1)
		sameBitsNaN(t, "MatMuls", a, wantOne, -1)
		sameBitsNaN(t, "MatMuls, second", read(yb), runH(t, ms[1:], x, 0, -1, 0), -1)
	}
	be.gemvh, be.gemvhMinTiles = false, 0
}

// BenchmarkGEMVH times one token's FP8 products on the Flash model's
// shapes through gemvp (the float32 GEMV, the default grid) and gemvh at
// every split and both ring depths, graph replays of launches over >= 512
// MB of copies (L2 does not serve them), and (-l2) of launches on one
// copy (what the L2 serves); one line each: GEMVH shape kernel us GB/s,
// the default split marked.
func BenchmarkGEMVH(b *testing.B) {
	for _, c := range []benchMatrix{
		{compute.FP8, 32768, 1024}, {compute.FP8, 4096, 8192}, {compute.FP8, 4096, 4096}, {compute.FP8, 4096, 2048},
		{compute.FP8, 1024, 4096}, {compute.FP8, 512, 4096},
	} {
		b.Run(c.String(), func(b *testing.B) {
			k := device(b).Kernels()
			if !k.gemvhFits(&Matrix{DType: compute.FP8, Rows: 16, Cols: 128, BlockRows: 128, BlockCols: 128}) {
				b.Skip("cuda: no gemvh on this device")
			}
			m := c.make()
			for b.Loop() {
				benchDo(b, func(th *Thread) error {
					ws, x, y, free, err := productOperands(th, m, 1)
					if err != nil {
						return err
					}
					defer free()
					report := func(name string, call func(i int) error) error {
						ms, err := timeGraph(th, 4*len(ws), 7, call)
						if err != nil {
							return err
						}
						fmt.Printf("GEMVH %v %s %.2f us %.0f GB/s\n", c, name, ms*1e3, float64(m.Bytes())/ms/1e6)
						return nil
					}
					if err := report("gemvp", func(i int) error { return k.matMulGEMV(th, th.Stream(), y, x, 1, ws[i%len(ws)]) }); err != nil {
						return err
					}
					// The same matrix every launch: what the L2 serves.
					if err := report("gemvp-l2", func(int) error { return k.matMulGEMV(th, th.Stream(), y, x, 1, ws[0]) }); err != nil {
						return err
					}
					def := k.gemvhSplit(1, c.rows, c.cols)
					defer func(s int) { k.gemvhS = s }(k.gemvhS)
					for ri, S := range gemvhStages {
						k.gemvhS = ri
						for si := range 4 {
							mark := map[bool]string{true: "*"}[si == def]
							if err := report(fmt.Sprintf("gemvh-s%d-p%d%s", S, 1<<si, mark), func(i int) error {
								return k.gemvhAt(th, th.Stream(), y, 0, x, 0, ws[i%len(ws)], 1, 0, si, 0)
							}); err != nil {
								return err
							}
							if si != def {
								continue
							}
							if err := report(fmt.Sprintf("gemvh-s%d-p%d-l2", S, 1<<si), func(int) error {
								return k.gemvhAt(th, th.Stream(), y, 0, x, 0, ws[0], 1, 0, si, 0)
							}); err != nil {
								return err
							}
						}
					}
					return nil
				})
			}
		})
	}
}
