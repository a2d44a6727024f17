package qwen35

import "math"

// l2NormRows replaces each row of width n of x by x·(Σx² + 1e-6)^(-1/2)·s,
// the delta rule's query and key normalisation (s = dk^(-1/2) for queries,
// 1 for keys; spec §4). The sum of squares is accumulated in float64 and the
// factor rounded to float32 once.
func l2NormRows(x []float32, n int, s float32) {
	for r := 0; r+n <= len(x); r += n {
		row := x[r : r+n]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		inv := float32(1 / math.Sqrt(float64(float32(ss))+1e-6))
		for i := range row {
			row[i] = row[i] * inv * s
		}
	}
}
