package deepseekv4

import "github.com/strata-inference/strata/compute"

// A layer on a backend with branches (compute.Branches) runs the chains of
// its attention that do not depend on each other side by side until the
// attention reads them all:
//
//   - the main branch: wq_a·x and qr's norm, then the queries, q =
//     wq_b·qr, per-head norm, RoPE, or, in a layer with an indexer, the
//     indexer's queries and top-k (its longest chain), the queries going
//     on laneQ;
//   - laneKV: wkv·x and the compressor's products, the kv vector's norm
//     and RoPE, the compressor, and after the attention the window ring's
//     store;
//   - laneIndexer: the indexer's products of x and its compressor (its
//     keys).
//
// And on a backend with a cache it can fill ahead (compute.Prefetcher),
// lanePrefetch loads each stretch's weights while the small ops before the
// stretch leave the memory idle: the attention's input products at the
// layer's start (under mHC pre and the norm), the output projections
// after wq_b (under the attention), the shared expert after wo_b (under
// mHC and the routing). Neither changes a value: the ops and their inputs
// are the same, only the schedule is.
const (
	laneKV = 1 + iota
	laneIndexer
	lanePrefetch
	laneQ
)

// The stretches of a layer whose weights are prefetched.
const (
	aheadIn     = iota // wq_a, wkv, the compressors', the indexer's, wq_b
	aheadOut           // wo_a, wo_b
	aheadShared        // the shared expert
	stretches
)

// aheadOf lists a layer's matrices by stretch, each in the order its
// products read them.
func aheadOf(L *rLayer) [stretches][]*compute.Matrix {
	var a [stretches][]*compute.Matrix
	add := func(s int, ws ...*compute.Matrix) {
		for _, w := range ws {
			if w != nil {
				a[s] = append(a[s], w)
			}
		}
	}
	A := &L.attn
	add(aheadIn, A.wqA, A.wkv)
	if A.comp != nil {
		add(aheadIn, A.comp.wkv, A.comp.wgate)
	}
	if A.indexer != nil {
		add(aheadIn, A.indexer.comp.wkv, A.indexer.comp.wgate, A.indexer.weightsProj)
	}
	add(aheadIn, A.wqB)
	add(aheadOut, A.woA...)
	add(aheadOut, A.woB)
	add(aheadShared, L.moe.Shared.W1, L.moe.Shared.W3, L.moe.Shared.W2)
	return a
}

// branch queues the ops that follow on lane i (0: the main branch) where
// the backend has branches.
func (m *Model) branch(i int) {
	if m.br != nil {
		m.br.Branch(i)
	}
}

// join makes the main branch's next ops wait for lane i's (every lane's
// for 0) and returns to it.
func (m *Model) join(i int) {
	if m.br != nil {
		m.br.Join(i)
	}
}

// ahead queues, on lanePrefetch, the prefetch of stretch s of layer L,
// where the backend has both; the ops after it stay on the main branch.
func (m *Model) ahead(L *rLayer, s int) {
	if m.pf == nil || m.br == nil || len(L.ahead[s]) == 0 {
		return
	}
	m.br.Branch(lanePrefetch)
	m.pf.Prefetch(L.ahead[s], 0)
	m.br.Branch(0)
}
