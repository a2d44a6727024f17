package deepseekv4

import (
	"context"
	"math"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
)

// TestPathsBitIdentical: with batch-invariant kernels, the full pass, the
// prefill-then-decode path and the chunked path give the same logits to the
// last bit: every token's computation is the same whatever it is batched
// with, and compression reads the same inputs however the tokens arrive.
func TestPathsBitIdentical(t *testing.T) {
	for _, name := range []string{"deepseek-v4/tiny", "deepseek-v4/quantized", "deepseek-v4-extra/hc3-csa8"} {
		t.Run(name, func(t *testing.T) {
			m, err := Load(caseDir(name), cpu.New(0))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c, err := golden.Load(caseDir(name))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			L := len(c.InputIDs)
			full, err := golden.Feed(ctx, m, c.InputIDs, []int{L})
			if err != nil {
				t.Fatal(err)
			}
			for pname, feeds := range map[string][]int{"decode": golden.DecodeFeeds(c.Prompt, L), "chunked": c.Chunks} {
				got, err := golden.Feed(ctx, m, c.InputIDs, feeds)
				if err != nil {
					t.Fatal(err)
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(full[i]) {
						t.Fatalf("%s path: logit %d (position %d) is %g, the full pass %g", pname, i, i/c.Vocab, got[i], full[i])
					}
				}
			}
		})
	}
}
