package deepseekv4

import (
	"fmt"
	"strings"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// Describe summarizes the DeepSeek-V4 config.json at path (model.Summary):
// hyper-connections, attention, window and indexer, MoE, RoPE, vocabulary,
// quantization and the kind of every layer; the cache as the CPU engine
// stores it (f32) and in the released FP8 layout.
func Describe(path string) (*model.Summary, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	s := &model.Summary{Family: "DeepSeek-V4", Layers: len(cfg.Layers), VocabSize: cfg.VocabSize, MaxContext: cfg.MaxPosition}
	s.Field("hidden", fmt.Sprintf("%d, %d hc streams (Sinkhorn %d iterations)", cfg.Hidden, cfg.HCMult, cfg.SinkhornIters))
	s.Field("attention", fmt.Sprintf("%d heads of %d (last %d RoPE), one shared kv head, q rank %d, output %d groups of rank %d",
		cfg.Heads, cfg.HeadDim, cfg.RopeDim, cfg.QLoraRank, cfg.OGroups, cfg.OLoraRank))
	s.Field("window", fmt.Sprintf("%d tokens; indexer %d heads of %d, top %d", cfg.Window, cfg.IndexHeads, cfg.IndexHeadDim, cfg.IndexTopK))
	s.Field("moe", fmt.Sprintf("%d of %d experts of %d (+1 shared), %s scoring, scale %g, SwiGLU limit %g",
		cfg.ExpertsPerTok, cfg.Experts, cfg.MoEInter, cfg.Scoring, cfg.RoutedScale, cfg.SwigluLimit))
	rope := fmt.Sprintf("main theta %g; compressed theta %g", cfg.RopeTheta, cfg.CompressRopeTheta)
	if y := cfg.Yarn; y != nil {
		rope += fmt.Sprintf(" with YaRN x%g over %g (beta %g/%g)", y.Factor, y.OriginalMax, y.BetaFast, y.BetaSlow)
	}
	s.Field("rope", rope)
	s.Field("vocab", fmt.Sprintf("%d (bos %d, eos %d), max context %d", cfg.VocabSize, cfg.BOS, cfg.EOS, cfg.MaxPosition))
	quant := "none (unquantized weights)"
	if cfg.FP8Block != nil {
		quant = fmt.Sprintf("FP8 e4m3, UE8M0 scales per %dx%d block", cfg.FP8Block[0], cfg.FP8Block[1])
		if cfg.ExpertDType != "" {
			quant += "; experts " + cfg.ExpertDType
		}
	}
	s.Field("quantization", quant)
	s.Field("layers", fmt.Sprintf("%d, %s", len(cfg.Layers), layerSummary(cfg)))
	for i, l := range cfg.Layers {
		route := "learned routing"
		if l.Hash {
			route = "hash routing"
		}
		kind := "window only"
		switch l.Attn {
		case CSA:
			kind = fmt.Sprintf("CSA, rate %d, indexer", l.Rate)
		case HCA:
			kind = fmt.Sprintf("HCA, rate %d", l.Rate)
		}
		s.SubField(fmt.Sprint(i), kind+", "+route)
	}
	if len(cfg.MTP) > 0 {
		s.Field("mtp", fmt.Sprintf("%d layer(s), window only", len(cfg.MTP)))
	}
	s.Caches = []model.CacheLayout{{DType: cache.F32, Note: model.CPUCache}, {DType: cache.FP8, Note: "in the released FP8 layout"}}
	s.CacheSpecs = func(dt cache.DType) ([]cache.Spec, error) { return cfg.CacheSpecs(dt), nil }
	s.Bind = func(ck *safetensors.Checkpoint) error {
		_, err := Bind(cfg, ck)
		return err
	}
	return s, nil
}

func layerSummary(cfg *Config) string {
	counts := map[string]int{}
	var order []string
	hash := 0
	for _, l := range cfg.Layers {
		k := "window-only"
		switch l.Attn {
		case CSA:
			k = fmt.Sprintf("CSA rate %d", l.Rate)
		case HCA:
			k = fmt.Sprintf("HCA rate %d", l.Rate)
		}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
		if l.Hash {
			hash++
		}
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	return fmt.Sprintf("%s; %d hash-routed", strings.Join(parts, ", "), hash)
}
