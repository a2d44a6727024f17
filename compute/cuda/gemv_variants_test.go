package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute"
)

// TestGEMVVariants: every gemv3.cu variant, at every split, gives the bits
// of gemv2 at that split at T = 1 (NaN where gemv2 gives NaN).
func TestGEMVVariants(t *testing.T) {
	shapes := map[compute.DType][2]int{compute.FP8: {37, 1024}, compute.FP4: {37, 1024}, compute.BF16: {37, 512}}
	mats := map[compute.DType]*compute.Matrix{}
	for dt, sh := range shapes {
		mats[dt], _ = testMatrix(rand.New(rand.NewPCG(uint64(dt), 4)), dt, sh[0], sh[1], 128, 128)
	}
	k := device(t).Kernels()
	for _, v := range gemvVariants {
		m := mats[v.DType]
		x := randFloats(rand.New(rand.NewPCG(5, 6)), m.Cols)
		want := make([][]float32, 4)
		got := make([][]float32, 4)
		do(t, func(th *Thread) error {
			w, err := th.UploadMatrix(m, th.Stream())
			if err != nil {
				return err
			}
			defer th.FreeMatrix(w)
			xs, err := upload(th, x)
			if err != nil {
				return err
			}
			defer th.Free(xs)
			ys, err := allocPoisoned(th, m.Rows)
			if err != nil {
				return err
			}
			defer th.Free(ys)
			for si := range 4 {
				a := th.Args().Ptr(ys).Ptr(xs).Ptr(w.Data).Ptr(w.Scale).Int(w.Rows).Int(w.Cols).Int(1).
					Int(max(w.BlockRows, 1)).Int(max(w.BlockCols, 1)).Int(w.scaleCols())
				rpb := (8 >> si) * 2
				if err := k.launch(th, k.gemv2[w.DType][0][si], Dim3{X: (w.Rows + rpb - 1) / rpb}, Dim3{X: 256}, th.Stream(), a); err != nil {
					return err
				}
				want[si] = make([]float32, m.Rows)
				if err := download(th, want[si], ys); err != nil {
					return err
				}

				if err := th.Memset32(ys, poison, int64(m.Rows), th.Stream()); err != nil {
					return err
				}
				if err := k.gemvVariantT1(th, th.Stream(), ys, xs, w, v, si); err != nil {
					return err
				}
				got[si] = make([]float32, m.Rows)
				if err := download(th, got[si], ys); err != nil {
					return err
				}
			}
			return nil
		})
		for si, g := range got {
			for r := range g {
				a, b := g[r], want[si][r]
				if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
					t.Errorf("%v %v split %d row %d: %g (%#x), gemv2 %g (%#x)", v.DType, v, 1<<si, r, a, math.Float32bits(a), b, math.Float32bits(b))
					break
				}
			}
		}
	}
}

// BenchmarkGEMVVariants times gemv2, gemvp's entries (FP8) and every
// gemv3 variant of the same format at T = 1 on the Flash model's matrix
// shapes, graph replays of launches over >= 512 MB of copies (L2 does not
// serve them); one line each: GEMVV shape variant us GB/s.
func BenchmarkGEMVVariants(b *testing.B) {
	for _, c := range []benchMatrix{
		{compute.FP8, 32768, 1024}, {compute.FP8, 4096, 8192}, {compute.FP8, 4096, 4096}, {compute.FP8, 1024, 4096},
		{compute.FP8, 512, 4096}, {compute.FP4, 2048, 4096}, {compute.FP4, 4096, 2048}, {compute.BF16, 4096, 4096},
	} {
		b.Run(c.String(), func(b *testing.B) {
			device(b)
			m := c.make()
			for b.Loop() {
				benchDo(b, func(th *Thread) error {
					ws, x, y, free, err := productOperands(th, m, 1)
					if err != nil {
						return err
					}
					defer free()
					k := device(b).Kernels()
					report := func(name string, call func(i int) error) error {
						ms, err := timeGraph(th, 4*len(ws), 7, call)
						if err != nil {
							return err
						}
						fmt.Printf("GEMVV %v %s %.2f us %.0f GB/s\n", c, name, ms*1e3, float64(m.Bytes())/ms/1e6)
						return nil
					}
					si, _ := gemv2Split(c.rows, int(ws[0].rowBytes()/16))
					if err := report(fmt.Sprintf("gemv2-u4-r2-d0-p0-s%d", 1<<si), func(i int) error {
						return k.matMulGEMVVersion(th, th.Stream(), y, x, 1, ws[i%len(ws)], 2)
					}); err != nil {
						return err
					}
					if _, _, ok := gemvpShifts(1, ws[0]); ok {
						si, rpb := gemv2Split(c.rows, int(ws[0].rowBytes()/16))
						// Persistent (the default grid), and one unit a block.
						units := (c.rows + rpb - 1) / rpb
						for ui, r := range gemvpRings {
							for _, grid := range []int{0, units} {
								if err := report(fmt.Sprintf("gemvp-u%d-st%d-s%d-grid%d", r.U, r.S, 1<<si, grid), func(i int) error {
									return k.gemvpAt(th, th.Stream(), y, 0, x, 0, ws[i%len(ws)], 1, 0, ui, si, rpb, grid)
								}); err != nil {
									return err
								}
							}
						}
					}
					for _, v := range gemvVariants {
						if v.DType != c.dt {
							continue
						}
						si, _ := gemvSplitR(c.rows, int(ws[0].rowBytes()/16), v.R)
						if err := report(fmt.Sprintf("%v-s%d", v, 1<<si), func(i int) error {
							return k.gemvVariantT1(th, th.Stream(), y, x, ws[i%len(ws)], v, -1)
						}); err != nil {
							return err
						}
					}
					return nil
				})
			}
		})
	}
}

