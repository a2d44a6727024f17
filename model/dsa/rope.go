package dsa

import "math"

// invFreqs returns the RoPE inverse frequencies of the r rotated channels
// (spec §4): θ^(-2j/r), blended by YaRN's ramp with the interpolated
// frequencies (divided by factor) when yarn is set. The arithmetic follows
// the reference's float32 steps, so that the angles match it to the bit
// where possible.
func invFreqs(r int, theta float64, yarn *Yarn) []float32 {
	half := r / 2
	// pos_freqs = base ** (arange(0, r, 2) / r), in float32.
	posFreq := make([]float32, half)
	for i := range half {
		e := float32(2*i) / float32(r)
		posFreq[i] = float32(math.Pow(float64(float32(theta)), float64(e)))
	}
	inv := make([]float32, half)
	if yarn == nil {
		for i := range inv {
			inv[i] = 1 / posFreq[i]
		}
		return inv
	}
	// The correction range [low, high] of dimensions between the ones
	// kept (extrapolated) and the ones interpolated.
	corr := func(rot float64) float64 {
		return float64(r) * math.Log(yarn.OriginalMax/(rot*2*math.Pi)) / (2 * math.Log(theta))
	}
	low := math.Max(math.Floor(corr(yarn.BetaFast)), 0)
	high := math.Min(math.Ceil(corr(yarn.BetaSlow)), float64(r-1))
	if low == high {
		high += 0.001
	}
	factor := float32(yarn.Factor)
	for i := range inv {
		ramp := float32(float32(i)-float32(low)) / float32(high-low)
		ramp = min(max(ramp, 0), 1)
		extrapFactor := 1 - ramp
		extrap := 1 / posFreq[i]
		interp := 1 / float32(factor*posFreq[i])
		inv[i] = float32(interp*(1-extrapFactor)) + float32(extrap*extrapFactor)
	}
	return inv
}
