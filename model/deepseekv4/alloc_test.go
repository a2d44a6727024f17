package deepseekv4

import (
	"context"
	"fmt"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
)

// TestDecodeNoAllocs: after warm-up, a decode step (batch 1 and batch 4) at
// a context where every attention kind is in use (the indexer selecting its
// top-k, compressed entries, the window ring full) allocates nothing on the
// heap: the step's metadata, the ops' lists and jobs and the logits live in
// buffers reused step to step. The sequences' pages are reserved up front,
// so the cache takes no pages either (that is the cache's business).
//
// With one worker every measured step must allocate nothing. With two, the
// step hands work to the backend's pool goroutine, and the runtime itself
// now and then allocates when a goroutine parks (its per-P cache of wait
// records runs dry when goroutines move between Ps on a loaded machine): an
// allocation of the decode path would show in every step, so at most two
// of the ten measured steps may allocate, and those only a few objects.
func TestDecodeNoAllocs(t *testing.T) {
	for _, name := range []string{"deepseek-v4/quantized", "deepseek-v4/flash-ratios"} {
		for _, c := range []struct{ batch, workers int }{{1, 1}, {4, 1}, {1, 2}, {4, 2}} {
			batch := c.batch
			t.Run(fmt.Sprintf("%s/batch%d/workers%d", name, batch, c.workers), func(t *testing.T) {
				m, err := Load(caseDir(name), cpu.New(c.workers))
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				const ctxLen, runs = 300, 20
				pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), ctxLen+runs+8, batch)
				if err != nil {
					t.Fatal(err)
				}
				b := &model.Batch{}
				for i := range batch {
					seq, err := m.NewSeq(pool)
					if err != nil {
						t.Fatal(err)
					}
					fillContext(t, seq, ctxLen+i) // ragged contexts
					if err := seq.Reserve(ctxLen + i + runs + 4); err != nil {
						t.Fatal(err)
					}
					b.Tokens = append(b.Tokens, int32(3+i))
					b.Spans = append(b.Spans, model.Span{Seq: seq, Start: i, Len: 1, Logits: model.LastLogits})
				}
				ctx := context.Background()
				step := func() {
					lg, err := m.Forward(ctx, b)
					if err != nil {
						t.Fatal(err)
					}
					if len(lg) != batch*m.VocabSize() {
						t.Fatalf("%d logits", len(lg))
					}
					for i := range b.Tokens {
						b.Tokens[i] = (b.Tokens[i] + 1) % int32(m.VocabSize())
					}
				}
				step() // warm-up: scratch slabs, pools and buffers reach their size
				step()
				// One measured step per call (AllocsPerRun rounds an average
				// down).
				allocating := 0
				for i := range runs / 2 {
					a := testing.AllocsPerRun(1, step)
					if a == 0 {
						continue
					}
					allocating++
					if c.workers == 1 || a > 4 {
						t.Fatalf("step %d: %v allocations", i, a)
					}
					t.Logf("step %d: %v allocations (the runtime's, parking the pool goroutine)", i, a)
				}
				if allocating > runs/8 {
					t.Fatalf("%d of %d steps allocated", allocating, runs/2)
				}
			})
		}
	}
}