// TestGEMV5: gemv5 (BF16 and FP8, 8 tokens a pass, 4 rows a warp) gives
// gemv2's bits at every split, at T = 8 and T = 11 (a second, partial
// pass).
func TestGEMV5(t *testing.T) {
	k := device(t).Kernels()
	for _, c := range [][2]int{{int(compute.BF16), 512}, {int(compute.BF16), 1024}, {int(compute.BF16), 2048}, {int(compute.BF16), 4096},
		{int(compute.FP8), 1024}, {int(compute.FP8), 2048}, {int(compute.FP8), 4096}, {int(compute.FP8), 8192}} {
		K := c[1]
		m, _ := testMatrix(rand.New(rand.NewPCG(uint64(K), 9)), compute.DType(c[0]), 37, K, 128, 128)
		for _, T := range []int{8, 11} {
			x := randFloats(rand.New(rand.NewPCG(5, uint64(T))), T*K)
			var out [2][]float32
			do(t, func(th *Thread) error {
				w, err := th.UploadMatrix(m, th.Stream())
				if err != nil {
					return err
				}
				defer th.FreeMatrix(w)
				xs, err := upload(th, x)
				if err != nil {
					return err
				}
				defer th.Free(xs)
				ys, err := allocPoisoned(th, T*m.Rows)
				if err != nil {
					return err
				}
				defer th.Free(ys)
				defer func() { k.t8R4 = true }()
				for i, r4 := range []bool{false, true} {
					k.t8R4 = r4
					if err := th.Memset32(ys, poison, int64(T*m.Rows), th.Stream()); err != nil {
						return err
					}
					if err := k.matMulGEMV(th, th.Stream(), ys, xs, T, w); err != nil {
						return err
					}
					out[i] = make([]float32, T*m.Rows)
					if err := download(th, out[i], ys); err != nil {
						return err
					}
				}
				return nil
			})
			for i := range out[0] {
				if math.Float32bits(out[0][i]) != math.Float32bits(out[1][i]) {
					t.Errorf("%v K=%d T=%d value %d: gemv5 %g, gemv2 %g", m.DType, K, T, i, out[1][i], out[0][i])
					break
				}
			}
		}
	}
}

// TestGEMV5Grouped: gemv5's grouped entries give gemv2's grouped bits (3
// groups of an FP8 and a BF16 matrix, T = 8 and 11).
func TestGEMV5Grouped(t *testing.T) {
	k := device(t).Kernels()
	const G = 3
	for _, dt := range []compute.DType{compute.FP8, compute.BF16} {
		K := 2048
		m, _ := testMatrix(rand.New(rand.NewPCG(uint64(dt), 10)), dt, 37, K, 128, 128)
		for _, T := range []int{8, 11} {
			x := randFloats(rand.New(rand.NewPCG(6, uint64(T))), T*G*K)
			var out [2][]float32
			do(t, func(th *Thread) error {
				w, err := th.UploadMatrix(m, th.Stream())
				if err != nil {
					return err
				}
				defer th.FreeMatrix(w)
				tab, err := upload(th, []uint64{uint64(w.Data), uint64(w.Scale), uint64(w.Data), uint64(w.Scale), uint64(w.Data), uint64(w.Scale)})
				if err != nil {
					return err
				}
				defer th.Free(tab)
				xs, err := upload(th, x)
				if err != nil {
					return err
				}
				defer th.Free(xs)
				n := T * G * m.Rows
				ys, err := allocPoisoned(th, n)
				if err != nil {
					return err
				}
				defer th.Free(ys)
				defer func() { k.t8R4 = true }()
				for i, r4 := range []bool{false, true} {
					k.t8R4 = r4
					if err := th.Memset32(ys, poison, int64(n), th.Stream()); err != nil {
						return err
					}
					if err := k.groupedGEMV(th, th.Stream(), ys, xs, T, w, G, tab); err != nil {
						return err
					}
					out[i] = make([]float32, n)
					if err := download(th, out[i], ys); err != nil {
						return err
					}
				}
				return nil
			})
			for i := range out[0] {
				if math.Float32bits(out[0][i]) != math.Float32bits(out[1][i]) {
					t.Errorf("%v T=%d value %d: gemv5 %g, gemv2 %g", dt, T, i, out[1][i], out[0][i])
					break
				}
			}
		}
	}
}
