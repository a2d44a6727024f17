package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute"
)

// TestBackendMatMulNorm: MatMulNorm gives the bits of RMSNorm into a
// buffer followed by MatMul, leaves x as it was, takes gemvp's
// normalizing entry exactly where MatMul takes gemvp (one token, FP8,
// rows of at most gemvpNormMax) and the two launches elsewhere, and is
// the float64 definition (the dense weights, the norm in float64) within
// 1e-5 of each output's sum of magnitudes.
func TestBackendMatMulNorm(t *testing.T) {
	for _, mode := range []Mode{Strict, Fast} {
		be := newBackend(t, mode)
		rng := rand.New(rand.NewPCG(8, uint64(mode)))
		for _, c := range []struct {
			dt             compute.DType
			rows, cols     int
			br, bc         int
			T              int
			weighted, fuse bool
		}{
			{compute.FP8, 37, 1024, 128, 128, 1, true, true},   // wq_b's row width
			{compute.FP8, 300, 4096, 128, 128, 1, false, true}, // the widest fused row, no weight
			{compute.FP8, 70, 512, 32, 64, 1, true, true},      // scale blocks of 4 chunks
			{compute.FP8, 40, 8192, 128, 128, 1, true, false},  // wider than gemvpNormMax
			{compute.FP8, 37, 1024, 128, 128, 3, true, false},  // more than one token
			{compute.BF16, 50, 1024, 0, 0, 1, true, false},     // not FP8
		} {
			name := fmt.Sprintf("%s %v %dx%d T %d weighted %v", modeName(mode), c.dt, c.rows, c.cols, c.T, c.weighted)
			m, dense := testMatrix(rng, c.dt, c.rows, c.cols, c.br, c.bc)
			if be.useGEMVX(be.mustMat(m), c.T, mode) {
				c.fuse = false // the Fast tensor-core products do not take gemvp
			}
			xv := randFloats(rng, c.T*c.cols)
			for i := range xv {
				xv[i] *= 3
			}
			wv := make([]float32, c.cols)
			for i := range wv {
				wv[i] = 0.5 + rng.Float32()
			}
			const eps = 1e-6
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
			x, xn, y, ref := alloc(c.T, c.cols), alloc(c.T, c.cols), alloc(c.T, c.rows), alloc(c.T, c.rows)
			be.Write(x, xv)
			var w compute.Tensor
			if c.weighted {
				w = alloc(1, c.cols)
				be.Write(w, wv)
			}
			be.RMSNorm(xn, x, w, eps)
			be.MatMul(ref, xn, m)
			n := be.normMatLaunches
			be.MatMulNorm(y, x, w, eps, m)
			if fused := be.normMatLaunches > n; fused != c.fuse {
				t.Errorf("%s: fused %v, want %v", name, fused, c.fuse)
			}
			got := read(y)
			sameBitsNaN(t, name+": MatMulNorm against RMSNorm then MatMul", got, read(ref), -1)
			sameBitsNaN(t, name+": x after MatMulNorm", read(x), xv, -1)
			for tk := range c.T {
				row := xv[tk*c.cols : (tk+1)*c.cols]
				var ss float64
				for _, v := range row {
					ss += float64(v) * float64(v)
				}
				r := 1 / math.Sqrt(ss/float64(c.cols)+eps)
				for o := range c.rows {
					var want, l1 float64
					for i, v := range row {
						u := float64(v) * r
						if c.weighted {
							u *= float64(wv[i])
						}
						p := float64(dense[o*c.cols+i]) * u
						want += p
						l1 += math.Abs(p)
					}
					if g := float64(got[tk*c.rows+o]); !(math.Abs(g-want) <= 1e-5*l1+1e-6) {
						t.Fatalf("%s: token %d output %d = %g, float64 %g (sum of magnitudes %g)", name, tk, o, g, want, l1)
					}
				}
			}
			for _, v := range []compute.Tensor{x, xn, y, ref, w} {
				if v.Valid() {
					be.Free(v)
				}
			}
			fmt.Printf("NORMMAT %s: fused %v, RMSNorm then MatMul's bits, x unchanged, within 1e-5 of float64\n", name, c.fuse)
		}
	}
}
