package deepseekv4

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
)

// Cache kind names (spec §4).
const (
	KindWindow      = "window"             // ring of the last `window` kv vectors
	KindCompressed  = "compressed"         // one entry per `rate` tokens
	KindIndexer     = "indexer"            // one indexer key per `rate` tokens (CSA)
	KindCompressor  = "compressor"         // (kv, score) of the tokens a compressor may still need
	KindIndexerComp = "indexer-compressor" // the same for the indexer's compressor (CSA)
)

// kvSlotBytes is the size of one d-wide kv vector (window entry or compressed entry).
func (c *Config) kvSlotBytes(dt cache.DType) int {
	switch dt {
	case cache.BF16:
		return 2 * c.HeadDim
	case cache.FP8:
		// DeepSeek's FP8 kv layout: e4m3 non-RoPE channels, bf16 RoPE channels,
		// one scale byte per 64 non-RoPE channels padded to 8 bytes
		// (448 + 128 + 8 = 584 bytes for the released head_dim 512).
		nope := c.HeadDim - c.RopeDim
		scales := (nope + 63) / 64
		scales = (scales + 7) / 8 * 8
		return nope + 2*c.RopeDim + scales
	}
	return 4 * c.HeadDim
}

// indexSlotBytes is the size of one indexer key.
func (c *Config) indexSlotBytes(dt cache.DType) int {
	switch dt {
	case cache.BF16:
		return 2 * c.IndexHeadDim
	case cache.FP8:
		return c.IndexHeadDim + 4 // e4m3 values and one float32 scale
	}
	return 4 * c.IndexHeadDim
}

// compressorSlots is how many recent tokens a compressor of the given layer
// keeps: its own window (HCA), or its own and the previous window (CSA, whose
// entries overlap the previous window through the Ca halves).
func compressorSlots(l LayerSpec) int {
	if l.Attn == CSA {
		return 2 * l.Rate
	}
	return l.Rate
}

// CacheSpecs returns the per-request cache kinds of the main layers, sized for
// dt. Compressor state is always float32. Layers with identical kinds share a
// Spec; within a spec, layers appear in increasing order.
func (c *Config) CacheSpecs(dt cache.DType) []cache.Spec {
	var specs []cache.Spec
	add := func(s cache.Spec, layer int) {
		for i := range specs {
			o := &specs[i]
			if o.Name == s.Name && o.SlotBytes == s.SlotBytes && o.Policy == s.Policy && o.TokensPerSlot == s.TokensPerSlot && o.FixedSlots == s.FixedSlots {
				o.Layers = append(o.Layers, layer)
				return
			}
		}
		s.Layers = []int{layer}
		specs = append(specs, s)
	}
	kv := c.kvSlotBytes(dt)
	for i, l := range c.Layers {
		add(cache.Spec{Name: KindWindow, SlotBytes: kv, Policy: cache.Ring, FixedSlots: c.Window}, i)
		if l.Attn == Window {
			continue
		}
		width := c.HeadDim
		if l.Attn == CSA {
			width *= 2
		}
		add(cache.Spec{Name: KindCompressed, SlotBytes: kv, Policy: cache.Append, TokensPerSlot: l.Rate}, i)
		add(cache.Spec{Name: KindCompressor, SlotBytes: 2 * width * 4, Policy: cache.Ring, FixedSlots: compressorSlots(l)}, i)
		if l.Attn == CSA {
			add(cache.Spec{Name: KindIndexer, SlotBytes: c.indexSlotBytes(dt), Policy: cache.Append, TokensPerSlot: l.Rate}, i)
			add(cache.Spec{Name: KindIndexerComp, SlotBytes: 2 * 2 * c.IndexHeadDim * 4, Policy: cache.Ring, FixedSlots: compressorSlots(l)}, i)
		}
	}
	return specs
}

