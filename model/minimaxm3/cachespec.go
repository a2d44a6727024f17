package minimaxm3

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
)

// Names of MiniMax-M3's cache kinds (spec §7; the planner's names for the
// same kinds).
const (
	KindKV      = "kv"      // one token's K and V, 2·Hkv·d values, per layer
	KindIndexer = "indexer" // one token's lightning-indexer key [di], per sparse layer
)

// dtypeFormat is the slot format of a cache storage format and its bytes
// per value: f32 (exact) or bf16 (the released checkpoints' dtype).
func dtypeFormat(dt cache.DType) (compute.SlotFormat, int, error) {
	switch dt {
	case cache.F32:
		return compute.SlotF32, 4, nil
	case cache.BF16:
		return compute.SlotBF16, 2, nil
	}
	return 0, 0, fmt.Errorf("minimaxm3: cache dtype %v is not defined for MiniMax-M3 (want f32 or bf16)", dt)
}

// CacheKinds returns the per-request state (spec §7) as the cache
// package's kinds with their policies, both append (written once per
// token, never changed):
//
//   - kv, every layer: K then V of one token, 2·Hkv·d values stored as dt;
//   - indexer, the sparse layers: the lightning indexer's key of one token,
//     di values stored as dt. The block scores the selection max-pools are
//     recomputed from these keys at every step (the reference keeps no
//     per-block summary), so nothing else is kept.
//
// Nothing is fixed per request and nothing is overwritten: a sequence's
// state is restorable at any position, a prefix hit shares pages, and a
// rejected draft token's slots are simply rewritten by the next feed.
func (c *Config) CacheKinds(dt cache.DType) ([]cache.Spec, error) {
	_, b, err := dtypeFormat(dt)
	if err != nil {
		return nil, err
	}
	all := make([]int, c.NumLayers())
	for i := range all {
		all[i] = i
	}
	kinds := []cache.Spec{{Name: KindKV, Layers: all, SlotBytes: 2 * c.KVHeads * c.HeadDim * b, Policy: cache.Append, TokensPerSlot: 1}}
	if sp := c.SparseLayers(); len(sp) > 0 {
		kinds = append(kinds, cache.Spec{Name: KindIndexer, Layers: sp, SlotBytes: (c.IndexDim*b + 3) / 4 * 4, Policy: cache.Append, TokensPerSlot: 1})
	}
	return kinds, nil
}

// cacheLayout maps each layer's kinds to their place in the specs.
type cacheLayout struct {
	specs  []cache.Spec
	format compute.SlotFormat
	// keys[l] is layer l's index in the indexer spec's Layers (-1 on full
	// layers); the kv spec lists every layer in order.
	keys []int
}

const (
	specKV      = 0
	specIndexer = 1
)

func newCacheLayout(c *Config, dt cache.DType) (*cacheLayout, error) {
	f, _, err := dtypeFormat(dt)
	if err != nil {
		return nil, err
	}
	specs, err := c.CacheKinds(dt)
	if err != nil {
		return nil, err
	}
	lay := &cacheLayout{specs: specs, format: f, keys: make([]int, c.NumLayers())}
	for l := range lay.keys {
		lay.keys[l] = -1
	}
	if len(specs) > specIndexer {
		for j, l := range specs[specIndexer].Layers {
			lay.keys[l] = j
		}
	}
	return lay, nil
}
