package hy4

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model/dsa"
)

// HY4's per-request state (spec §6) is model/dsa's: per layer and token
// the MLA latent with its rotated RoPE key (kind dsa.KindMLA), per
// full-indexer layer and token the indexer key (dsa.KindIndexer). Both are
// append kinds, written once when their token is fed and read by later
// tokens only; the C residual channels are activations. Nothing is fixed
// per request and nothing is overwritten, so a sequence's state is
// restorable at any position (PrefixAlign 1), sharing a prefix copies
// nothing, and rolling back rejected draft tokens costs nothing (their
// slots are stale and rewritten before anything reads them).
//
// The RoPE channels of both kinds hold their values in the interleaved
// order of ropeOrder: the state is this engine's, handed off only to a
// model with the same fingerprint.

// slotFormat is how a kind's slots store their vectors.
type slotFormat struct {
	format      compute.SlotFormat
	width, rope int
}

// cacheLayout maps each layer's kinds to their place in the specs.
type cacheLayout struct {
	specs   []cache.Spec
	formats []slotFormat // by spec
	// keys[l] is layer l's index in the indexer spec's Layers (-1 on
	// shared-indexer layers); the MLA spec holds every layer in order.
	keys []int
}

const (
	specMLA     = 0
	specIndexer = 1
)

// CacheSpecs returns the per-request cache kinds sized for dt (f32, bf16
// or fp8: dsa's layouts, FlashMLA's 656-byte FP8 latent at the released
// shapes).
func (c *Config) CacheSpecs(dt cache.DType) []cache.Spec { return c.Config.CacheSpecs(dt) }

func newCacheLayout(c *Config, dt cache.DType) (*cacheLayout, error) {
	lay := &cacheLayout{specs: c.CacheSpecs(dt), keys: make([]int, c.NumLayers)}
	switch dt {
	case cache.F32:
		lay.formats = []slotFormat{{format: compute.SlotF32}, {format: compute.SlotF32}}
	case cache.BF16:
		lay.formats = []slotFormat{{format: compute.SlotBF16}, {format: compute.SlotBF16}}
	case cache.FP8:
		lay.formats = []slotFormat{{format: compute.SlotFP8MLA}, {format: compute.SlotFP8Key}}
	default:
		return nil, fmt.Errorf("hy4: cache dtype %v is not one of f32, bf16, fp8", dt)
	}
	if lay.specs[specMLA].Name != dsa.KindMLA || lay.specs[specIndexer].Name != dsa.KindIndexer {
		return nil, fmt.Errorf("hy4: unexpected cache kinds %q, %q", lay.specs[0].Name, lay.specs[1].Name)
	}
	lay.formats[specMLA].width, lay.formats[specMLA].rope = c.KVLoraRank+c.RopeDim, c.RopeDim
	lay.formats[specIndexer].width = c.IndexDim
	for l := range lay.keys {
		lay.keys[l] = -1
	}
	for j, l := range lay.specs[specIndexer].Layers {
		lay.keys[l] = j
	}
	return lay, nil
}
