package minimaxm3

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// Describe summarizes the MiniMax-M3 config.json at path (model.Summary):
// attention, MSA block selection, the FFNs, RoPE and vocabulary, the kind
// of every layer; the cache in f32 and bf16.
func Describe(path string) (*model.Summary, error) {
	c, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	s := &model.Summary{Family: "MiniMax-M3", Layers: c.NumLayers(), VocabSize: c.VocabSize, MaxContext: c.MaxPosition}
	text := "text-only save"
	if c.Multimodal {
		text = "text model of a multimodal checkpoint"
	}
	s.Field("hidden", fmt.Sprintf("%d (%s)", c.Hidden, text))
	s.Field("attention", fmt.Sprintf("%d heads over %d KV heads of %d, q/k norms", c.Heads, c.KVHeads, c.HeadDim))
	s.Field("msa", fmt.Sprintf("indexer %d heads of %d, blocks of %d, top %d blocks + %d local", c.IndexHeads, c.IndexDim, c.IndexBlock, c.IndexTopK, c.IndexLocal))
	s.Field("moe", fmt.Sprintf("%d of %d experts of %d, shared expert of %d, scale %g, SwiGLU-OAI alpha %g limit %g; dense FFN %d",
		c.ExpertsPerTok, c.Experts, c.MoEInter, c.SharedInter, c.RoutedScale, c.SwigluAlpha, c.SwigluLimit, c.DenseInter))
	s.Field("rope", fmt.Sprintf("theta %g on the first %d of %d channels", c.RopeTheta, c.RopeDim, c.HeadDim))
	s.Field("vocab", fmt.Sprintf("%d (bos %d, eos %v), max context %d", c.VocabSize, c.BOS, c.EOS, c.MaxPosition))
	kinds := make([]string, c.NumLayers())
	for i := range kinds {
		kinds[i] = "full attention"
		if c.Sparse[i] {
			kinds[i] = "MSA"
		}
		if i < len(c.MoE) && c.MoE[i] {
			kinds[i] += ", MoE"
		} else {
			kinds[i] += ", dense"
		}
	}
	s.LayerKinds(kinds)
	s.Caches = []model.CacheLayout{{DType: cache.F32, Note: model.CPUCache}, {DType: cache.BF16, Note: "K, V and indexer keys in bf16"}}
	s.CacheSpecs = c.CacheKinds
	s.Bind = func(ck *safetensors.Checkpoint) error {
		_, err := Bind(c, ck)
		return err
	}
	return s, nil
}
