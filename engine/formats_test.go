package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/plan"
)

// TestPagesMatchPlanFormats: for each cache format, the pages the engine
// holds for a request of n tokens equal what the planner predicts, and both
// equal the count worked out by hand from flash-ratios' config (head_dim
// 64 with 16 RoPE channels, indexer keys of 32, window 128, layers
// [0, 0, 4, 128, 4, 128]):
//
//	KV vector:   f32 256 B, bf16 128 B, fp8 48 e4m3 + 16 bf16 + 8 scale = 88 B
//	indexer key: f32 128 B, bf16 64 B,  fp8 32 e4m3 + 4 scale = 36 B
//	window:       6 layers × 128 slots
//	compressed:   2 layers × n/4 slots (CSA) + 2 layers × n/128 (HCA)
//	indexer keys: 2 layers × n/4
//	compressor state (always f32): CSA 2 × 8 slots of 1024 B, indexer
//	  compressor 2 × 8 of 512 B, HCA 2 × 128 of 512 B
//
// each layer's instance rounding its slots up to whole pages.
func TestPagesMatchPlanFormats(t *testing.T) {
	const pageBytes = 4096
	kvBytes := map[cache.DType]int{cache.F32: 256, cache.BF16: 128, cache.FP8: 88}
	keyBytes := map[cache.DType]int{cache.F32: 128, cache.BF16: 64, cache.FP8: 36}
	pages := func(instances, slots, slotBytes int) int {
		per := pageBytes / slotBytes
		return instances * ((slots + per - 1) / per)
	}
	byHand := func(dt cache.DType, n int) int {
		kv, key := kvBytes[dt], keyBytes[dt]
		return pages(6, 128, kv) + pages(2, n/4, kv) + pages(2, n/128, kv) + pages(2, n/4, key) +
			pages(2, 8, 1024) + pages(2, 8, 512) + pages(2, 128, 512)
	}
	dir := caseDir("deepseek-v4/flash-ratios")
	for _, dt := range []cache.DType{cache.F32, cache.BF16, cache.FP8} {
		m, err := deepseekv4.LoadWith(dir, cpu.New(0), model.Options{CacheDType: dt})
		if err != nil {
			t.Fatal(err)
		}
		pm, err := plan.FromDeepSeekV4Config(filepath.Join(dir, "config.json"), dt)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 127, 128, 129, 300, 513} {
			e, err := New(m, Config{MaxBatchTokens: 1024, PageBytes: pageBytes, Pages: 2000, EOS: -1, NoPrefixCache: true})
			if err != nil {
				t.Fatal(err)
			}
			var held int
			e.Submit(context.Background(), Request{Prompt: prompt(n, 1, m.VocabSize()), MaxTokens: 2, OnLogits: func(pos int, _ []float32) {
				if pos == n-1 {
					held = e.Pool().NumPages() - e.Pool().FreePages()
				}
			}})
			drain(t, e)
			want := byHand(dt, n)
			if got := pm.Pages(n, pageBytes); got != want {
				t.Errorf("%v at %d tokens: plan predicts %d pages, by hand %d", dt, n, got, want)
			}
			if held != want {
				t.Errorf("%v at %d tokens: engine holds %d pages, by hand %d", dt, n, held, want)
			}
		}
		m.Close()
	}
}
