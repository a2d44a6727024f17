package qwen35

import (
	"math"
)

// ropeInvFreq returns the inverse frequencies θ^(-2j/R), j < R/2, of the
// default rope type, with the reference's float32 steps (exponent 2j/R in
// float32, the power rounded to float32, then its reciprocal).
func ropeInvFreq(R int, theta float64) []float32 {
	inv := make([]float32, R/2)
	for j := range inv {
		e := float32(2*j) / float32(R)
		inv[j] = 1 / float32(math.Pow(float64(float32(theta)), float64(e)))
	}
	return inv
}

// RopeHalf applies Qwen3.5's partial rotate-half RoPE (spec §3) to x, rows
// vectors of width d (a token's heads, rows = tokens × heads, laid out
// token-major): in each, channel j < R/2 and channel j + R/2 of the first R
// = 2·len(invFreq) channels are rotated together by the angle
// pos[row]·invFreq[j]; the other d − R channels are left alone. With the
// three mrope position streams equal (text), this is exactly the
// reference's interleaved mrope.
//
// The rotation runs on the backend's RoPE, which rotates adjacent pairs:
// the rotated channels are gathered into (j, j + R/2) pairs in tmp
// ([rows, R]) and scattered back.
func RopeHalf(be hostOps, x []float32, rows, d int, pos []int32, invFreq, tmp []float32) {
	R := 2 * len(invFreq)
	half := R / 2
	tmp = tmp[:rows*R]
	for r := range rows {
		src, dst := x[r*d:r*d+R], tmp[r*R:(r+1)*R]
		for j := range half {
			dst[2*j], dst[2*j+1] = src[j], src[half+j]
		}
	}
	be.RoPEF32(tmp, rows, R, pos, invFreq, false)
	for r := range rows {
		src, dst := tmp[r*R:(r+1)*R], x[r*d:r*d+R]
		for j := range half {
			dst[j], dst[half+j] = src[2*j], src[2*j+1]
		}
	}
}
