package plan

import (
	"embed"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/deepseekv4"
)

// configs holds Hub-style config.json texts for the released DeepSeek-V4
// models, written from the released values of spec/deepseek-v4.md §1, for
// DeepSeek-V3.2, written from its Hub config's values, and for
// Qwen3.5-0.8B and Gemma 4 12B, written from their Hub configs (they carry
// every field the engine reads; the byte-for-byte Hub files are not needed
// for sizing).
//
//go:embed configs/*.json
var configs embed.FS

// Cache kind names of the presets that are not DeepSeek-V4 (DeepSeek-V4 kinds
// are named by the deepseekv4 package).
const (
	KindMLA     = "mla"       // MLA latent KV: one compressed key/value vector per token
	KindIndexer = "indexer"   // DSA lightning-indexer key, one per token
	KindKV      = "kv"        // full-attention key and value per token
	KindWindow  = "window"    // sliding-window ring of the last W tokens' keys and values
	KindKDA     = "kda-state" // Kimi Delta Attention recurrent state, one head's matrix per slot
	KindGDN     = "gdn-state" // Gated DeltaNet recurrent state, one head's matrix per slot
	KindConv    = "conv"      // short-convolution cache, one column per slot
)

// handbookNote marks the dtypes of a preset as the handbook's.
const handbookNote = "the handbook's dtype assumption"

// Preset names, in the order of the handbook's ledger.
const (
	DeepSeekV32     = "DeepSeek-V3.2"
	DeepSeekV4Flash = "DeepSeek-V4-Flash"
	DeepSeekV4Pro   = "DeepSeek-V4-Pro"
	KimiK3          = "Kimi-K3"
	Gemma4_12B      = "Gemma 4 12B"
	Qwen35_08B      = "Qwen3.5-0.8B"
)

// Presets returns the models of the handbook's ledger, in its order, sized
// with its dtype assumptions: DeepSeek-V3.2 and V4 in DeepSeek's FP8 cache
// layout (V4 compressor state float32), Kimi-K3's MLA in bf16 and its KDA
// state float32, Gemma 4 and Qwen3.5 KV in bf16 and Qwen3.5's recurrent state
// float32. Each call builds fresh values.
func Presets() []Model {
	return []Model{
		mustV32(cache.FP8),
		mustV4(DeepSeekV4Flash, cache.FP8),
		mustV4(DeepSeekV4Pro, cache.FP8),
		kimiK3(),
		mustGemma4(),
		mustQwen35(),
	}
}

// PresetNames lists the preset names in ledger order.
func PresetNames() []string {
	return []string{DeepSeekV32, DeepSeekV4Flash, DeepSeekV4Pro, KimiK3, Gemma4_12B, Qwen35_08B}
}

// Preset returns the preset whose name matches name, ignoring case, spaces,
// '-', '_' and '.' ("deepseek-v4-flash", "gemma-4-12b", "qwen3.5-0.8b" and
// "qwen3508b" all match).
func Preset(name string) (Model, error) {
	key := presetKey(name)
	for _, m := range Presets() {
		if presetKey(m.Name) == key {
			return m, nil
		}
	}
	return Model{}, fmt.Errorf("plan: unknown model %q (presets: %s)", name, strings.Join(PresetNames(), ", "))
}

