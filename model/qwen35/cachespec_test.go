package qwen35

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
)

// TestCacheKinds08B derives Qwen3.5-0.8B's per-request state by hand from
// its config (spec §7 and the handbook's ledger): 6 full-attention layers
// × 2 (K, V) × 2 KV heads × 256 × 2 B (bf16) = 12288 B per token; 18 Gated
// DeltaNet layers × 16 heads × 128 × 128 × 4 B (f32) = 18 MiB of delta
// state, and 18 × 3 columns × (2·16·128 + 16·128 = 6144) channels × 2 B =
// 648 KiB of conv history, fixed.
func TestCacheKinds08B(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "hub-0.8b-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	kinds, err := c.CacheKinds(cache.BF16)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name      string
		policy    cache.Policy
		layers    int
		slotBytes int
		perToken  bool
		slots     int
	}{
		{KindKV, cache.Append, 6, 2 * 2 * 256 * 2, true, 0},
		{KindDelta, cache.Recurrent, 18, 128 * 128 * 4, false, 16},
		{KindConv, cache.Recurrent, 18, 6144 * 2, false, 3},
	}
	if len(kinds) != len(want) {
		t.Fatalf("%d kinds, want %d", len(kinds), len(want))
	}
	for i, w := range want {
		k := kinds[i]
		if k.Name != w.name || k.Kind() != w.policy || len(k.Layers) != w.layers || k.SlotBytes != w.slotBytes ||
			k.Growing() != w.perToken || (!w.perToken && k.FixedSlots != w.slots) {
			t.Errorf("kind %d = %+v, want %+v", i, k, w)
		}
		if err := k.Validate(1 << 20); err != nil {
			t.Error(err)
		}
	}
	if kinds[0].Layers[0] != 3 || kinds[1].Layers[0] != 0 || kinds[1].Layers[3] != 4 {
		t.Errorf("layer numbering: kv %v, delta %v", kinds[0].Layers, kinds[1].Layers)
	}
	if got := cache.TotalBytes(kinds, 1) - cache.TotalBytes(kinds, 0); got != 12288 {
		t.Errorf("bytes per token %d, want 12288", got)
	}
	if got := cache.TotalBytes(kinds, 0); got != 18*16*128*128*4+18*3*6144*2 {
		t.Errorf("fixed bytes %d, want %d", got, 18*16*128*128*4+18*3*6144*2)
	}
	if got := kinds[1].Bytes(12345) / 18; got != 1<<20 {
		t.Errorf("delta state per layer %d, want 1 MiB", got)
	}
	mtp, err := c.MTPCacheKinds(cache.BF16)
	if err != nil || len(mtp) != 2 || mtp[0].Layers[0] != 24 || mtp[0].SlotBytes != 2048 || mtp[0].Kind() != cache.Append ||
		mtp[1].Kind() != cache.Ring || mtp[1].SlotBytes != 4*1024 || mtp[1].FixedSlots != HiddenRing {
		t.Errorf("MTP kinds %+v, %v", mtp, err)
	}
	if _, err := c.CacheKinds(cache.FP8); err == nil {
		t.Error("fp8 cache kinds: no error")
	}
}

// TestCacheKindsMatchState: sized for float32, the kinds' slots hold
// exactly what a sequence holds after n tokens: n keys and values of
// 2·Hkv·d per full layer, Hv states of dk×dv and K-1 conv columns per
// DeltaNet layer.
func TestCacheKindsMatchState(t *testing.T) {
	for _, name := range goldenCases {
		m, c := loadCase(t, name)
		const n = 37
		_, st := feed(t, m, c.InputIDs[:n], []int{n})
		cfg := m.Cfg
		want := map[string]int{
			KindKV:    n * 2 * cfg.KVHeads * cfg.HeadDim,
			KindDelta: cfg.LinValueHeads * cfg.LinKeyDim * cfg.LinValueDim,
			KindConv:  (cfg.ConvKernel - 1) * cfg.ConvDim(),
		}
		for k, layers := range st.kinds {
			for j, v := range layers {
				if len(v) != want[k] {
					t.Errorf("%s: %s layer %d holds %d values, want %d", name, k, j, len(v), want[k])
				}
			}
		}
	}
}

// TestCacheKinds35BA3B: the MoE Hub config (text under text_config, layer
// types from full_attention_interval) sizes as derived by hand: 10
// full-attention layers × 2 × 2 KV heads × 256 × 2 B = 20480 B per token;
// 30 DeltaNet layers × (32 heads × 128 × 128 × 4 B + 3 × (2·16·128 +
// 32·128 = 8192) × 2 B) fixed.
func TestCacheKinds35BA3B(t *testing.T) {
	c, err := LoadConfig(filepath.Join("testdata", "hub-35b-a3b-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.MoE || !c.Multimodal || len(c.Layers) != 40 || c.Experts != 256 || c.ExpertsPerTok != 8 || c.ConvDim() != 8192 {
		t.Fatalf("config %+v", *c)
	}
	kinds, err := c.CacheKinds(cache.BF16)
	if err != nil {
		t.Fatal(err)
	}
	if got := cache.TotalBytes(kinds, 1) - cache.TotalBytes(kinds, 0); got != 20480 {
		t.Errorf("bytes per token %d, want 20480", got)
	}
	if got, want := cache.TotalBytes(kinds, 0), int64(30*(32*128*128*4+3*8192*2)); got != want {
		t.Errorf("fixed bytes %d, want %d", got, want)
	}
}