// MTPCacheSpecs returns the kinds of a sequence's draft state: each MTP
// layer is a window-only block with its own window ring, and the hidden
// streams the first MTP layer reads (the main model's final streams of the
// last window+1 positions) are a ring too. They are kept apart from
// CacheSpecs because only speculative decoding needs them.
func (c *Config) MTPCacheSpecs(dt cache.DType) []cache.Spec {
	if len(c.MTP) == 0 {
		return nil
	}
	s := cache.Spec{Name: KindMTPWindow, SlotBytes: c.kvSlotBytes(dt), Policy: cache.Ring, FixedSlots: c.Window}
	for i := range c.MTP {
		s.Layers = append(s.Layers, i)
	}
	hid := cache.Spec{Name: KindMTPHidden, SlotBytes: 4 * c.HCMult * c.Hidden, Policy: cache.Ring, FixedSlots: c.hiddenRing(), Layers: []int{0}}
	return []cache.Spec{s, hid}
}

// hiddenRing is the size of the draft state's ring of hidden streams: a
// catch-up reads window positions, and drafting writes one more.
func (c *Config) hiddenRing() int { return c.Window + 1 }

// Kinds of the draft state: an MTP layer's window ring, and the hidden
// streams the MTP layer reads.
const (
	KindMTPWindow = "mtp-window"
	KindMTPHidden = "mtp-hidden"
)

// slotRef locates one layer's instance of a kind in a cache.Seq; spec is -1
// when the layer has no such kind.
type slotRef struct{ spec, idx int }

// layerRefs are one layer's kinds.
type layerRefs struct{ window, compressed, compressor, indexer, idxComp slotRef }

// cacheLayout maps each layer's kinds to their place in the specs, and
// says how each spec's slots store their vectors.
type cacheLayout struct {
	specs   []cache.Spec
	layers  []layerRefs
	formats []slotFormat // by spec
	kv      slotFormat   // the window and compressed entries' format
	hidden  slotRef      // the draft state's hidden streams (MTP layouts)
}

// slotFormat is how a kind's slots store their vectors.
type slotFormat struct {
	format      compute.SlotFormat
	width, rope int
}

// formats of the kinds for a cache dtype: KV vectors (window and
// compressed entries) in DeepSeek's FP8 layout or bf16, indexer keys as
// e4m3 with a float32 scale or bf16, compressor state always float32.
func (c *Config) kvFormat(dt cache.DType) slotFormat {
	f := slotFormat{format: compute.SlotF32, width: c.HeadDim, rope: c.RopeDim}
	switch dt {
	case cache.BF16:
		f.format = compute.SlotBF16
	case cache.FP8:
		f.format = compute.SlotFP8KV
	}
	return f
}

func (c *Config) keyFormat(dt cache.DType) slotFormat {
	f := slotFormat{format: compute.SlotF32, width: c.IndexHeadDim}
	switch dt {
	case cache.BF16:
		f.format = compute.SlotBF16
	case cache.FP8:
		f.format = compute.SlotFP8Key
	}
	return f
}

func newCacheLayout(c *Config, specs []cache.Spec, nLayers int, dt cache.DType) (*cacheLayout, error) {
	lay := &cacheLayout{specs: specs, layers: make([]layerRefs, nLayers), kv: c.kvFormat(dt), hidden: slotRef{-1, -1}}
	for _, s := range specs {
		f := slotFormat{format: compute.SlotF32, width: s.SlotBytes / 4}
		switch s.Name {
		case KindWindow, KindMTPWindow, KindCompressed:
			f = lay.kv
		case KindIndexer:
			f = c.keyFormat(dt)
		}
		lay.formats = append(lay.formats, f)
	}
	none := slotRef{-1, -1}
	for i := range lay.layers {
		lay.layers[i] = layerRefs{none, none, none, none, none}
	}
	for si, s := range specs {
		if s.Name == KindMTPHidden {
			lay.hidden = slotRef{si, 0}
			continue
		}
		for j, l := range s.Layers {
			r := &lay.layers[l]
			ref := slotRef{si, j}
			switch s.Name {
			case KindWindow, KindMTPWindow:
				r.window = ref
			case KindCompressed:
				r.compressed = ref
			case KindCompressor:
				r.compressor = ref
			case KindIndexer:
				r.indexer = ref
			case KindIndexerComp:
				r.idxComp = ref
			default:
				return nil, fmt.Errorf("deepseekv4: unknown cache kind %s", s.Name)
			}
		}
	}
	return lay, nil
}
