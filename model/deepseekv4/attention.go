package deepseekv4

import (
	"math"

	"github.com/strata-inference/strata/compute"
)

// attention runs a layer's attention on x [T, D] (the attn_norm output) and
// returns its output [T, D] (spec §3, "Attention"). It reads and updates the
// window ring, compressed entries and indexer keys of every span's sequence.
func (m *Model) attention(A *rAttention, kind LayerSpec, lay *cacheLayout, refs *layerRefs, x compute.Tensor, st *step) compute.Tensor {
	be, cfg := m.be, m.Cfg
	T, D, H, d, q := st.T, cfg.Hidden, cfg.Heads, cfg.HeadDim, cfg.QLoraRank
	eps := float32(cfg.RMSEps)
	inv := m.rope.forLayer(kind.Attn)
	pos := st.spans.Pos

	// qr = RMSNorm(wq_a·x); q = wq_b·qr, per-head unweighted rms, RoPE.
	qr := be.Scratch(compute.F32, T, q)
	be.MatMul(qr, x, A.wqA)
	be.RMSNorm(qr, qr, A.qNorm, eps)
	Q := be.Scratch(compute.F32, T, H*d)
	be.MatMul(Q, qr, A.wqB)
	Qh := Q.Reshape(T*H, d)
	m.normRoPE(Qh, compute.Tensor{}, eps, pos, H, inv)

	// kv = RoPE(RMSNorm(wkv·x)): the single key and value vector of each token.
	kv := be.Scratch(compute.F32, T, d)
	be.MatMul(kv, x, A.wkv)
	m.normRoPE(kv, A.kvNorm, eps, pos, 1, inv)

	if A.comp != nil {
		m.compress(A.comp, d, kind.Attn == CSA, kind.Rate, st.kind(refs.compressed), st.kind(refs.compressor), x, st)
	}
	// Attention reads this step's kv as later steps will read it from the
	// window ring: through the cache's format.
	kvAttn := kv
	if f := lay.kv; f.format != compute.SlotF32 {
		kvAttn = be.Scratch(compute.F32, T, d)
		be.RoundTrip(kvAttn, kv, f.format, f.rope)
	}
	args := &m.args.attn
	*args = compute.AttentionArgs{
		Q: Q, KV: kvAttn, Window: st.kind(refs.window), WindowSize: cfg.Window,
		Compressed: st.kind(refs.compressed), Rate: kind.Rate,
		Sink: A.sink, Heads: H, Dim: d, Scale: float32(1 / math.Sqrt(float64(d))),
	}
	if A.indexer != nil {
		m.compress(&A.indexer.comp, cfg.IndexHeadDim, true, kind.Rate, st.kind(refs.indexer), st.kind(refs.idxComp), x, st)
		args.Sel, args.N = m.indexerSelect(A.indexer, kind.Rate, st.kind(refs.indexer), x, qr, st)
	}

	// Attention per token over the window and the compressed entries; then
	// the window ring keeps each span's last `window` kv vectors.
	args.Out = be.Scratch(compute.F32, T, H*d)
	be.SparseAttention(args, st.spans)
	be.StoreRing(st.kind(refs.window), cfg.Window, kv, st.spans)

	// Undo the values' rotation at the query position, then the grouped
	// output projection: group g's heads through wo_a[g], all groups through wo_b.
	Oh := args.Out.Reshape(T*H, d)
	be.RoPE(Oh, pos, H, inv, true)
	u := be.Scratch(compute.F32, T, cfg.OGroups*cfg.OLoraRank)
	be.GroupedMatMul(u, args.Out, A.woA)
	y := be.Scratch(compute.F32, T, D)
	be.MatMul(y, u, A.woB)
	return y
}

// indexerSelect runs the lightning indexer of a CSA layer and returns, per
// token of the batch, the compressed entries its attention uses (Sel, and
// their count N): all entries closed at or before the token when there are
// at most index_topk of them, else the index_topk best by score.
func (m *Model) indexerSelect(Ix *rIndexer, rate int, keys compute.Paged, x, qr compute.Tensor, st *step) (sel, n compute.Tensor) {
	be, cfg := m.be, m.Cfg
	T, nI, dI := st.T, cfg.IndexHeads, cfg.IndexHeadDim
	qI := be.Scratch(compute.F32, T, nI*dI)
	be.MatMul(qI, qr, Ix.wqB)
	be.RoPE(qI.Reshape(T*nI, dI), st.spans.Pos, nI, m.rope.compress, false)
	wt := be.Scratch(compute.F32, T, nI)
	be.MatMul(wt, x, Ix.weightsProj)
	sel = be.Scratch(compute.I32, T, cfg.IndexTopK)
	n = be.Scratch(compute.I32, T, 1)
	args := &m.args.idx
	*args = compute.IndexerArgs{Q: qI, W: wt, Keys: keys, Heads: nI, Dim: dI, Rate: rate, TopK: cfg.IndexTopK, Sel: sel, N: n}
	be.IndexerSelect(args, st.spans)
	return sel, n
}

// compress runs one compressor (spec §3, "Compressor") over every span: it
// computes each token's values a = wkv·x and scores z = wgate·x, and the
// backend adds the positional bias, emits the entry of every window that
// closes inside the span and keeps in the ring what later windows need. An
// overlapping compressor (CSA) is 2·width wide: the first half (Ca) of a
// token feeds the next window's entry, the second half (Cb) its own.
func (m *Model) compress(c *rCompressor, width int, overlap bool, rate int, entries, ring compute.Paged, x compute.Tensor, st *step) {
	be := m.be
	cw := width
	if overlap {
		cw = 2 * width
	}
	a := be.Scratch(compute.F32, st.T, cw)
	z := be.Scratch(compute.F32, st.T, cw)
	be.MatMul(a, x, c.wkv)
	be.MatMul(z, x, c.wgate)
	args := &m.args.comp
	*args = compute.CompressArgs{
		A: a, Z: z, Ape: c.ape, Norm: c.norm, Width: width, Rate: rate, Overlap: overlap,
		Entries: entries, Ring: ring, InvFreq: m.rope.compress, Eps: float32(m.Cfg.RMSEps),
	}
	be.Compress(args, st.spans)
}
