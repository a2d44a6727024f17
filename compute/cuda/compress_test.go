package cuda

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-inference/strata/golden"
)

// TestBackendCompressEmit feeds every golden case (CSA with overlap at
// ratios 4 and 8, HCA at 12 to 128) through its decode path (a prompt,
// then one token a step: windows close over ring slots) and its chunked
// path, in Strict and Fast mode, with compress_emit and with run 25's
// compress_emit_r25: the logits must be the same bits, and each side's
// profile must show its kernel launched.
func TestBackendCompressEmit(t *testing.T) {
	for _, name := range goldenCases {
		for _, mode := range []Mode{Strict, Fast} {
			t.Run(fmt.Sprintf("%s/%s", filepath.Base(name), modeName(mode)), func(t *testing.T) {
				dir := repoPath(t, name)
				c, err := golden.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				be := newBackend(t, mode)
				m := loadOn(t, dir, be)
				feeds := map[string][]int{"decode": golden.DecodeFeeds(c.Prompt, len(c.InputIDs)), "chunked": c.Chunks}
				run := func(r25 bool, feeds []int) []float32 {
					be.compressR25 = r25
					defer func() { be.compressR25 = false }()
					be.StartProfile()
					lg, err := golden.Feed(context.Background(), m, c.InputIDs, feeds)
					if err != nil {
						t.Fatal(err)
					}
					p, err := be.StopProfile()
					if err != nil {
						t.Fatal(err)
					}
					want := map[bool]string{false: "compress_emit", true: "compress_emit_r25"}[r25]
					other := map[bool]string{true: "compress_emit", false: "compress_emit_r25"}[r25]
					if p.Kernels[want] == nil || p.Kernels[other] != nil {
						t.Fatalf("r25 %v: %s launched %v times, %s %v", r25, want, p.Kernels[want], other, p.Kernels[other])
					}
					return lg
				}
				for _, path := range []string{"decode", "chunked"} {
					got, want := run(false, feeds[path]), run(true, feeds[path])
					if !slices.Equal(bitsOf(got), bitsOf(want)) {
						t.Fatalf("%s path: logits differ from compress_emit_r25's (max abs %.3g)", path, golden.MaxAbsDiff(got, want))
					}
				}
				fmt.Printf("COMPRESS %s %s: decode and chunked logits identical to compress_emit_r25\n", filepath.Base(name), modeName(mode))
			})
		}
	}
}