func presetKey(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '_', '.':
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// PresetFor returns a preset sized for cache dtype dt instead of the
// handbook's: the DeepSeek-V4 presets and DeepSeek-V3.2, whose configs
// the engine sizes. The other presets have fixed dtype assumptions.
func PresetFor(name string, dt cache.DType) (Model, error) {
	if presetKey(name) == presetKey(DeepSeekV32) {
		return presetV32(dt)
	}
	return V4Preset(name, dt)
}

// V4Preset returns a DeepSeek-V4 preset (DeepSeek-V4-Flash or DeepSeek-V4-Pro)
// sized for dt instead of the handbook's FP8.
func V4Preset(name string, dt cache.DType) (Model, error) {
	key := presetKey(name)
	for _, n := range []string{DeepSeekV4Flash, DeepSeekV4Pro} {
		if presetKey(n) == key {
			return presetV4(n, dt)
		}
	}
	return Model{}, fmt.Errorf("plan: %q is not a DeepSeek-V4 preset (want %s or %s)", name, DeepSeekV4Flash, DeepSeekV4Pro)
}

// PresetConfig returns the embedded config.json text of a preset built
// from one (DeepSeek-V4, Qwen3.5, Gemma 4), stored as the name with spaces
// spelled '-'.
func PresetConfig(name string) ([]byte, error) {
	b, err := configs.ReadFile("configs/" + strings.ReplaceAll(name, " ", "-") + ".json")
	if err != nil {
		return nil, fmt.Errorf("plan: no embedded config for %q", name)
	}
	return b, nil
}

func presetV4(name string, dt cache.DType) (Model, error) {
	b, err := PresetConfig(name)
	if err != nil {
		return Model{}, err
	}
	c, err := deepseekv4.ParseConfig(b)
	if err != nil {
		return Model{}, fmt.Errorf("plan: embedded %s config: %w", name, err)
	}
	m := FromDeepSeekV4(name, c, dt)
	m.Description = fmt.Sprintf("released config.json values (%s)", v4Shape(c))
	if dt == cache.FP8 {
		m.DTypes += "; " + handbookNote
	}
	return m, nil
}

func mustV4(name string, dt cache.DType) Model {
	m, err := presetV4(name, dt)
	if err != nil {
		panic(err) // the embedded configs are tested
	}
	return m
}

// FromDeepSeekV4Config reads a DeepSeek-V4 config.json (either spelling) and
// sizes its cache for dt. The model is named after the directory holding the
// file (the file name when it has none).
func FromDeepSeekV4Config(path string, dt cache.DType) (Model, error) {
	c, err := deepseekv4.LoadConfig(path)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(path); err == nil {
		dir = filepath.Dir(abs)
	}
	name := filepath.Base(dir)
	if name == "." || name == string(filepath.Separator) {
		name = filepath.Base(path)
	}
	m := FromDeepSeekV4(name, c, dt)
	m.Description = fmt.Sprintf("%s (%s)", path, v4Shape(c))
	return m, nil
}

// FromDeepSeekV4 sizes a DeepSeek-V4 configuration's per-request cache for
// dt with the engine's own c.CacheSpecs(dt) (main layers; the MTP layer's
// window is not counted, as in the handbook). MaxContext is
// max_position_embeddings.
func FromDeepSeekV4(name string, c *deepseekv4.Config, dt cache.DType) Model {
	specs := c.CacheSpecs(dt)
	var kv, idx int
	for _, s := range specs {
		switch s.Name {
		case deepseekv4.KindWindow:
			kv = s.SlotBytes
		case deepseekv4.KindIndexer:
			idx = s.SlotBytes
		}
	}
	dts := fmt.Sprintf("%s kv %d B", dt, kv)
	if idx > 0 {
		dts += fmt.Sprintf(", %s indexer key %d B", dt, idx)
	}
	dts += ", f32 compressor state"
	return Model{
		Name:        name,
		Description: fmt.Sprintf("DeepSeek-V4 (%s)", v4Shape(c)),
		DTypes:      dts,
		Specs:       specs,
		MaxContext:  c.MaxPosition,
		V4:          c,
	}
}

// v4Shape summarises a V4 config's layers.
func v4Shape(c *deepseekv4.Config) string {
	var win int
	csa := map[int]int{}
	hca := map[int]int{}
	for _, l := range c.Layers {
		switch l.Attn {
		case deepseekv4.Window:
			win++
		case deepseekv4.CSA:
			csa[l.Rate]++
		case deepseekv4.HCA:
			hca[l.Rate]++
		}
	}
	parts := []string{fmt.Sprintf("%d layers", len(c.Layers))}
	if win > 0 {
		parts = append(parts, fmt.Sprintf("%d window-only", win))
	}
	for _, g := range sortedRates(csa) {
		parts = append(parts, fmt.Sprintf("%d CSA rate %d", csa[g], g))
	}
	for _, g := range sortedRates(hca) {
		parts = append(parts, fmt.Sprintf("%d HCA rate %d", hca[g], g))
	}
	parts = append(parts, fmt.Sprintf("window %d", c.Window))
	if len(csa) > 0 {
		parts = append(parts, fmt.Sprintf("index_topk %d", c.IndexTopK))
	}
	return strings.Join(parts, ", ")
}

func layers(first, n int) []int {
	l := make([]int, n)
	for i := range l {
		l[i] = first + i
	}
	return l
}

// kimiK3 is Kimi-K3: 24 MLA layers (576-wide latent, bf16) and 69 KDA layers
// whose state is 96 heads of 128×128 float32. Layers are numbered MLA first;
// the real interleaving does not change any size.
func kimiK3() Model {
	return Model{
		Name:        KimiK3,
		Description: "Kimi-K3: 24 MLA layers + 69 Kimi Delta Attention layers (96 heads, 128x128 state); layer numbering nominal",
		DTypes:      "bf16 MLA latent 1152 B, f32 KDA state; " + handbookNote,
		Specs: []cache.Spec{
			{Name: KindMLA, Layers: layers(0, 24), SlotBytes: 576 * 2, TokensPerSlot: 1},
			{Name: KindKDA, Layers: layers(24, 69), SlotBytes: 128 * 128 * 4, FixedSlots: 96},
		},
		MaxContext: 1_048_576,
	}
}
