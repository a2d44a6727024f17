package engine

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/qwen35"
	"github.com/strata-inference/strata/plan"
)

// TestQwen35PagesMatchPlan: for the f32 and bf16 cache formats, the pages
// the engine holds for a request of n tokens on a Qwen3.5-0.8B model equal
// what the planner predicts for Qwen3.5-0.8B (its preset, for bf16: the
// handbook's format; and its config read from the checkpoint), and both
// equal the count worked out by hand from the Hub config: pages of 64 KiB
// (the largest slot, one value head's 128×128 f32 delta-rule state),
//
//	kv:         6 full layers, one slot of 2·2·256 values per token:
//	            f32 4096 B (16 a page), bf16 2048 B (32 a page)
//	gdn-state:  18 DeltaNet layers × 16 slots of 65536 B = 16 pages each
//	conv:       18 layers × 3 slots of 6144 channels: f32 24576 B (2 a
//	            page: 2 pages), bf16 12288 B (5 a page: 1 page)
//
// each layer's instance rounding its slots up to whole pages. The
// checkpoint is written on the fly with random weights and the Hub
// config's vocabulary, hidden and FFN widths sized down (64, 64, 128):
// the cache depends on none of them, and the test runs in seconds.
func TestQwen35PagesMatchPlan(t *testing.T) {
	const pageBytes = 64 << 10
	hub, err := plan.PresetConfig(plan.Qwen35_08B)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(hub, &c); err != nil {
		t.Fatal(err)
	}
	text := c["text_config"].(map[string]any)
	text["vocab_size"], text["hidden_size"], text["intermediate_size"] = 64, 64, 128
	text["eos_token_id"] = 63 // inside the smaller vocabulary
	small, _ := json.Marshal(c)
	dir := t.TempDir()
	if err := qwen35.WriteSynthetic(dir, small, qwen35.SyntheticOptions{DType: "BF16", Seed: 8}); err != nil {
		t.Fatal(err)
	}
	ceil := func(a, b int) int { return (a + b - 1) / b }
	byHand := map[cache.DType]func(n int) int{
		cache.F32:  func(n int) int { return 6*ceil(n, 16) + 18*16 + 18*2 },
		cache.BF16: func(n int) int { return 6*ceil(n, 32) + 18*16 + 18*1 },
	}
	lengths := map[cache.DType][]int{cache.F32: {1, 17, 40}, cache.BF16: {1, 33, 65}}
	preset, err := plan.Preset(plan.Qwen35_08B)
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range []cache.DType{cache.F32, cache.BF16} {
		m, err := qwen35.LoadWith(dir, cpu.New(0), qwen35.Options{Options: model.Options{CacheDType: dt}})
		if err != nil {
			t.Fatal(err)
		}
		pm, err := plan.FromQwen35Config(filepath.Join(dir, "config.json"), dt)
		if err != nil {
			t.Fatal(err)
		}
		if got := cache.PageBytesFor(m.CacheSpecs()); got != pageBytes {
			t.Fatalf("%v: the engine's default page is %d bytes, want %d", dt, got, pageBytes)
		}
		for _, n := range lengths[dt] {
			e, err := New(m, Config{MaxBatchTokens: 1024, Pages: 1000, EOS: -1, NoPrefixCache: true})
			if err != nil {
				t.Fatal(err)
			}
			held := -1
			if _, err := e.Submit(context.Background(), Request{Prompt: prompt(n, 1, m.VocabSize()), MaxTokens: 2, OnLogits: func(pos int, _ []float32) {
				if pos == n-1 {
					held = e.Pool().NumPages() - e.Pool().FreePages()
				}
			}}); err != nil {
				t.Fatal(err)
			}
			drain(t, e)
			want := byHand[dt](n)
			if got := pm.Pages(n, pageBytes); got != want {
				t.Errorf("%v at %d tokens: plan (checkpoint config) predicts %d pages, by hand %d", dt, n, got, want)
			}
			if dt == cache.BF16 {
				if got := preset.Pages(n, pageBytes); got != want {
					t.Errorf("bf16 at %d tokens: plan's %s preset predicts %d pages, by hand %d", n, plan.Qwen35_08B, got, want)
				}
			}
			if held != want {
				t.Errorf("%v at %d tokens: engine holds %d pages, by hand %d", dt, n, held, want)
			}
		}
		m.Close()
	}
}
