package plan

import (
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
)

// TestGemma4Preset derives the handbook's Gemma 4 12B row by hand from its
// Hub config.json (48 layers, every sixth full attention; sliding layers 8
// KV heads of 256 over a window of 1024; full layers one KV head of 512
// with K=V; no KV-shared layers):
//
//	per token: 8 full layers × 1 head × 512 × 2 B          = 8192 B = 8.0 KB
//	fixed:     40 sliding layers × 1024 slots × (8 × 256 × 2 (K, V) × 2 B)
//	         = 40 × 1024 × 8192 B = 335544320 B                = 320 MB
//	at 128K:   8192 × 131072 + 335544320 = 1409286144 B = 1.3125 GiB → "1.31 GB"
//	at 1M:     beyond max_position_embeddings 262144 → unsupported
func TestGemma4Preset(t *testing.T) {
	m, err := Preset("gemma-4-12b")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.BytesPerToken(); got != 8192 {
		t.Errorf("BytesPerToken %v, want 8192", got)
	}
	if got := m.FixedBytes(); got != 335544320 {
		t.Errorf("FixedBytes %d, want 335544320", got)
	}
	if got := m.Bytes(Ledger128K); got != 1409286144 {
		t.Errorf("Bytes(128K) %d, want 1409286144", got)
	}
	want := LedgerRow{Name: Gemma4_12B, PerToken: "8.0 KB", Fixed: "320 MB", At128K: "1.31 GB", At1M: Unsupported}
	if row := m.Ledger(); row != want {
		t.Errorf("ledger row %+v, want %+v", row, want)
	}
	for _, s := range m.Specs {
		n := len(s.Layers)
		if s.Name == "kv" && (n != 8 || s.Layers[0] != 5 || s.SlotBytes != 1024) || s.Name == "window" && (n != 40 || s.FixedSlots != 1024 || s.SlotBytes != 8192) {
			t.Errorf("kind %+v", s)
		}
	}
}

// TestFromGemma4Config sizes the golden case's config in float32: one
// non-shared full layer (layer 5; layer 7 reads it) × 1 head × 64 × 4 B =
// 256 B per token; five non-shared sliding layers (layer 6 reads layer 4) ×
// 24 slots × 2 heads × 16 × 2 (K, V) × 4 B = 30720 B fixed. FP8 has no
// Gemma 4 layout.
func TestFromGemma4Config(t *testing.T) {
	path := filepath.Join("..", "testdata", "golden", "gemma4", "tiny", "config.json")
	m, err := FromGemma4Config(path, cache.F32)
	if err != nil {
		t.Fatal(err)
	}
	if m.BytesPerToken() != 256 || m.FixedBytes() != 30720 || m.Name != "tiny" {
		t.Errorf("%s: %v B/token, %d B fixed", m.Name, m.BytesPerToken(), m.FixedBytes())
	}
	if _, err := FromGemma4Config(path, cache.FP8); err == nil {
		t.Error("an fp8 Gemma 4 cache was sized")
	}
	if c, err := FromConfigFile(path, cache.BF16); err != nil || c.BytesPerToken() != 128 {
		t.Errorf("FromConfigFile: %v B/token, %v", c.BytesPerToken(), err)
	}
}
