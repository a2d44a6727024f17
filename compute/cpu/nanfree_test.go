package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// TestFP8NaNFree: a matrix promised free of NaN codes gives exactly the
// results of the checked path.
func TestFP8NaNFree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	rows, cols := 64, 384
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	data, scale := quant.QuantizeFP8Block(w, rows, cols)
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, k := range families() {
		be := newWith(t, 2, k)
		m := &compute.Matrix{DType: compute.FP8, Rows: rows, Cols: cols, Data: data, Scale: scale, BlockRows: 128, BlockCols: 128}
		checked := make([]float32, rows)
		be.MatMulF32(checked, x, 1, m)
		m.NaNFree = true
		fast := make([]float32, rows)
		be.MatMulF32(fast, x, 1, m)
		for i := range fast {
			if fast[i] != checked[i] {
				t.Fatalf("%v row %d: %g, checked path %g", k, i, fast[i], checked[i])
			}
		}
	}
}
