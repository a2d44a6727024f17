package dsa

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// Describe summarizes the config.json at path of family f, named family
// in output (model.Summary): MLA, the indexer, MoE, RoPE, vocabulary and
// quantization, the layers' kinds; the cache in f32, bf16 and fp8.
func Describe(path string, f *Family, family string) (*model.Summary, error) {
	c, err := LoadConfig(path, f)
	if err != nil {
		return nil, err
	}
	s := &model.Summary{Family: family, Layers: c.NumLayers, VocabSize: c.VocabSize, MaxContext: c.MaxPosition}
	c.Describe(s)
	s.Caches = Caches()
	s.CacheSpecs = func(dt cache.DType) ([]cache.Spec, error) { return c.CacheSpecs(dt), nil }
	s.Bind = func(ck *safetensors.Checkpoint) error {
		_, err := Bind(c, ck)
		return err
	}
	return s, nil
}

// Caches returns the cache layouts a DSA summary reports, a new slice on
// each call (a summary's caller may change its own).
func Caches() []model.CacheLayout {
	return []model.CacheLayout{
		{DType: cache.F32, Note: model.CPUCache},
		{DType: cache.BF16, Note: "latents and indexer keys in bf16"},
		{DType: cache.FP8, Note: "in FlashMLA's FP8 layout"},
	}
}

// Describe appends the config's fields to s.
func (c *Config) Describe(s *model.Summary) {
	s.Field("hidden", fmt.Sprint(c.Hidden))
	q := "plain q"
	if c.QLoraRank > 0 {
		q = fmt.Sprintf("q rank %d", c.QLoraRank)
	}
	s.Field("attention", fmt.Sprintf("MLA, %d heads of %d+%d (RoPE), values of %d, latent %d, %s",
		c.Heads, c.NopeDim, c.RopeDim, c.VDim, c.KVLoraRank, q))
	pair := "interleaved"
	if c.IndexerRope == Half {
		pair = "half-split"
	}
	s.Field("indexer", fmt.Sprintf("%d heads of %d, top %d, %s RoPE; %d layer(s) run their own", c.IndexHeads, c.IndexDim, c.IndexTopK, pair, len(c.IndexerLayers())))
	dense := 0
	for _, d := range c.Dense {
		if d {
			dense++
		}
	}
	s.Field("moe", fmt.Sprintf("%d of %d experts of %d (+%d shared) in %d groups (top %d), scale %g; %d dense layer(s) of %d",
		c.ExpertsPerTok, c.Experts, c.MoEInter, c.SharedExperts, c.Groups, c.TopGroups, c.RoutedScale, dense, c.Intermediate))
	rope := fmt.Sprintf("theta %g", c.RopeTheta)
	if y := c.Yarn; y != nil {
		rope += fmt.Sprintf(" with YaRN x%g over %g (beta %g/%g)", y.Factor, y.OriginalMax, y.BetaFast, y.BetaSlow)
	}
	s.Field("rope", rope)
	s.Field("vocab", fmt.Sprintf("%d (bos %d, eos %d), max context %d", c.VocabSize, c.BOS, c.EOS, c.MaxPosition))
	quant := "none (unquantized weights)"
	if c.FP8Block != nil {
		quant = fmt.Sprintf("FP8 e4m3 per %dx%d block", c.FP8Block[0], c.FP8Block[1])
	}
	s.Field("quantization", quant)
	full := map[int]bool{}
	for _, l := range c.IndexerLayers() {
		full[l] = true
	}
	var kinds []string
	for i := range c.NumLayers {
		k := "MoE"
		if i < len(c.Dense) && c.Dense[i] {
			k = "dense"
		}
		if !full[i] {
			k += ", shared indexer"
		}
		kinds = append(kinds, k)
	}
	s.LayerKinds(kinds)
	if c.MTPLayers > 0 {
		s.Field("mtp", fmt.Sprintf("%d layer(s)", c.MTPLayers))
	}
}
