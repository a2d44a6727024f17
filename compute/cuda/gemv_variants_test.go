package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
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

// benchOldVariants: BenchmarkGEMVVariants also times run 4's gemv3
// variants (STRATA_GEMV_OLD=1).
var benchOldVariants = os.Getenv("STRATA_GEMV_OLD") == "1"

// BenchmarkGEMVVariants times gemv2 and every gemv3 variant of the same
// format at T = 1 on the Flash model's matrix shapes, graph replays of
// launches over >= 512 MB of copies (L2 does not serve them); one line
// each: GEMVV shape variant us GB/s.
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
					ws, err := deviceMatrices(th, m, 512<<20)
					if err != nil {
						return err
					}
					defer freeMatrices(th, ws)
					x, err := upload(th, randFloats(rand.New(rand.NewPCG(2, 3)), c.cols))
					if err != nil {
						return err
					}
					defer th.Free(x)
					y, err := th.Alloc(int64(4 * c.rows))
					if err != nil {
						return err
					}
					defer th.Free(y)
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
					for _, v := range gemvVariants {
						if v.DType != c.dt || !benchOldVariants {
							continue
						}
						si, _ := gemvSplitR(c.rows, int(ws[0].rowBytes()/16), v.R)
						if err := report(fmt.Sprintf("%v-s%d", v, 1<<si), func(i int) error {
							return k.gemvVariantT1(th, th.Stream(), y, x, ws[i%len(ws)], v, -1)
						}); err != nil {
							return err
						}
					}
					sms := device(b).Props().SMs
					for _, v := range gemvPersistVariants {
						if v.DType != c.dt {
							continue
						}
						for _, bps := range []int{1, 2, 4, 8} {
							if err := report(fmt.Sprintf("gemv4-u%d-bps%d-s%d", v.U, bps, 1<<si), func(i int) error {
								return k.gemvPersistT1(th, th.Stream(), y, x, ws[i%len(ws)], v, bps, sms, 1, 0)
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

// TestGEMVPersist: every gemv4 entry (gemv_persist), on 1 and 3 blocks an
// SM (so that blocks loop over several row groups), gives gemv2's bits at
// T = 1, plain and grouped (3 matrices), at shapes that take each split.
func TestGEMVPersist(t *testing.T) {
	d := device(t)
	k, sms := d.Kernels(), d.Props().SMs
	const G = 3
	for _, v := range gemvPersistVariants {
		for _, K := range []int{1024, 2048, 4096, 8192} {
			if v.DType == compute.BF16 && K > 4096 {
				continue
			}
			rng := rand.New(rand.NewPCG(uint64(K), uint64(v.U)))
			ms := make([]*compute.Matrix, G)
			for g := range ms {
				ms[g], _ = testMatrix(rng, v.DType, 37, K, 128, 128)
			}
			x := randFloats(rng, G*K)
			var want [2][]float32 // plain and grouped gemv2; gotB the same through v per bps
			var gotB [2][2][]float32
			do(t, func(th *Thread) error {
				ws := make([]*Matrix, G)
				tabv := make([]uint64, 2*G)
				for g := range ws {
					w, err := th.UploadMatrix(ms[g], th.Stream())
					if err != nil {
						return err
					}
					defer th.FreeMatrix(w)
					ws[g], tabv[2*g], tabv[2*g+1] = w, uint64(w.Data), uint64(w.Scale)
				}
				tab, err := upload(th, tabv)
				if err != nil {
					return err
				}
				defer th.Free(tab)
				xs, err := upload(th, x)
				if err != nil {
					return err
				}
				defer th.Free(xs)
				ys, err := allocPoisoned(th, G*37)
				if err != nil {
					return err
				}
				defer th.Free(ys)
				run := func(n int, call func() error) ([]float32, error) {
					if err := th.Memset32(ys, poison, int64(G*37), th.Stream()); err != nil {
						return nil, err
					}
					if err := call(); err != nil {
						return nil, err
					}
					out := make([]float32, n)
					return out, download(th, out, ys)
				}
				if want[0], err = run(37, func() error { return k.matMulGEMVVersion(th, th.Stream(), ys, xs, 1, ws[0], 2) }); err != nil {
					return err
				}
				if want[1], err = run(G*37, func() error { return k.groupedGEMV(th, th.Stream(), ys, xs, 1, ws[0], G, tab) }); err != nil {
					return err
				}
				for bi, bps := range []int{1, 3} {
					if gotB[bi][0], err = run(37, func() error { return k.gemvPersistT1(th, th.Stream(), ys, xs, ws[0], v, bps, 1, 1, 0) }); err != nil {
						return err
					}
					if gotB[bi][1], err = run(G*37, func() error { return k.gemvPersistT1(th, th.Stream(), ys, xs, ws[0], v, bps, sms, G, tab) }); err != nil {
						return err
					}
				}
				return nil
			})
			for bi := range gotB {
				for wi := range 2 {
					for r, a := range gotB[bi][wi] {
						b := want[wi][r]
						if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
							t.Errorf("%v u%d K=%d bps %d grouped=%v row %d: %g, gemv2 %g", v.DType, v.U, K, bi, wi == 1, r, a, b)
							break
						}
					}
				}
			}
		}
	}
}

// BenchmarkGEMVGrouped times the grouped product of the Flash output
// projection (wo_a: 8 groups of fp8 1024x4096) at T = 1: gemv2's _g entry
// against gemv4's grouped form per blocks an SM (GEMVG lines), rotating
// over >= 512 MB of matrices.
func BenchmarkGEMVGrouped(b *testing.B) {
	const G = 8
	c := benchMatrix{compute.FP8, 1024, 4096}
	for b.Loop() {
		d := device(b)
		m := c.make()
		benchDo(b, func(th *Thread) error {
			ws, err := deviceMatrices(th, m, 512<<20)
			if err != nil {
				return err
			}
			defer freeMatrices(th, ws)
			nset := len(ws) / G
			tabs := make([]Ptr, nset)
			for si := range tabs {
				tv := make([]uint64, 2*G)
				for g := range G {
					w := ws[si*G+g]
					tv[2*g], tv[2*g+1] = uint64(w.Data), uint64(w.Scale)
				}
				if tabs[si], err = upload(th, tv); err != nil {
					return err
				}
				defer th.Free(tabs[si])
			}
			x, err := upload(th, randFloats(rand.New(rand.NewPCG(2, 3)), G*c.cols))
			if err != nil {
				return err
			}
			defer th.Free(x)
			y, err := th.Alloc(int64(4 * G * c.rows))
			if err != nil {
				return err
			}
			defer th.Free(y)
			k := d.Kernels()
			bytes := float64(G * m.Bytes())
			report := func(name string, call func(i int) error) error {
				ms, err := timeGraph(th, 4*nset, 7, call)
				if err != nil {
					return err
				}
				fmt.Printf("GEMVG %dx%v %s %.2f us %.0f GB/s\n", G, c, name, ms*1e3, bytes/ms/1e6)
				return nil
			}
			if err := report("gemv2-g", func(i int) error {
				return k.groupedGEMV(th, th.Stream(), y, x, 1, ws[0], G, tabs[i%nset])
			}); err != nil {
				return err
			}
			for _, v := range gemvPersistVariants {
				if v.DType != c.dt {
					continue
				}
				for _, bps := range []int{1, 2, 4, 8} {
					if err := report(fmt.Sprintf("gemv4-u%d-bps%d", v.U, bps), func(i int) error {
						return k.gemvPersistT1(th, th.Stream(), y, x, ws[0], v, bps, d.Props().SMs, G, tabs[i%nset])
					}); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
}
