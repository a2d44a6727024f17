package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute"
)

// BenchmarkMSADecode: one decoding token's block selection and
// block-sparse attention at the released MiniMax-M3's shapes (64 query
// heads, 4 KV heads of 128, 4 indexer heads of 128, blocks of 128, 16
// kept) over a 16K context of f32 slots: the indexer scores every key,
// attention reads 16·128 of them per KV head.
func BenchmarkMSADecode(b *testing.B) {
	const H, Hkv, d, Hi, di, B, K, n = 64, 4, 128, 4, 128, 128, 16, 16384
	rng := rand.New(rand.NewPCG(1, 2))
	be := New(0)
	kvw := Hkv * d
	kv := newTestPaged(be, rng, 1, n+1, 2*kvw, 64, compute.SlotF32)
	keys := newTestPaged(be, rng, 1, n+1, di, 256, compute.SlotF32)
	for p := range n {
		kv.set(0, p, randVec(rng, 2*kvw))
		keys.set(0, p, randVec(rng, di))
	}
	q, k, v := randVec(rng, H*d), randVec(rng, kvw), randVec(rng, kvw)
	qi, ki := randVec(rng, Hi*di), randVec(rng, di)
	sel, cnt := make([]int32, Hi*K), make([]int32, Hi)
	out := make([]float32, H*d)
	sp := spansTensor([]int{1}, []int{n})
	b.ResetTimer()
	for range b.N {
		be.BlockSelect(&compute.BlockSelectArgs{Q: Wrap(qi, 1, Hi*di), K: Wrap(ki, 1, di), Keys: keys.p, Heads: Hi, Dim: di,
			Block: B, TopK: K, Local: 1, Sel: WrapI32(sel, 1, Hi*K), N: WrapI32(cnt, 1, Hi)}, sp)
		be.BlockSparseAttention(&compute.BlockSparseArgs{
			CausalArgs: compute.CausalArgs{Out: Wrap(out, 1, H*d), Q: Wrap(q, 1, H*d), K: Wrap(k, 1, kvw), V: Wrap(v, 1, kvw),
				KV: kv.p, Heads: H, KVHeads: Hkv, Dim: d, Scale: 0.088},
			Sel: WrapI32(sel, 1, Hi*K), N: WrapI32(cnt, 1, Hi), SelHeads: Hi, TopK: K, Block: B}, sp)
	}
}
