package deepseekv4

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// TestRewind feeds a sequence with interleaved speculative feeds of wrong
// tokens that are then rolled back (keeping a prefix of them that happens to
// be right), across compression-window boundaries of every layer kind, and
// checks every logit against one plain pass over the true tokens.
func TestRewind(t *testing.T) {
	for _, name := range []string{"deepseek-v4/tiny", "deepseek-v4-extra/hc3-csa8"} {
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
			ids := c.InputIDs
			L, V := len(ids), m.VocabSize()
			pool, _ := cache.PoolFor(m.Backend(), m.CacheSpecs(), L+16, 1)
			seq, _ := m.NewSeq(pool)
			ctx := context.Background()
			r := rand.New(rand.NewPCG(7, 8))
			got := make([]float32, L*V)
			feed := func(toks []int32) []float32 {
				lg, err := m.Forward(ctx, &model.Batch{Tokens: toks, Spans: []model.Span{{Seq: seq, Len: len(toks), Logits: model.AllLogits}}})
				if err != nil {
					t.Fatal(err)
				}
				return lg
			}
			rollbacks := 0
			for pos := 0; pos < L; {
				// Speculate n tokens: the first keep are the true ones, the
				// rest wrong; then keep only the true ones.
				n := 1 + r.IntN(5)
				n = min(n, L-pos)
				keep := r.IntN(n + 1)
				toks := append([]int32(nil), ids[pos:pos+n]...)
				for i := keep; i < n; i++ {
					toks[i] = (toks[i] + 1 + int32(r.IntN(V-1))) % int32(V)
				}
				undo, err := seq.Mark(n)
				if err != nil {
					t.Fatal(err)
				}
				lg := feed(toks)
				copy(got[pos*V:], lg[:keep*V])
				if keep < n {
					undo.Rollback(keep)
					rollbacks++
				}
				pos += keep
				if seq.Len() != pos {
					t.Fatalf("after rollback Len %d, want %d", seq.Len(), pos)
				}
			}
			if rollbacks < 10 {
				t.Fatalf("only %d rollbacks", rollbacks)
			}
			if d := golden.MaxAbsDiff(got, c.LogitsFull); d > golden.Tolerance {
				t.Fatalf("logits after rollbacks differ from the reference by %g", d)
			} else {
				t.Logf("%d rollbacks; max abs diff %.3g", rollbacks, d)
			}
		})
	}
}
