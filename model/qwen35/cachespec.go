package qwen35

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
)

// Names of Qwen3.5's cache kinds (the planner's names for the same kinds).
const (
	KindKV    = "kv"        // full-attention K and V of one token, per layer
	KindDelta = "gdn-state" // one value head's dk×dv delta-rule state, float32
	KindConv  = "conv"      // one column (all channels) of the conv history
	// The draft state's kinds (MTP speculative decoding).
	KindMTPKV     = "mtp-kv"     // the MTP layers' K and V of one token
	KindMTPHidden = "mtp-hidden" // the hidden states the MTP layer reads
)

// dtypeFormat is the slot format of a cache storage format Qwen3.5's KV
// and conv kinds can be stored in, and its bytes per value.
func dtypeFormat(dt cache.DType) (compute.SlotFormat, int, error) {
	switch dt {
	case cache.F32:
		return compute.SlotF32, 4, nil
	case cache.BF16:
		return compute.SlotBF16, 2, nil
	}
	return 0, 0, fmt.Errorf("qwen35: cache dtype %v is not defined for Qwen3.5 (want f32 or bf16)", dt)
}

// CacheKinds returns the per-request state of the main layers (spec §7),
// as the cache package's kinds with their policies:
//
//   - kv (append), full-attention layers: one slot per token holding K and
//     V, 2·Hkv·d values stored as dt;
//   - gdn-state (recurrent), Gated DeltaNet layers: Hv slots, one value
//     head's dk×dv state each, always float32 (the reference keeps it in
//     float32 whatever the model dtype);
//   - conv (recurrent), Gated DeltaNet layers: K-1 slots, one past input
//     column of 2Hk·dk + Hv·dv channels each, stored as dt (absent when the
//     kernel has one tap).
//
// dt is F32 (exact) or BF16 (the model dtype of the released checkpoints,
// the handbook's assumption).
func (c *Config) CacheKinds(dt cache.DType) ([]cache.Spec, error) {
	_, b, err := dtypeFormat(dt)
	if err != nil {
		return nil, err
	}
	var kinds []cache.Spec
	if full := c.LayersOf(Full); len(full) > 0 {
		kinds = append(kinds, cache.Spec{Name: KindKV, Layers: full, SlotBytes: 2 * c.KVHeads * c.HeadDim * b, Policy: cache.Append, TokensPerSlot: 1})
	}
	if lin := c.LayersOf(Linear); len(lin) > 0 {
		kinds = append(kinds, cache.Spec{Name: KindDelta, Layers: lin, SlotBytes: c.LinKeyDim * c.LinValueDim * 4, Policy: cache.Recurrent, FixedSlots: c.LinValueHeads})
		if c.ConvKernel > 1 {
			kinds = append(kinds, cache.Spec{Name: KindConv, Layers: append([]int(nil), lin...), SlotBytes: c.ConvDim() * b, Policy: cache.Recurrent, FixedSlots: c.ConvKernel - 1})
		}
	}
	return kinds, nil
}

// HiddenRing is how many positions of hidden states a draft state keeps: a
// catch-up of the MTP layer reads at most DraftWindow of them, and
// drafting writes one more.
const HiddenRing = DraftWindow + 1

// DraftWindow is the most positions one MTP catch-up pass covers (see
// Model.DraftWindow).
const DraftWindow = 256

// MTPCacheKinds returns the draft state of MTP speculative decoding: each
// MTP layer is a full-attention layer with its own keys and values
// (append, numbered after the main layers, NumLayers()+i), and the main
// model's final hidden states (after its final norm, what the MTP layer
// reads) of the last HiddenRing positions are a ring of D float32 slots.
// It is empty when the config has no MTP layers.
func (c *Config) MTPCacheKinds(dt cache.DType) ([]cache.Spec, error) {
	_, b, err := dtypeFormat(dt)
	if err != nil {
		return nil, err
	}
	if c.MTPLayers == 0 {
		return nil, nil
	}
	layers := make([]int, c.MTPLayers)
	for i := range layers {
		layers[i] = len(c.Layers) + i
	}
	return []cache.Spec{
		{Name: KindMTPKV, Layers: layers, SlotBytes: 2 * c.KVHeads * c.HeadDim * b, Policy: cache.Append, TokensPerSlot: 1},
		{Name: KindMTPHidden, Layers: []int{len(c.Layers) + c.MTPLayers}, SlotBytes: 4 * c.Hidden, Policy: cache.Ring, FixedSlots: HiddenRing},
	}, nil
}

// slotRef locates one layer's instance of a kind in a cache.Seq; spec is -1
// when the layer has none.
type slotRef struct{ spec, idx int }

var noSlot = slotRef{-1, -1}

// layerRefs are one layer's kinds: kv for full attention; delta and conv
// for Gated DeltaNet.
type layerRefs struct{ kv, delta, conv slotRef }

// cacheLayout maps each layer's kinds to their place in the specs and says
// how each spec's slots store their values.
type cacheLayout struct {
	specs   []cache.Spec
	formats []compute.SlotFormat // by spec
	widths  []int                // values per slot, by spec
	layers  map[int]layerRefs    // by layer number
	hidden  slotRef              // the draft state's hidden ring
}

func newCacheLayout(c *Config, specs []cache.Spec, dt cache.DType) (*cacheLayout, error) {
	f, b, err := dtypeFormat(dt)
	if err != nil {
		return nil, err
	}
	lay := &cacheLayout{specs: specs, layers: map[int]layerRefs{}, hidden: noSlot}
	ref := func(l int) *layerRefs {
		r, ok := lay.layers[l]
		if !ok {
			r = layerRefs{noSlot, noSlot, noSlot}
		}
		lay.layers[l] = r
		return &r
	}
	for si, s := range specs {
		format, width := f, s.SlotBytes/b
		if s.Name == KindDelta || s.Name == KindMTPHidden {
			format, width = compute.SlotF32, s.SlotBytes/4
		}
		lay.formats = append(lay.formats, format)
		lay.widths = append(lay.widths, width)
		for j, l := range s.Layers {
			r := ref(l)
			switch s.Name {
			case KindKV, KindMTPKV:
				r.kv = slotRef{si, j}
			case KindDelta:
				r.delta = slotRef{si, j}
			case KindConv:
				r.conv = slotRef{si, j}
			case KindMTPHidden:
				lay.hidden = slotRef{si, j}
			default:
				return nil, fmt.Errorf("qwen35: unknown cache kind %s", s.Name)
			}
			lay.layers[l] = *r
		}
	}
	return lay, nil
}
