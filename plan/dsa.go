package plan

import (
	"fmt"
	"path/filepath"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/deepseekv32"
	"github.com/strata-inference/strata/model/dsa"
)

// presetV32 is the DeepSeek-V3.2 preset, sized from its embedded Hub
// config.json by the engine's own dsa.Config.CacheSpecs for dt: per layer
// and token the MLA latent with its RoPE key (FP8: 512 e4m3 + 4 float32
// scales + 64 bf16 = 656 B, FlashMLA's layout) and the indexer key (FP8:
// 128 e4m3 + a float32 scale = 132 B).
func presetV32(dt cache.DType) (Model, error) {
	b, err := PresetConfig(DeepSeekV32)
	if err != nil {
		return Model{}, err
	}
	c, err := deepseekv32.ParseConfig(b)
	if err != nil {
		return Model{}, fmt.Errorf("plan: embedded %s config: %w", DeepSeekV32, err)
	}
	m := FromDSA(DeepSeekV32, c, dt)
	m.Description = fmt.Sprintf("released config.json values (%s)", dsaShape(c))
	if dt == cache.FP8 {
		m.DTypes += "; " + handbookNote
	}
	return m, nil
}

func mustV32(dt cache.DType) Model {
	m, err := presetV32(dt)
	if err != nil {
		panic(err) // the embedded config is tested
	}
	return m
}

// FromDSA sizes a DeepSeek-V3.2 or GLM-5 configuration's per-request cache
// for dt with the engine's own c.CacheSpecs(dt). MaxContext is
// max_position_embeddings.
func FromDSA(name string, c *dsa.Config, dt cache.DType) Model {
	specs := c.CacheSpecs(dt)
	var lat, key int
	for _, s := range specs {
		switch s.Name {
		case dsa.KindMLA:
			lat = s.SlotBytes
		case dsa.KindIndexer:
			key = s.SlotBytes
		}
	}
	return Model{
		Name:        name,
		Description: fmt.Sprintf("%s (%s)", c.Family.Name, dsaShape(c)),
		DTypes:      fmt.Sprintf("%s MLA latent %d B, %s indexer key %d B", dt, lat, dt, key),
		Specs:       specs,
		MaxContext:  c.MaxPosition,
	}
}

// FromDSAConfig reads a DeepSeek-V3.2 or GLM-5 config.json of family f and
// sizes its cache for dt. The model is named after the directory holding
// the file.
func FromDSAConfig(path string, f *dsa.Family, dt cache.DType) (Model, error) {
	c, err := dsa.LoadConfig(path, f)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(path); err == nil {
		dir = filepath.Dir(abs)
	}
	m := FromDSA(filepath.Base(dir), c, dt)
	m.Description = fmt.Sprintf("%s (%s)", path, dsaShape(c))
	return m, nil
}

// dsaShape summarises a DeepSeek-V3.2 / GLM-5 config.
func dsaShape(c *dsa.Config) string {
	return fmt.Sprintf("%d MLA layers (latent %d + RoPE %d), %d with their own indexer (keys of %d, top %d)",
		c.NumLayers, c.KVLoraRank, c.RopeDim, len(c.IndexerLayers()), c.IndexDim, c.IndexTopK)
}
