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

// TestSinkSoftmax: one head, d = 1, q = 1, keys 0 and ln 2, sink ln 3. The
// weights are 1/6 and 2/6 (the sink takes 3/6 and contributes no value), so
// o = (0·1 + ln2·2)/6.
func TestSinkSoftmax(t *testing.T) {
	o := make([]float32, 1)
	ln2, ln3 := float32(math.Ln2), float32(math.Log(3))
	attend(o, []float32{1}, [][]float32{{0}, {ln2}}, []float32{ln3}, 1, 1, 1, nil)
	want := float32(2 * math.Ln2 / 6)
	if math.Abs(float64(o[0]-want)) > 1e-7 {
		t.Fatalf("o = %g, want %g", o[0], want)
	}
	// Two heads see the same keys with their own sinks.
	o2 := make([]float32, 2)
	attend(o2, []float32{1, 1}, [][]float32{{0}, {0}}, []float32{float32(math.Inf(-1)), 0}, 2, 1, 1, nil)
	if o2[0] != 0 || o2[1] != 0 {
		t.Fatalf("zero values must give zero output, got %v", o2)
	}
}
