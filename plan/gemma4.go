package plan

import (
	"fmt"
	"path/filepath"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/gemma4"
)

// mustGemma4 is the Gemma 4 12B preset, sized from its embedded Hub
// config.json (written from the released config's values) by the
// engine's own gemma4.Config.CacheSpecs with the handbook's dtype: KV in
// bf16.
func mustGemma4() Model {
	b, err := PresetConfig(Gemma4_12B)
	if err != nil {
		panic(err) // the embedded configs are tested
	}
	c, err := gemma4.ParseConfig(b)
	if err != nil {
		panic(fmt.Sprintf("plan: embedded %s config: %v", Gemma4_12B, err))
	}
	m, err := FromGemma4(Gemma4_12B, c, cache.BF16)
	if err != nil {
		panic(err)
	}
	m.Description = fmt.Sprintf("Hub config.json values (%s)", gemma4Shape(c))
	m.DTypes += "; " + handbookNote
	return m
}

// FromGemma4Config reads a Gemma 4 config.json (either spelling) and sizes
// its cache with KV stored as dt (f32 or bf16). The model is named after
// the directory holding the file.
func FromGemma4Config(path string, dt cache.DType) (Model, error) {
	c, err := gemma4.LoadConfig(path)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(path); err == nil {
		dir = filepath.Dir(abs)
	}
	m, err := FromGemma4(filepath.Base(dir), c, dt)
	if err != nil {
		return Model{}, err
	}
	m.Description = fmt.Sprintf("%s (%s)", path, gemma4Shape(c))
	return m, nil
}

// FromGemma4 sizes a Gemma 4 configuration's per-request cache with the
// engine's own c.CacheSpecs(dt): a ring of the window per non-shared
// sliding layer (the handbook counts W slots too), one entry per token per
// non-shared full layer (one vector per KV head with K=V), nothing for
// KV-shared layers. MaxContext is max_position_embeddings.
func FromGemma4(name string, c *gemma4.Config, dt cache.DType) (Model, error) {
	specs, err := c.CacheSpecs(dt)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	return Model{
		Name:        name,
		Description: fmt.Sprintf("Gemma 4 (%s)", gemma4Shape(c)),
		DTypes:      fmt.Sprintf("%s KV", dt),
		Specs:       specs,
		MaxContext:  c.MaxPosition,
	}, nil
}

// gemma4Shape summarises a Gemma 4 config's attention layers.
func gemma4Shape(c *gemma4.Config) string {
	var full, slide gemma4.Layer
	nf, ns := 0, 0
	for _, l := range c.Layers {
		if l.Shared {
			continue
		}
		if l.Kind == gemma4.Full {
			full, nf = l, nf+1
		} else {
			slide, ns = l, ns+1
		}
	}
	kv := "K and V"
	if full.KEqV {
		kv = "K=V"
	}
	return fmt.Sprintf("%d full-attention layers (%d KV heads of %d, %s) + %d sliding-window layers (%d tokens, %d KV heads of %d), %d KV-shared",
		nf, full.KVHeads, full.HeadDim, kv, ns, c.Window, slide.KVHeads, slide.HeadDim, c.KVShared)
}
