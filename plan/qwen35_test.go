package plan

import (
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
)

// TestQwen35Preset derives the handbook's Qwen3.5-0.8B row by hand from
// its config.json (24 layers, every fourth full attention; 2 KV heads of
// 256; 16 value heads of 128×128; conv kernel 4 over 2·16·128 + 16·128 =
// 6144 channels):
//
//	per token: 6 layers × 2 (K, V) × 2 heads × 256 × 2 B       = 12288 B = 12.0 KB
//	fixed:     18 × 16 × 128 × 128 × 4 B = 18874368 B (18 MiB)
//	         + 18 × 3 × 6144 × 2 B      =   663552 B
//	                                     = 19537920 B ≈ 18.6 MiB → "19 MB"
//	at 128K:   12288 × 131072 + 19537920 = 1630150656 B = 1.518 GiB → "1.52 GB"
//	at 1M:     beyond max_position_embeddings 262144 → unsupported
func TestQwen35Preset(t *testing.T) {
	m, err := Preset("qwen3.5-0.8b")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.BytesPerToken(); got != 12288 {
		t.Errorf("BytesPerToken %v, want 12288", got)
	}
	if got := m.FixedBytes(); got != 19537920 {
		t.Errorf("FixedBytes %d, want 19537920", got)
	}
	if got := m.Bytes(Ledger128K); got != 1630150656 {
		t.Errorf("Bytes(128K) %d, want 1630150656", got)
	}
	row := m.Ledger()
	want := LedgerRow{Name: Qwen35_08B, PerToken: "12.0 KB", Fixed: "19 MB", At128K: "1.52 GB", At1M: Unsupported}
	if row != want {
		t.Errorf("ledger row %+v, want %+v", row, want)
	}
	if m.MaxContext != 262144 {
		t.Errorf("MaxContext %d", m.MaxContext)
	}
}

// TestFromQwen35Config sizes the golden cases' configs (text-only
// spelling) in float32: the tiny dense case has 2 full-attention layers ×
// 2 × 2 KV heads × 32 × 4 B = 1024 B per token, and 6 DeltaNet layers ×
// (4 heads × 16 × 16 × 4 B + 3 columns × 128 channels × 4 B) = 6 × 5632 =
// 33792 B fixed.
func TestFromQwen35Config(t *testing.T) {
	for _, name := range []string{"qwen3.5", "qwen3.5-moe"} {
		m, err := FromQwen35Config(filepath.Join("..", "testdata", "golden", name, "tiny", "config.json"), cache.F32)
		if err != nil {
			t.Fatal(err)
		}
		if m.BytesPerToken() != 1024 || m.FixedBytes() != 33792 || m.Name != "tiny" {
			t.Errorf("%s: %s: %v B/token, %d B fixed", name, m.Name, m.BytesPerToken(), m.FixedBytes())
		}
	}
	if _, err := FromQwen35Config(filepath.Join("..", "testdata", "golden", "qwen3.5", "tiny", "config.json"), cache.FP8); err == nil {
		t.Error("fp8: no error")
	}
}
