package plan

import (
	"fmt"
	"path/filepath"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/hy4"
)

// HY4 is the preset of Tencent's released HY4. The handbook lists the
// model but gives no figure for it, so the preset is not a ledger row:
// Preset and PresetFor find it, Presets (the handbook's ledger) does not
// hold it.
const HY4 = "HY4"

// hy4Assumption says where the preset's one unknown comes from.
const hy4Assumption = "max_position_embeddings 131072 assumed (spec/models/hy4.md does not give it)"

// presetHY4 is the HY4 preset, sized from its embedded config.json
// (written from the released values of spec/models/hy4.md §1: 34 layers,
// latent 512 + RoPE 64, indexer keys of 128 on the 10 full layers 0, 1,
// 5, …, 33) by the engine's own hy4.Config.CacheSpecs for dt: per layer
// and token the MLA latent with its RoPE key (bf16 1152 B; FP8 656 B,
// FlashMLA's layout), per full layer and token the indexer key (bf16
// 256 B; FP8 132 B); nothing fixed.
func presetHY4(dt cache.DType) (Model, error) {
	b, err := PresetConfig(HY4)
	if err != nil {
		return Model{}, err
	}
	c, err := hy4.ParseConfig(b)
	if err != nil {
		return Model{}, fmt.Errorf("plan: embedded %s config: %w", HY4, err)
	}
	m := FromHY4(HY4, c, dt)
	m.Description = fmt.Sprintf("released values of spec/models/hy4.md §1 (%s); %s", c.Shape(), hy4Assumption)
	return m, nil
}

// extraPresets are the presets outside the handbook's ledger.
func extraPresets() []Model {
	m, err := presetHY4(cache.BF16)
	if err != nil {
		panic(err) // the embedded config is tested
	}
	return []Model{m}
}

// FromHY4 sizes an HY4 configuration's per-request cache for dt with the
// engine's own c.CacheSpecs(dt) (model/dsa's two append kinds).
// MaxContext is max_position_embeddings.
func FromHY4(name string, c *hy4.Config, dt cache.DType) Model {
	m := FromDSA(name, &c.Config, dt)
	m.Description = fmt.Sprintf("hy4 (%s)", c.Shape())
	return m
}

// FromHY4Config reads an HY4 config.json and sizes its cache for dt. The
// model is named after the directory holding the file.
func FromHY4Config(path string, dt cache.DType) (Model, error) {
	c, err := hy4.LoadConfig(path)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(path); err == nil {
		dir = filepath.Dir(abs)
	}
	m := FromHY4(filepath.Base(dir), c, dt)
	m.Description = fmt.Sprintf("%s (%s)", path, c.Shape())
	return m, nil
}
