package kimilinear

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
)

// Names of Kimi Linear's cache kinds (the planner's names for the same
// kinds).
const (
	KindMLA   = "mla"       // one token's [latent c | k_pe r] (no rotation), per MLA layer
	KindState = "kda-state" // one KDA head's dk×dk delta-rule state, float32
	KindConv  = "conv"      // one column (all 3·Hl·dk channels) of the conv history
)

// dtypeFormat is the slot format of a cache dtype the MLA and conv kinds
// can be stored in, and its bytes per value.
func dtypeFormat(dt cache.DType) (compute.SlotFormat, int, error) {
	switch dt {
	case cache.F32:
		return compute.SlotF32, 4, nil
	case cache.BF16:
		return compute.SlotBF16, 2, nil
	}
	return 0, 0, fmt.Errorf("kimilinear: cache dtype %v is not defined for Kimi Linear (want f32 or bf16)", dt)
}

// CacheKinds returns the per-request state (spec §8) as cache kinds with
// their policies:
//
//   - mla (append), MLA layers: one slot per token holding the normed
//     latent and the shared key part, c + r values stored as dt (the key
//     part carries no rotation, so it is cached as computed);
//   - kda-state (recurrent), KDA layers: Hl slots, one head's dk×dk state
//     each, always float32 (the reference keeps it in float32);
//   - conv (recurrent), KDA layers: K-1 slots, one past input column of
//     the 3·Hl·dk q|k|v conv channels each, always float32 (absent when the
//     kernel has one tap). The reference keeps it in the model dtype; here
//     activations are float32, and a bf16 history would make a decoded
//     token's conv read rounded inputs where a prefill reads exact ones, so
//     that paths would no longer agree bit for bit.
//
// dt is how the MLA latents are stored: F32 (exact) or BF16 (the released
// checkpoints' dtype).
func (c *Config) CacheKinds(dt cache.DType) ([]cache.Spec, error) {
	_, b, err := dtypeFormat(dt)
	if err != nil {
		return nil, err
	}
	var kinds []cache.Spec
	if mla := c.LayersOf(MLA); len(mla) > 0 {
		kinds = append(kinds, cache.Spec{Name: KindMLA, Layers: mla, SlotBytes: pad4((c.KVLoraRank + c.RopeDim) * b), Policy: cache.Append, TokensPerSlot: 1})
	}
	if kda := c.LayersOf(KDA); len(kda) > 0 {
		kinds = append(kinds, cache.Spec{Name: KindState, Layers: kda, SlotBytes: c.LinHeadDim * c.LinHeadDim * 4, Policy: cache.Recurrent, FixedSlots: c.LinHeads})
		if c.ConvKernel > 1 {
			kinds = append(kinds, cache.Spec{Name: KindConv, Layers: append([]int(nil), kda...), SlotBytes: c.ConvDim() * 4, Policy: cache.Recurrent, FixedSlots: c.ConvKernel - 1})
		}
	}
	return kinds, nil
}

// pad4 rounds a slot up to whole 4-byte words (the pool's alignment).
func pad4(n int) int { return (n + 3) / 4 * 4 }

// slotRef locates one layer's instance of a kind in a cache.Seq; spec is -1
// when the layer has none.
type slotRef struct{ spec, idx int }

var noSlot = slotRef{-1, -1}

// layerRefs are one layer's kinds: mla for MLA; state and conv for KDA.
type layerRefs struct{ mla, state, conv slotRef }

// cacheLayout maps each layer's kinds to their place in the specs and says
// how each spec's slots store their values.
type cacheLayout struct {
	specs   []cache.Spec
	formats []compute.SlotFormat // by spec
	widths  []int                // values per slot, by spec
	layers  []layerRefs          // by layer number
}

func newCacheLayout(c *Config, dt cache.DType) (*cacheLayout, error) {
	f, _, err := dtypeFormat(dt)
	if err != nil {
		return nil, err
	}
	specs, err := c.CacheKinds(dt)
	if err != nil {
		return nil, err
	}
	lay := &cacheLayout{specs: specs, layers: make([]layerRefs, c.NumLayers())}
	for l := range lay.layers {
		lay.layers[l] = layerRefs{noSlot, noSlot, noSlot}
	}
	for si, s := range specs {
		format, width := f, 0
		switch s.Name {
		case KindMLA:
			width = c.KVLoraRank + c.RopeDim
		case KindState:
			format, width = compute.SlotF32, c.LinHeadDim*c.LinHeadDim
		case KindConv:
			format, width = compute.SlotF32, c.ConvDim()
		}
		lay.formats = append(lay.formats, format)
		lay.widths = append(lay.widths, width)
		for j, l := range s.Layers {
			r := &lay.layers[l]
			switch s.Name {
			case KindMLA:
				r.mla = slotRef{si, j}
			case KindState:
				r.state = slotRef{si, j}
			case KindConv:
				r.conv = slotRef{si, j}
			}
		}
	}
	return lay, nil
}
