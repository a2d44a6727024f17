package deepseekv4

import (
	"math"

	"github.com/strata-inference/strata/compute"
)

// invFreqs returns the RoPE inverse frequencies for dim rotated channels at
// base theta, with YaRN correction when yarn is non-nil (spec §3, "RoPE").
// The arithmetic follows the reference's float32 steps so that angles, and
// hence logits, match it to the last bit where possible.
func invFreqs(dim int, theta float64, yarn *Yarn) []float32 {
	half := dim / 2
	// pos_freqs = base ** (arange(0, dim, 2) / dim), in float32.
	posFreq := make([]float32, half)
	for i := range half {
		e := float32(2*i) / float32(dim)
		posFreq[i] = float32(math.Pow(float64(float32(theta)), float64(e)))
	}
	inv := make([]float32, half)
	if yarn == nil {
		for i := range inv {
			inv[i] = 1 / posFreq[i]
		}
		return inv
	}
	// YaRN: blend interpolated (divided by factor) and extrapolated frequencies
	// with a linear ramp over the correction range [low, high].
	corr := func(rot float64) float64 {
		return float64(dim) * math.Log(yarn.OriginalMax/(rot*2*math.Pi)) / (2 * math.Log(theta))
	}
	low := math.Max(math.Floor(corr(yarn.BetaFast)), 0)
	high := math.Min(math.Ceil(corr(yarn.BetaSlow)), float64(dim-1))
	if low == high {
		high += 0.001
	}
	factor := float32(yarn.Factor)
	for i := range inv {
		ramp := (float32(i) - float32(low)) / (float32(high) - float32(low))
		ramp = min(max(ramp, 0), 1)
		extrapFactor := 1 - ramp
		extrap := 1 / posFreq[i]
		interp := 1 / (factor * posFreq[i])
		inv[i] = interp*(1-extrapFactor) + extrap*extrapFactor
	}
	return inv
}

// ropeTables holds the two RoPE variants of the model: "main" for window-only
// layers, "compress" for CSA/HCA layers and their compressors and indexer.
type ropeTables struct {
	main, compress compute.Tensor
}

func newRopeTables(be compute.Backend, c *Config) (ropeTables, error) {
	main, err := be.Vector(invFreqs(c.RopeDim, c.RopeTheta, nil))
	if err != nil {
		return ropeTables{}, err
	}
	comp, err := be.Vector(invFreqs(c.RopeDim, c.CompressRopeTheta, c.Yarn))
	if err != nil {
		return ropeTables{}, err
	}
	return ropeTables{main: main, compress: comp}, nil
}

// forLayer returns the inverse frequencies a layer of kind k uses.
func (t *ropeTables) forLayer(k AttnKind) compute.Tensor {
	if k == Window {
		return t.main
	}
	return t.compress
}
