package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute"
)

// BenchmarkSharedKVAttention times one layer's attention at Gemma 4 12B's
// shapes (16 query heads; sliding: 8 KV heads of 256 over a 1024 window;
// full: one K=V head of 512 with 64 rotated pairs): a decode step of one
// sequence at a context of n, and a 64-token prefill chunk after n.
func BenchmarkSharedKVAttention(b *testing.B) {
	be := New(0)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		name          string
		kvHeads, dim  int
		window, pairs int
		kFromV        bool
	}{
		{"sliding", 8, 256, 1024, 0, false},
		{"full-kv", 1, 512, 0, 64, true},
	} {
		for _, n := range []int{4096} {
			for _, T := range []int{1, 64} {
				b.Run(fmt.Sprintf("%s/context=%d/T=%d", c.name, n, T), func(b *testing.B) {
					const H = 16
					W := c.kvHeads * c.dim
					sw := 2 * W
					if c.kFromV {
						sw = W
					}
					slots := n + T
					if c.window > 0 {
						slots = c.window
					}
					const perPage = 64
					pages := (slots + perPage - 1) / perPage
					pool, _ := be.Alloc(compute.U8, pages, perPage*sw*4)
					pv := F32(pool.As(compute.F32))
					for i := range pv {
						pv[i] = float32(rng.NormFloat64())
					}
					table := make([]int32, pages)
					for i := range table {
						table[i] = int32(i)
					}
					paged := compute.Paged{Pool: pool, Pages: WrapI32(table, 1, pages), PerPage: perPage, SlotBytes: sw * 4, Format: compute.SlotF32, Width: sw}
					pos := make([]int32, T)
					for i := range pos {
						pos[i] = int32(n + i)
					}
					sp := compute.Spans{Tab: WrapI32([]int32{0, int32(T), int32(n)}, 1, 3), Pos: WrapI32(pos, T, 1)}
					args := compute.SharedKVArgs{Out: Wrap(make([]float32, T*H*c.dim), T, H*c.dim), Q: Wrap(randVec(rng, T*H*c.dim), T, H*c.dim),
						V: Wrap(randVec(rng, T*W), T, W), Cache: paged, Window: c.window, Heads: H, KVHeads: c.kvHeads, Dim: c.dim, Scale: 1}
					if c.kFromV {
						inv := make([]float32, c.pairs)
						for i := range inv {
							inv[i] = 1 / float32(i+1)
						}
						args.KFromV, args.KNorm, args.KeyRope = true, Wrap(randVec(rng, c.dim), 1, c.dim), Wrap(keyRope(n+T, c.pairs, inv), n+T, 2*c.pairs)
					} else {
						args.K = Wrap(randVec(rng, T*W), T, W)
					}
					b.ResetTimer()
					for range b.N {
						be.SharedKVAttention(&args, sp)
					}
				})
			}
		}
	}
}
