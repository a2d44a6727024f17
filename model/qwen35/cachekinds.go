package qwen35

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
)

// Policy is how a kind of per-request state changes as its sequence is fed
// (spec/engine.md, "state policies").
type Policy int

const (
	// Append kinds take one slot per token, written once and never changed
	// (full-attention keys and values): a prefix or snapshot can share them.
	Append Policy = iota
	// Recurrent kinds hold a fixed number of slots overwritten wholesale by
	// every feed (conv history, delta-rule state): a prefix is reusable only
	// where a copy was checkpointed, and rolling back needs a copy per
	// position or recomputation.
	Recurrent
)

func (p Policy) String() string {
	switch p {
	case Append:
		return "append"
	case Recurrent:
		return "recurrent"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Names of Qwen3.5's cache kinds (the planner's names for the same kinds).
const (
	KindKV    = "kv"        // full-attention K and V of one token, per layer
	KindDelta = "gdn-state" // one value head's dk×dv delta-rule state, float32
	KindConv  = "conv"      // one column (all channels) of the conv history
	KindMTPKV = "mtp-kv"    // the MTP layers' K and V of one token
)

// Kind is one kind of per-request state, as data: its sizes as a
// cache.Spec and its policy. Each layer of Spec.Layers holds its own
// instance.
type Kind struct {
	cache.Spec
	Policy Policy
}

// LayerBytes is the bytes one layer's instance holds for a context of n
// tokens.
func (k Kind) LayerBytes(n int) int64 { return int64(k.Slots(n)) * int64(k.SlotBytes) }

// dtypeBytes is the bytes per value of a cache storage format Qwen3.5's
// kinds can be stored in.
func dtypeBytes(dt cache.DType) (int, error) {
	switch dt {
	case cache.F32:
		return 4, nil
	case cache.BF16:
		return 2, nil
	}
	return 0, fmt.Errorf("qwen35: cache dtype %v is not defined for Qwen3.5 (want f32 or bf16)", dt)
}

// CacheKinds returns the per-request state of the main layers (spec §7):
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
// dt is F32 (what State holds) or BF16 (the model dtype of the released
// checkpoints, the handbook's assumption).
func (c *Config) CacheKinds(dt cache.DType) ([]Kind, error) {
	b, err := dtypeBytes(dt)
	if err != nil {
		return nil, err
	}
	var kinds []Kind
	if full := c.LayersOf(Full); len(full) > 0 {
		kinds = append(kinds, Kind{Spec: cache.Spec{Name: KindKV, Layers: full, SlotBytes: 2 * c.KVHeads * c.HeadDim * b, TokensPerSlot: 1}, Policy: Append})
	}
	if lin := c.LayersOf(Linear); len(lin) > 0 {
		kinds = append(kinds, Kind{Spec: cache.Spec{Name: KindDelta, Layers: lin, SlotBytes: c.LinKeyDim * c.LinValueDim * 4, FixedSlots: c.LinValueHeads}, Policy: Recurrent})
		if c.ConvKernel > 1 {
			kinds = append(kinds, Kind{Spec: cache.Spec{Name: KindConv, Layers: append([]int(nil), lin...), SlotBytes: c.ConvDim() * b, FixedSlots: c.ConvKernel - 1}, Policy: Recurrent})
		}
	}
	return kinds, nil
}

// MTPCacheKinds returns the MTP layers' state: each is a full-attention
// layer with its own keys and values (append), numbered after the main
// layers (NumLayers()+i). It is empty when the config has no MTP layers.
func (c *Config) MTPCacheKinds(dt cache.DType) ([]Kind, error) {
	b, err := dtypeBytes(dt)
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
	return []Kind{{Spec: cache.Spec{Name: KindMTPKV, Layers: layers, SlotBytes: 2 * c.KVHeads * c.HeadDim * b, TokensPerSlot: 1}, Policy: Append}}, nil
}

// Specs returns the kinds' cache.Specs.
func Specs(kinds []Kind) []cache.Spec {
	out := make([]cache.Spec, len(kinds))
	for i, k := range kinds {
		out[i] = k.Spec
	}
	return out
}
