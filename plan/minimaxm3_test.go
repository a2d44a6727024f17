package plan

import (
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
)

// TestMiniMaxM3Config: a MiniMax-M3 config.json, in either spelling, is
// sized by the spec's ledger (§7): per token Σ_layers 2·Hkv·d·bytes +
// Σ_MSA di·bytes, nothing fixed: the tiny case's 6 layers of 2 KV heads of
// 16 and 4 MSA layers with keys of 16 hold 6·2·2·16·4 + 4·16·4 = 1792 B
// per token in f32, 896 B in bf16; FP8 is not defined for it.
func TestMiniMaxM3Config(t *testing.T) {
	path := filepath.Join("..", "testdata", "golden", "minimax-m3", "tiny", "config.json")
	for dt, want := range map[cache.DType]float64{cache.F32: 1792, cache.BF16: 896} {
		m, err := FromConfigFile(path, dt)
		if err != nil || m.BytesPerToken() != want || m.FixedBytes() != 0 || m.MaxContext != 4096 {
			t.Errorf("%v: %v B/token, %v fixed, max %d, %v; want %v", dt, m.BytesPerToken(), m.FixedBytes(), m.MaxContext, err, want)
		}
	}
	if _, err := FromConfigFile(path, cache.FP8); err == nil {
		t.Error("an FP8 cache was sized for MiniMax-M3")
	}
	hub := filepath.Join("..", "model", "minimaxm3", "testdata", "hub-small-config.json")
	// 4 layers of 2 KV heads of 16, 2 MSA layers with keys of 16.
	if m, err := FromConfigFile(hub, cache.F32); err != nil || m.BytesPerToken() != 4*2*2*16*4+2*16*4 {
		t.Errorf("Hub spelling: %v B/token, %v", m.BytesPerToken(), err)
	}
}
