package cuda

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model/deepseekv4"
)

// TestBackendFusedNorms: the fused HC pre + RMS norm (hc_pre_norm), RMS
// norm + RoPE (rmsnorm_rope) and the products of one input in one launch
// (gemvm) give the logits of the separate kernels (Backend.unfused and
// unmulti, run 6's launches) bit for bit, on the full and the decode
// paths, strict and fast.
func TestBackendFusedNorms(t *testing.T) {
	for _, name := range []string{"testdata/golden/deepseek-v4/flash-ratios", "testdata/golden/deepseek-v4/quantized",
		"testdata/golden/deepseek-v4-extra/hc3-csa8"} {
		for _, mode := range []Mode{Strict, Fast} {
			t.Run(fmt.Sprintf("%s/%s", filepath.Base(name), modeName(mode)), func(t *testing.T) {
				dir := repoPath(t, name)
				c, err := golden.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				L := len(c.InputIDs)
				var logits [2][2][]float32 // [unfused][full, decode]
				for i, unfused := range []bool{false, true} {
					be := newBackend(t, mode)
					be.unfused, be.unmulti = unfused, unfused
					var _ compute.MultiMatMul = be
					var _ compute.FusedNorms = be
					m, err := deepseekv4.Load(dir, be)
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
							t.Fatalf("%s path logit %d: %g, unfused %g", path, i, got[i], want[i])
						}
					}
				}
				fmt.Printf("FUSED %s %s: full and decode logits identical to run 6's launches (max abs from the golden f32 logits %.3g)\n",
					filepath.Base(name), modeName(mode), golden.MaxAbsDiff(logits[0][0], c.LogitsFull))
			})
		}
	}
}
