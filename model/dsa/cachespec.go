package dsa

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// Cache kind names (spec §8): a sequence holds, per layer and token, the
// MLA latent with its RoPE key, and per full-indexer layer and token the
// indexer key. Both are append kinds: written once, when their token is
// fed, and read by later tokens only. Nothing is fixed per request and
// nothing is overwritten, so a sequence's state is restorable at any
// position (PrefixAlign 1), sharing a prefix copies nothing, and rolling
// back rejected draft tokens costs nothing (their slots are stale and
// rewritten before anything reads them).
const (
	KindMLA     = "mla"     // [latent c | rotated k_pe r] per token
	KindIndexer = "indexer" // the DSA indexer's key [di] per token
)

// pad4 rounds a slot up to whole 4-byte words (the pool's alignment).
func pad4(n int) int { return (n + 3) / 4 * 4 }

// latentFormat is how the MLA kind stores [lat | k_pe]: float32, bf16, or
// FlashMLA's FP8 layout (e4m3 latent with a power-of-two float32 scale per
// 128 channels, the RoPE key bf16; 656 bytes for the released shapes).
func (c *Config) latentFormat(dt cache.DType) compute.SlotFormat {
	switch dt {
	case cache.BF16:
		return compute.SlotBF16
	case cache.FP8:
		return compute.SlotFP8MLA
	}
	return compute.SlotF32
}

// keyFormat is how the indexer kind stores its keys: float32, bf16, or
// e4m3 with one float32 scale (132 bytes for the released 128 channels).
func (c *Config) keyFormat(dt cache.DType) compute.SlotFormat {
	switch dt {
	case cache.BF16:
		return compute.SlotBF16
	case cache.FP8:
		return compute.SlotFP8Key
	}
	return compute.SlotF32
}

func (c *Config) latentSlotBytes(dt cache.DType) int {
	w := c.KVLoraRank + c.RopeDim
	switch dt {
	case cache.BF16:
		return pad4(2 * w)
	case cache.FP8:
		return pad4(quant.FP8MLABytes(w, c.RopeDim))
	}
	return 4 * w
}

func (c *Config) keySlotBytes(dt cache.DType) int {
	switch dt {
	case cache.BF16:
		return pad4(2 * c.IndexDim)
	case cache.FP8:
		return pad4(quant.FP8KeyBytes(c.IndexDim))
	}
	return 4 * c.IndexDim
}

// CacheSpecs returns the per-request cache kinds sized for dt (f32, bf16
// or fp8): the latents of every layer, and the indexer keys of the layers
// that run their own indexer.
func (c *Config) CacheSpecs(dt cache.DType) []cache.Spec {
	all := make([]int, c.NumLayers)
	for i := range all {
		all[i] = i
	}
	return []cache.Spec{
		{Name: KindMLA, Layers: all, SlotBytes: c.latentSlotBytes(dt), Policy: cache.Append, TokensPerSlot: 1},
		{Name: KindIndexer, Layers: c.IndexerLayers(), SlotBytes: c.keySlotBytes(dt), Policy: cache.Append, TokensPerSlot: 1},
	}
}

// slotFormat is how a kind's slots store their vectors.
type slotFormat struct {
	format      compute.SlotFormat
	width, rope int
}

// cacheLayout maps each layer's kinds to their place in the specs.
type cacheLayout struct {
	specs   []cache.Spec
	formats []slotFormat // by spec
	// latent[l] and keys[l] are layer l's index in the MLA and indexer
	// specs' Layers (keys[l] is -1 on shared-indexer layers).
	latent, keys []int
}

const (
	specMLA     = 0
	specIndexer = 1
)

func newCacheLayout(c *Config, dt cache.DType) (*cacheLayout, error) {
	if dt != cache.F32 && dt != cache.BF16 && dt != cache.FP8 {
		return nil, fmt.Errorf("%s: cache dtype %v is not one of f32, bf16, fp8", c.Family.Name, dt)
	}
	lay := &cacheLayout{specs: c.CacheSpecs(dt), latent: make([]int, c.NumLayers), keys: make([]int, c.NumLayers)}
	lay.formats = []slotFormat{
		{format: c.latentFormat(dt), width: c.KVLoraRank + c.RopeDim, rope: c.RopeDim},
		{format: c.keyFormat(dt), width: c.IndexDim},
	}
	for l := range lay.keys {
		lay.latent[l], lay.keys[l] = l, -1
	}
	for j, l := range lay.specs[specIndexer].Layers {
		lay.keys[l] = j
	}
	return lay, nil
}
