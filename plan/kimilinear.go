package plan

import (
	"fmt"
	"path/filepath"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/kimilinear"
)

// kimiK3 is the Kimi-K3 preset, sized by the engine's own
// kimilinear.Config.CacheKinds from an embedded config.json in Kimi
// Linear's spelling that carries the handbook's Kimi-K3 cache shapes: 93
// layers, one in four MLA (24, latent 512 + key part 64, bf16) and 69 KDA
// layers (96 heads, 128×128 float32 state). The interleaving (MLA at
// 1-based layers 1, 5, ..., 93) and the widths the cache does not depend
// on are this file's, not a released config's; Kimi-K3's latent MoE has
// no reference and is not described. As in the handbook, the KDA layers'
// conv history (3 columns of 3·96·128 channels, float32 here: 30 MB a
// request) is left out of the preset; a Kimi Linear config read by
// FromKimiLinearConfig counts it, as the engine holds it.
func kimiK3() Model {
	b, err := PresetConfig(KimiK3)
	if err != nil {
		panic(err) // the embedded configs are tested
	}
	c, err := kimilinear.ParseConfig(b)
	if err != nil {
		panic(fmt.Sprintf("plan: embedded %s config: %v", KimiK3, err))
	}
	m, err := FromKimiLinear(KimiK3, c, cache.BF16)
	if err != nil {
		panic(err)
	}
	var specs []cache.Spec
	for _, s := range m.Specs {
		if s.Name != kimilinear.KindConv {
			specs = append(specs, s)
		}
	}
	m.Specs = specs
	m.Description = fmt.Sprintf("%s; conv history left out as in the handbook; latent MoE not implemented (no reference)", kimiShape(c))
	m.DTypes = "bf16 MLA latent 1152 B, f32 KDA state; " + handbookNote
	return m
}

// FromKimiLinearConfig reads a Kimi Linear config.json and sizes its cache
// with the MLA latents stored as dt (f32 or bf16; the KDA state and conv
// history are float32 either way). The model is named after the directory
// holding the file.
func FromKimiLinearConfig(path string, dt cache.DType) (Model, error) {
	c, err := kimilinear.LoadConfig(path)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(path); err == nil {
		dir = filepath.Dir(abs)
	}
	m, err := FromKimiLinear(filepath.Base(dir), c, dt)
	if err != nil {
		return Model{}, err
	}
	m.Description = fmt.Sprintf("%s (%s)", path, kimiShape(c))
	return m, nil
}

// FromKimiLinear sizes a Kimi Linear configuration's per-request cache
// with the engine's own c.CacheKinds(dt): the MLA latents per token, the
// KDA state and conv history per request. MaxContext is the config's.
func FromKimiLinear(name string, c *kimilinear.Config, dt cache.DType) (Model, error) {
	kinds, err := c.CacheKinds(dt)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	return Model{
		Name:        name,
		Description: fmt.Sprintf("Kimi Linear (%s)", kimiShape(c)),
		DTypes:      fmt.Sprintf("%s MLA latent, f32 KDA state and conv history", dt),
		Specs:       kinds,
		MaxContext:  c.MaxPosition,
	}, nil
}

// kimiShape summarises a Kimi Linear config's layers.
func kimiShape(c *kimilinear.Config) string {
	return fmt.Sprintf("%d MLA layers (latent %d + key part %d) + %d KDA layers (%d heads, %dx%d state, %d-column conv over %d channels)",
		len(c.LayersOf(kimilinear.MLA)), c.KVLoraRank, c.RopeDim, len(c.LayersOf(kimilinear.KDA)),
		c.LinHeads, c.LinHeadDim, c.LinHeadDim, c.ConvKernel-1, c.ConvDim())
}
