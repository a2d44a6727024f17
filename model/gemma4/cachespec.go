package gemma4

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
)

// Cache kind names (spec §7).
const (
	// KindWindow is a sliding layer's keys and values of its last W
	// positions: a ring of W slots, position p in slot p mod W, each slot
	// the Hs·d key channels then the Hs·d value channels.
	KindWindow = "window"
	// KindKV is a full layer's entry per position, written once: with
	// K=V the normed value u = raw/rms(raw) of each KV head (the key is
	// RoPE(k_norm ⊙ u), derived when read), otherwise key then value.
	KindKV = "kv"
)

// slotValues is how many values a layer's cache slot holds.
func slotValues(l Layer) int {
	if l.KEqV {
		return l.KVHeads * l.HeadDim
	}
	return 2 * l.KVHeads * l.HeadDim
}

// slotFormat is the cache format of a dtype; Gemma 4's KV is stored as
// float32 or bf16 values (no FP8 layout is defined for it).
func slotFormat(dt cache.DType) (compute.SlotFormat, int, error) {
	switch dt {
	case cache.F32:
		return compute.SlotF32, 4, nil
	case cache.BF16:
		return compute.SlotBF16, 2, nil
	}
	return 0, 0, fmt.Errorf("gemma4: cache dtype %v is not supported (want f32 or bf16)", dt)
}

// CacheSpecs returns the per-request cache kinds, sized for dt (f32 or
// bf16): a window ring of W slots per non-shared sliding layer and an
// append kind per non-shared full layer. KV-shared layers hold nothing:
// they read their source layer's cache. Layers with identical kinds share
// a Spec, in increasing layer order.
func (c *Config) CacheSpecs(dt cache.DType) ([]cache.Spec, error) {
	_, bytes, err := slotFormat(dt)
	if err != nil {
		return nil, err
	}
	var specs []cache.Spec
	add := func(s cache.Spec, layer int) {
		for i := range specs {
			o := &specs[i]
			if o.Name == s.Name && o.SlotBytes == s.SlotBytes {
				o.Layers = append(o.Layers, layer)
				return
			}
		}
		s.Layers = []int{layer}
		specs = append(specs, s)
	}
	for i, l := range c.Layers {
		if l.Shared {
			continue
		}
		sb := bytes * slotValues(l)
		switch l.Kind {
		case Sliding:
			add(cache.Spec{Name: KindWindow, SlotBytes: sb, Policy: cache.Ring, FixedSlots: c.Window}, i)
		case Full:
			add(cache.Spec{Name: KindKV, SlotBytes: sb, Policy: cache.Append, TokensPerSlot: 1}, i)
		}
	}
	return specs, nil
}

// slotRef locates one layer's cache in a cache.Seq: its spec and its index
// among the spec's layers.
type slotRef struct{ spec, idx int }

// cacheLayout maps every layer to the cache it reads (its own, or its
// source's for KV-shared layers).
type cacheLayout struct {
	specs  []cache.Spec
	format compute.SlotFormat
	layers []slotRef // by layer
}

func newCacheLayout(c *Config, dt cache.DType) (*cacheLayout, error) {
	f, _, err := slotFormat(dt)
	if err != nil {
		return nil, err
	}
	specs, err := c.CacheSpecs(dt)
	if err != nil {
		return nil, err
	}
	lay := &cacheLayout{specs: specs, format: f, layers: make([]slotRef, len(c.Layers))}
	own := map[int]slotRef{}
	for si, s := range specs {
		for j, l := range s.Layers {
			own[l] = slotRef{si, j}
		}
	}
	for i, l := range c.Layers {
		r, ok := own[l.Source]
		if !ok {
			return nil, fmt.Errorf("gemma4: layer %d reads layer %d's cache, which it does not hold", i, l.Source)
		}
		lay.layers[i] = r
	}
	return lay, nil
}
