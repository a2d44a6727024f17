package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSinkhornDoublyStochastic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, hc := range []int{2, 4, 6} {
		c := make([]float32, hc*hc)
		for i := range c {
			c[i] = float32(r.NormFloat64() * 3)
		}
		sinkhorn(c, hc, 20, 1e-6)
		for j := range hc {
			var row, col float64
			for k := range hc {
				row += float64(c[j*hc+k])
				col += float64(c[k*hc+j])
				if c[j*hc+k] <= 0 {
					t.Fatalf("hc %d: entry [%d][%d] = %g not positive", hc, j, k, c[j*hc+k])
				}
			}
			if math.Abs(row-1) > 1e-3 || math.Abs(col-1) > 1e-5 {
				t.Errorf("hc %d: row %d sums to %g, column %d to %g", hc, j, row, j, col)
			}
		}
	}
}
