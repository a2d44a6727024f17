package kimilinear

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// Describe summarizes the Kimi Linear config.json at path (model.Summary):
// KDA, MLA, MoE and vocabulary, the kind of every layer; the cache with
// the MLA latents in f32 and bf16.
func Describe(path string) (*model.Summary, error) {
	c, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	s := &model.Summary{Family: "Kimi Linear", Layers: len(c.Layers), VocabSize: c.VocabSize, MaxContext: c.MaxPosition}
	s.Field("hidden", fmt.Sprint(c.Hidden))
	s.Field("kda", fmt.Sprintf("%d heads of %d, %d-tap conv over %d channels", c.LinHeads, c.LinHeadDim, c.ConvKernel, c.ConvDim()))
	q := "plain q"
	if c.QLoraRank > 0 {
		q = fmt.Sprintf("q rank %d", c.QLoraRank)
	}
	s.Field("mla", fmt.Sprintf("%d heads of %d+%d, values of %d, latent %d, %s, no RoPE", c.Heads, c.NopeDim, c.RopeDim, c.VDim, c.KVLoraRank, q))
	dense := 0
	for _, d := range c.Dense {
		if d {
			dense++
		}
	}
	s.Field("moe", fmt.Sprintf("%d of %d experts of %d (+%d shared) in %d groups (top %d), scale %g; %d dense layer(s) of %d",
		c.ExpertsPerTok, c.Experts, c.MoEInter, c.SharedExperts, c.Groups, c.TopGroups, c.RoutedScale, dense, c.Intermediate))
	s.Field("vocab", fmt.Sprintf("%d (bos %d, eos %v), max context %d", c.VocabSize, c.BOS, c.EOS, c.MaxPosition))
	kinds := make([]string, len(c.Layers))
	for i, k := range c.Layers {
		kinds[i] = "KDA"
		if k == MLA {
			kinds[i] = "MLA"
		}
		if i < len(c.Dense) && c.Dense[i] {
			kinds[i] += ", dense"
		} else {
			kinds[i] += ", MoE"
		}
	}
	s.LayerKinds(kinds)
	s.Caches = []model.CacheLayout{{DType: cache.F32, Note: model.CPUCache}, {DType: cache.BF16, Note: "MLA latents in bf16, KDA state f32"}}
	s.CacheSpecs = c.CacheKinds
	s.Bind = func(ck *safetensors.Checkpoint) error {
		_, err := Bind(c, ck)
		return err
	}
	return s, nil
}
