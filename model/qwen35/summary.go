package qwen35

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// Describe summarizes the Qwen3.5 config.json at path (model.Summary):
// full attention, Gated DeltaNet, the FFN (dense or MoE), RoPE and
// vocabulary, the kind of every layer; the cache with KV and conv history
// in f32 and bf16.
func Describe(path string) (*model.Summary, error) {
	c, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	s := &model.Summary{Family: "Qwen3.5", Layers: len(c.Layers), VocabSize: c.VocabSize, MaxContext: c.MaxPosition}
	text := "text-only save"
	if c.Multimodal {
		text = "text model of a multimodal checkpoint"
	}
	s.Field("hidden", fmt.Sprintf("%d (%s)", c.Hidden, text))
	s.Field("full attention", fmt.Sprintf("%d heads over %d KV heads of %d, gated output", c.Heads, c.KVHeads, c.HeadDim))
	s.Field("gated deltanet", fmt.Sprintf("%d key heads of %d, %d value heads of %d, %d-tap conv over %d channels",
		c.LinKeyHeads, c.LinKeyDim, c.LinValueHeads, c.LinValueDim, c.ConvKernel, c.ConvDim()))
	if c.MoE {
		s.Field("moe", fmt.Sprintf("%d of %d experts of %d, shared expert of %d", c.ExpertsPerTok, c.Experts, c.MoEInter, c.SharedInter))
	} else {
		s.Field("mlp", fmt.Sprintf("dense, %d", c.Intermediate))
	}
	rope := fmt.Sprintf("theta %g on the first %d of %d channels", c.RopeTheta, c.RopeDim, c.HeadDim)
	if len(c.MRopeSection) > 0 {
		rope += fmt.Sprintf(", M-RoPE sections %v", c.MRopeSection)
	}
	s.Field("rope", rope)
	s.Field("vocab", fmt.Sprintf("%d (bos %d, eos %v), max context %d", c.VocabSize, c.BOS, c.EOS, c.MaxPosition))
	kinds := make([]string, len(c.Layers))
	for i, k := range c.Layers {
		kinds[i] = "Gated DeltaNet"
		if k == Full {
			kinds[i] = "full attention"
		}
	}
	s.LayerKinds(kinds)
	if c.MTPLayers > 0 {
		s.Field("mtp", fmt.Sprintf("%d layer(s)", c.MTPLayers))
	}
	s.Caches = []model.CacheLayout{{DType: cache.F32, Note: model.CPUCache}, {DType: cache.BF16, Note: "KV and conv history in bf16, DeltaNet state f32"}}
	s.CacheSpecs = c.CacheKinds
	s.Bind = func(ck *safetensors.Checkpoint) error {
		_, err := Bind(c, ck)
		return err
	}
	return s, nil
}
