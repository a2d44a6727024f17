package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
)

// runVX runs gemvx on the G matrices ms (one table when G > 1) for T
// tokens of x ([T][G·K], group g's input at column g·K), into y
// ([T][G·R]).
func runVX(t *testing.T, ms []*compute.Matrix, x []float32, T int) []float32 {
	t.Helper()
	k := device(t).Kernels()
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
		if err := k.gemvx(th, th.Stream(), ys, G*R, R, xs, G*K, K, T, ws[0], G, tab); err != nil {
			return err
		}
		return download(th, y, ys)
	})
	return y
}

// gemvxCases: partial blocks of 32 rows, K of one to many 64-column steps
// a warp, scale blocks narrower than a step.
var gemvxCases = []mmCase{
	{compute.FP8, 300, 512, 128, 128},
	{compute.FP8, 100, 1024, 128, 128},
	{compute.FP8, 129, 4096, 128, 128},
	{compute.FP8, 70, 192, 32, 16},
	{compute.BF16, 97, 1024, 0, 0},
	{compute.BF16, 64, 4096, 0, 0},
}

func skipNoGEMVX(t *testing.T) {
	t.Helper()
	if !device(t).Kernels().gemvxFits(&Matrix{DType: compute.FP8, Rows: 128, Cols: 128, BlockRows: 128, BlockCols: 128}) {
		t.Skip("cuda: no gemvx on this device (needs bfloat16 tensor cores)")
	}
}

// TestGEMVX checks gemvx against the exact product of the unrounded
// activations (the split leaves ~2^-17 of x; each mma of a warp's chain
// rounds once, taken as truncation, and so does each of the 8 warps'
// additions) and against the CPU, at 1 to 8 tokens; and that a token's
// result is the same bits at every position of 8 tokens as alone.
func TestGEMVX(t *testing.T) {
	skipNoGEMVX(t)
	be := cpu.New(2)
	for ci, c := range gemvxCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 31))
			m, dense := testMatrix(rng, c.dt, c.rows, c.cols, c.br, c.bc)
			tight := float64(2*(c.cols/16)+8+16)*0x1p-22 + 0x1p-16
			var eight []float32
			x8 := randFloats(rng, 8*c.cols)
			for _, T := range []int{1, 3, 8} {
				got := runVX(t, []*compute.Matrix{m}, x8, T)
				want := make([]float32, T*c.rows)
				be.MatMulF32(want, x8, T, m)
				ref, mag := exactProducts(dense, x8, c.rows, c.cols, T, nil)
				checkProduct(t, got, want, ref, mag, tight, tight+2*gamma(c.cols))
				if T == 8 {
					eight = got
				}
			}
			for p := range 8 {
				alone := runVX(t, []*compute.Matrix{m}, x8[p*c.cols:], 1)
				if !slices.Equal(bitsOf(alone), bitsOf(eight[p*c.rows:(p+1)*c.rows])) {
					t.Errorf("token %d of 8 differs from the same token alone", p)
				}
			}
			// One tile of 16 rows a block and two: the same bits.
			k := device(t).Kernels()
			var tiles [2][]float32
			for mt := range 2 {
				k.gemvxM1 = mt + 1
				tiles[mt] = runVX(t, []*compute.Matrix{m}, x8, 8)
			}
			k.gemvxM1 = 0
			if !slices.Equal(bitsOf(tiles[0]), bitsOf(tiles[1])) {
				t.Errorf("16 rows a block differ from 32")
			}
		})
	}
}

// TestGEMVXGrouped checks gemvx's grouped form (strided inputs and
// outputs, the matrices from a table) against the CPU product of each
// group, and that an FP8 NaN code makes its row's outputs NaN as on the
// CPU.
func TestGEMVXGrouped(t *testing.T) {
	skipNoGEMVX(t)
	be := cpu.New(2)
	const G, R, K, T = 3, 136, 1024, 5
	rng := rand.New(rand.NewPCG(5, 33))
	ms, dense := make([]*compute.Matrix, G), make([][]float32, G)
	for g := range ms {
		ms[g], dense[g] = testMatrix(rng, compute.FP8, R, K, 128, 128)
	}
	ms[1].Data[7*K+300] = 0x7F // a NaN code in row 7 of group 1
	x := randFloats(rng, T*G*K)
	got := runVX(t, ms, x, T)
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
				if bound := (float64(2*K/16+8+16)*0x1p-22+0x1p-16)*mag + 2*gamma(K)*mag; !(math.Abs(float64(v-w)) <= bound) {
					t.Errorf("group %d token %d row %d = %v, CPU %v (bound %.3g)", g, tok, r, v, w, bound)
				}
			}
		}
	}
}
