package plan

import (
	"fmt"
	"path/filepath"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/qwen35"
)

// mustQwen35 is the Qwen3.5-0.8B preset, sized from its embedded Hub
// config.json by the engine's own qwen35.Config.CacheKinds with the
// handbook's dtypes: KV and conv history bf16, delta-rule state float32.
func mustQwen35() Model {
	b, err := PresetConfig(Qwen35_08B)
	if err != nil {
		panic(err) // the embedded configs are tested
	}
	c, err := qwen35.ParseConfig(b)
	if err != nil {
		panic(fmt.Sprintf("plan: embedded %s config: %v", Qwen35_08B, err))
	}
	m, err := FromQwen35(Qwen35_08B, c, cache.BF16)
	if err != nil {
		panic(err)
	}
	m.Description = fmt.Sprintf("Hub config.json values (%s)", qwen35Shape(c))
	m.DTypes += "; " + handbookNote
	return m
}

// FromQwen35Config reads a Qwen3.5 config.json (either spelling, dense or
// MoE) and sizes its cache with KV and conv history stored as dt (f32 or
// bf16; the delta-rule state is float32 either way). The model is named
// after the directory holding the file.
func FromQwen35Config(path string, dt cache.DType) (Model, error) {
	c, err := qwen35.LoadConfig(path)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(path); err == nil {
		dir = filepath.Dir(abs)
	}
	m, err := FromQwen35(filepath.Base(dir), c, dt)
	if err != nil {
		return Model{}, err
	}
	m.Description = fmt.Sprintf("%s (%s)", path, qwen35Shape(c))
	return m, nil
}

// FromQwen35 sizes a Qwen3.5 configuration's per-request cache (main
// layers; the MTP layer's KV is not counted, as in the handbook) with the
// engine's own c.CacheKinds(dt). MaxContext is max_position_embeddings.
func FromQwen35(name string, c *qwen35.Config, dt cache.DType) (Model, error) {
	kinds, err := c.CacheKinds(dt)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	return Model{
		Name:        name,
		Description: fmt.Sprintf("Qwen3.5 (%s)", qwen35Shape(c)),
		DTypes:      fmt.Sprintf("%s KV and conv cache, f32 DeltaNet state", dt),
		Specs:       kinds,
		MaxContext:  c.MaxPosition,
	}, nil
}

// qwen35Shape summarises a Qwen3.5 config's layers.
func qwen35Shape(c *qwen35.Config) string {
	ffn := "dense"
	if c.MoE {
		ffn = fmt.Sprintf("MoE %d experts top-%d", c.Experts, c.ExpertsPerTok)
	}
	return fmt.Sprintf("%d full-attention layers (%d KV heads of %d) + %d Gated DeltaNet layers (%d heads, %dx%d state, %d-column conv over %d channels), %s",
		len(c.LayersOf(qwen35.Full)), c.KVHeads, c.HeadDim, len(c.LayersOf(qwen35.Linear)),
		c.LinValueHeads, c.LinKeyDim, c.LinValueDim, c.ConvKernel-1, c.ConvDim(), ffn)
}
