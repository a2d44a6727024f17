package cuda

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// TestBackendCacheFormats: with a bf16 or FP8 cache, attention's keys
// decoded ATT_G channels a load (attn_load_keys) give the logits of run
// 5's channel-by-channel decoding (Backend.attnScalar) bit for bit, on the
// full and the decode paths (strict).
func TestBackendCacheFormats(t *testing.T) {
	for _, name := range []string{"testdata/golden/deepseek-v4/flash-ratios", "testdata/golden/deepseek-v4/quantized",
		"testdata/golden/deepseek-v4-extra/hc3-csa8"} {
		for _, dt := range []cache.DType{cache.BF16, cache.FP8} {
			t.Run(fmt.Sprintf("%s/%v", filepath.Base(name), dt), func(t *testing.T) {
				dir := repoPath(t, name)
				c, err := golden.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				opts := model.Options{CacheDType: dt}
				vec := goldenPaths(t, dir, c, Strict, opts, func(*Backend) {})
				scalar := goldenPaths(t, dir, c, Strict, opts, func(be *Backend) { be.attnScalar = true })
				samePaths(t, vec, scalar, "channel by channel")
				fmt.Printf("FORMATS %s %v: full and decode logits identical to channel-by-channel keys (max abs from the golden f32 logits %.3g)\n",
					filepath.Base(name), dt, golden.MaxAbsDiff(vec[0], c.LogitsFull))
			})
		}
	}
}
