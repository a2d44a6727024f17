package plan

import (
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/dsa"
)

// TestHY4Preset: the released HY4 (spec/models/hy4.md §1, §6) holds per
// token 34 latents of 512 + 64 values and 10 indexer keys of 128 (the
// full layers 0, 1, 5, …, 33), nothing fixed: by hand, bf16 34·1152 +
// 10·256 = 41,728 B (40.8 KB), fp8 34·656 + 10·132 = 23,624 B (23.1 KB),
// f32 34·2304 + 10·512 = 83,456 B. The preset is found by name but is not
// a row of the handbook's ledger, which gives no HY4 figure.
func TestHY4Preset(t *testing.T) {
	m, err := Preset("hy-4")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != HY4 || m.BytesPerToken() != 41728 || m.FixedBytes() != 0 || m.MaxContext != 131072 {
		t.Errorf("preset %s: %v B/token, %d fixed, max %d", m.Name, m.BytesPerToken(), m.FixedBytes(), m.MaxContext)
	}
	if got := m.Ledger().PerToken; got != "40.8 KB" {
		t.Errorf("ledger per token %q, want 40.8 KB", got)
	}
	for dt, want := range map[cache.DType]float64{cache.F32: 83456, cache.BF16: 41728, cache.FP8: 23624} {
		p, err := PresetFor(HY4, dt)
		if err != nil {
			t.Fatal(err)
		}
		if p.BytesPerToken() != want {
			t.Errorf("%v: %v B/token, want %v", dt, p.BytesPerToken(), want)
		}
		if len(p.Specs) != 2 || p.Specs[0].Name != dsa.KindMLA || len(p.Specs[0].Layers) != 34 || p.Specs[1].Name != dsa.KindIndexer ||
			len(p.Specs[1].Layers) != 10 || p.Specs[1].Layers[2] != 5 || p.Specs[1].Layers[9] != 33 {
			t.Errorf("%v: specs %+v", dt, p.Specs)
		}
	}
	for _, p := range Presets() {
		if p.Name == HY4 {
			t.Error("HY4 is in the handbook's ledger")
		}
	}
	// A config file of the family is read as HY4's.
	f, err := FromConfigFile(filepath.Join("..", "testdata", "golden", "hy4", "tiny", "config.json"), cache.F32)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "tiny" || f.BytesPerToken() != 5*40*4+2*16*4 || f.MaxContext != 4096 {
		t.Errorf("tiny: %s %v B/token, max %d", f.Name, f.BytesPerToken(), f.MaxContext)
	}
}
