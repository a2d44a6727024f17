package plan

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-inference/strata/cache"
)

// TestFromConfigFileKimiLinear: a kimi_linear config.json is sized by the
// engine's cache kinds, the KDA conv history included: the golden case's
// 2 MLA layers of (32 + 8)·4 B per token, and 6 KDA layers of 4 heads of
// 16×16 f32 state plus 3 conv columns of 3·4·16 f32 channels.
func TestFromConfigFileKimiLinear(t *testing.T) {
	path := filepath.Join("..", "testdata", "golden", "kimi-linear", "tiny", "config.json")
	for dt, perToken := range map[cache.DType]float64{cache.F32: 2 * 40 * 4, cache.BF16: 2 * 40 * 2} {
		m, err := FromConfigFile(path, dt)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.BytesPerToken(); got != perToken {
			t.Errorf("%v: %v bytes per token, want %v", dt, got, perToken)
		}
		if got, want := m.FixedBytes(), int64(6*4*16*16*4+6*3*3*4*16*4); got != want {
			t.Errorf("%v: %d fixed bytes, want %d", dt, got, want)
		}
		if m.MaxContext != 4096 || !strings.Contains(m.Description, "6 KDA layers") {
			t.Errorf("%v: max context %d, description %q", dt, m.MaxContext, m.Description)
		}
	}
	k3, err := Preset("kimi-k3")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(k3.Description, "24 MLA layers") || !strings.Contains(k3.Description, "69 KDA layers") || !strings.Contains(k3.Description, "latent MoE not implemented") {
		t.Errorf("Kimi-K3 description %q", k3.Description)
	}
}
