package cuda

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv4"
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
				ctx := context.Background()
				L := len(c.InputIDs)
				var logits [2][2][]float32 // [scalar][full, decode]
				for i, scalar := range []bool{false, true} {
					be := newBackend(t, Strict)
					be.attnScalar = scalar
					m, err := deepseekv4.LoadWith(dir, be, model.Options{CacheDType: dt})
					if err != nil {
						t.Fatal(err)
					}
					for j, feeds := range [][]int{{L}, golden.DecodeFeeds(c.Prompt, L)} {
						if logits[i][j], err = golden.Feed(ctx, m, c.InputIDs, feeds); err != nil {
							t.Fatal(err)
						}
					}
					m.Close()
				}
				for j, path := range []string{"full", "decode"} {
					got, want := logits[0][j], logits[1][j]
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s path logit %d: %g, channel by channel %g", path, i, got[i], want[i])
						}
					}
				}
				fmt.Printf("FORMATS %s %v: full and decode logits identical to channel-by-channel keys (max abs from the golden f32 logits %.3g)\n",
					filepath.Base(name), dt, golden.MaxAbsDiff(logits[0][0], c.LogitsFull))
			})
		}
	}
}
