package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// TestBatchInvariance: a token's outputs are bit for bit the same whatever
// else is in the batch, on every kernel family, for every dtype and for
// shapes that are not multiples of the kernels' blocks (so batched decoding,
// chunked prefill and speculative verification compute exactly what
// one-token decoding does). T runs over odd and even counts, counts that are
// not multiples of the kernels' token groups, and tiles of tokens.
func TestBatchInvariance(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, sh := range []struct{ rows, cols int }{{37, 160}, {130, 288}, {8, 2080}, {6, 16416}} {
		w := make([]float32, sh.rows*sh.cols)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		d8, s8 := quant.QuantizeFP8Block(w, sh.rows, sh.cols)
		d4, s4 := quant.QuantizeFP4(w, sh.rows, sh.cols)
		f32 := make([]byte, 4*len(w))
		bf := make([]byte, 2*len(w))
		f16 := make([]byte, 2*len(w))
		for i, v := range w {
			u := math.Float32bits(v)
			f32[4*i], f32[4*i+1], f32[4*i+2], f32[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			b := quant.Float32ToBF16(v)
			bf[2*i], bf[2*i+1] = byte(b), byte(b>>8)
			h := quant.Float32ToF16(v)
			f16[2*i], f16[2*i+1] = byte(h), byte(h>>8)
		}
		mats := []*compute.Matrix{
			{DType: compute.F32, Rows: sh.rows, Cols: sh.cols, Data: f32},
			{DType: compute.BF16, Rows: sh.rows, Cols: sh.cols, Data: bf},
			{DType: compute.F16, Rows: sh.rows, Cols: sh.cols, Data: f16},
			{DType: compute.FP8, Rows: sh.rows, Cols: sh.cols, Data: d8, Scale: s8, BlockRows: 128, BlockCols: 128},
			{DType: compute.FP8, Rows: sh.rows, Cols: sh.cols, Data: d8, Scale: s8, BlockRows: 128, BlockCols: 128, NaNFree: true},
			{DType: compute.FP4, Rows: sh.rows, Cols: sh.cols, Data: d4, Scale: s4},
		}
		for _, k := range families() {
			be := newWith(t, 2, k)
			for _, m := range mats {
				Ts := []int{2, 3, 4, 5, 7, 33}
				if sh.cols > 8192 {
					Ts = []int{4, 131} // more than one tile of tokens (xTileBytes)
				}
				for _, T := range Ts {
					x := make([]float32, T*sh.cols)
					for i := range x {
						x[i] = float32(r.NormFloat64())
					}
					yT := make([]float32, T*sh.rows)
					be.MatMulF32(yT, x, T, m)
					for tok := range T {
						y1 := make([]float32, sh.rows)
						be.MatMulF32(y1, x[tok*sh.cols:(tok+1)*sh.cols], 1, m)
						for i := range y1 {
							if math.Float32bits(y1[i]) != math.Float32bits(yT[tok*sh.rows+i]) {
								t.Fatalf("%v %v %dx%d T=%d token %d row %d: %g alone, %g in the batch", k, m.DType, sh.rows, sh.cols, T, tok, i, y1[i], yT[tok*sh.rows+i])
							}
						}
					}
				}
			}
		}
	}
}
