package qwen35

import "math"

// ropeInvFreq returns the inverse frequencies θ^(-2j/R), j < R/2, of the
// default rope type, with the reference's float32 steps (exponent 2j/R in
// float32, the power rounded to float32, then its reciprocal). With the
// three mrope position streams equal (text), the reference's interleaved
// mrope is exactly the rotate-half RoPE on the first R channels of each
// head by these frequencies (compute.Causal's RoPEHalf).
func ropeInvFreq(R int, theta float64) []float32 {
	inv := make([]float32, R/2)
	for j := range inv {
		e := float32(2*j) / float32(R)
		inv[j] = 1 / float32(math.Pow(float64(float32(theta)), float64(e)))
	}
	return inv
}
