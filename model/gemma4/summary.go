package gemma4

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// Describe summarizes the Gemma 4 config.json at path (model.Summary):
// attention of each layer kind, the window, KV sharing, per-layer
// embeddings, MoE, RoPE and vocabulary, the kind of every layer; the KV
// cache in f32 and bf16.
func Describe(path string) (*model.Summary, error) {
	c, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	s := &model.Summary{Family: "Gemma 4", Layers: len(c.Layers), VocabSize: c.VocabSize, MaxContext: c.MaxPosition}
	text := "text-only save"
	if c.Multimodal {
		text = "text model of a multimodal checkpoint"
	}
	s.Field("hidden", fmt.Sprintf("%d (%s), final logit softcap %g", c.Hidden, text, c.Softcap))
	for _, k := range []Kind{Full, Sliding} {
		ls := c.LayersOf(k)
		if len(ls) == 0 {
			continue
		}
		l := c.Layers[ls[0]]
		name, what := "full attention", "every earlier position"
		if k == Sliding {
			name, what = "sliding attention", fmt.Sprintf("a window of %d tokens", c.Window)
		}
		kv := ""
		if l.KEqV {
			kv = ", K=V"
		}
		rope := c.Rope[k]
		s.Field(name, fmt.Sprintf("%d heads over %d KV heads of %d%s, %s; %s RoPE theta %g over %d of %d pairs",
			c.Heads, l.KVHeads, l.HeadDim, kv, what, rope.Type, rope.Theta, rope.Pairs, rope.Dim/2))
	}
	if c.KVShared > 0 {
		s.Field("kv sharing", fmt.Sprintf("the last %d layer(s) read an earlier layer's KV", c.KVShared))
	} else {
		s.Field("kv sharing", "none")
	}
	if c.PLE > 0 {
		s.Field("per-layer input", fmt.Sprintf("%d per layer, vocab %d", c.PLE, c.PLEVocab))
	}
	if c.MoE {
		s.Field("moe", fmt.Sprintf("%d of %d experts of %d, beside the dense MLP", c.ExpertsPerTok, c.Experts, c.MoEInter))
	} else {
		s.Field("moe", "none (dense MLP)")
	}
	s.Field("vocab", fmt.Sprintf("%d (bos %d, eos %v), max context %d", c.VocabSize, c.BOS, c.EOS, c.MaxPosition))
	kinds := make([]string, len(c.Layers))
	for i, l := range c.Layers {
		k := "full"
		if l.Kind == Sliding {
			k = "sliding"
		}
		if l.Shared {
			k += fmt.Sprintf(", KV of layer %d", l.Source)
		}
		kinds[i] = fmt.Sprintf("%s, MLP %d", k, l.Intermediate)
	}
	s.LayerKinds(kinds)
	s.Caches = []model.CacheLayout{{DType: cache.F32, Note: model.CPUCache}, {DType: cache.BF16, Note: "KV in bf16"}}
	s.CacheSpecs = c.CacheSpecs
	s.Bind = func(ck *safetensors.Checkpoint) error {
		_, err := Bind(c, ck)
		return err
	}
	return s, nil
}
