package plan

import (
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
)

// TestV32PresetFromConfig: the DeepSeek-V3.2 preset is sized by the
// engine's own cache specs from the released config, per layer and token
// (61 layers, latent 512 + RoPE 64, indexer keys of 128), by hand:
//
//	fp8:  656 B latent (512 e4m3 + 4·4 scale + 64·2 bf16), 132 B key (128 + 4)
//	bf16: 576·2 = 1152 B, 128·2 = 256 B
//	f32:  576·4 = 2304 B, 128·4 = 512 B
func TestV32PresetFromConfig(t *testing.T) {
	for dt, want := range map[cache.DType][2]int{cache.FP8: {656, 132}, cache.BF16: {1152, 256}, cache.F32: {2304, 512}} {
		m, err := PresetFor(DeepSeekV32, dt)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Specs) != 2 || m.Specs[0].SlotBytes != want[0] || m.Specs[1].SlotBytes != want[1] || len(m.Specs[0].Layers) != 61 || len(m.Specs[1].Layers) != 61 {
			t.Fatalf("%v: specs %+v", dt, m.Specs)
		}
		if got := m.BytesPerToken(); got != float64(61*(want[0]+want[1])) || m.FixedBytes() != 0 || m.MaxContext != 163_840 {
			t.Errorf("%v: %v B/token, %d fixed, max %d", dt, got, m.FixedBytes(), m.MaxContext)
		}
	}
	if _, err := PresetFor(Gemma4_12B, cache.F32); err == nil {
		t.Error("a fixed-dtype preset was resized")
	}
}

// TestFromConfigFamilies: --config inputs are read by their model_type.
func TestFromConfigFamilies(t *testing.T) {
	for path, want := range map[string][2]int{
		// GLM-5 tiny: 4 layers of 32+8 f32, indexer keys of 16 on its 2 full layers.
		filepath.Join("..", "testdata", "golden", "glm-5", "tiny", "config.json"):         {4 * 40 * 4, 2 * 16 * 4},
		filepath.Join("..", "testdata", "golden", "deepseek-v3.2", "tiny", "config.json"): {4 * 40 * 4, 4 * 16 * 4},
	} {
		m, err := FromConfigFile(path, cache.F32)
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]int{int(m.Specs[0].BytesPerToken()), int(m.Specs[1].BytesPerToken())}; got != want {
			t.Errorf("%s: bytes per token %v, want %v", path, got, want)
		}
	}
	m, err := FromConfigFile(filepath.Join("configs", "DeepSeek-V4-Flash.json"), cache.FP8)
	if err != nil || m.V4 == nil {
		t.Errorf("a DeepSeek-V4 config: %v", err)
	}
}
