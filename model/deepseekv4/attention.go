package deepseekv4

import (
	"math"

	"github.com/strata-inference/strata/compute"
)

// attention runs layer L's attention on x [T, D] (the attn_norm output) and
// returns its output [T, D] (spec §3, "Attention"). It reads and updates the
// window ring, compressed entries and indexer keys of every span's sequence.
// Between the products of x and the attention, its three chains may run
// side by side (branches.go).
func (m *Model) attention(L *rLayer, kind LayerSpec, lay *cacheLayout, refs *layerRefs, x compute.Tensor, st *step) compute.Tensor {
	be, cfg, A := m.be, m.Cfg, &L.attn
	T, D, H, d, q := st.T, cfg.Hidden, cfg.Heads, cfg.HeadDim, cfg.QLoraRank
	eps := float32(cfg.RMSEps)
	inv := m.rope.forLayer(kind.Attn)
	pos := st.spans.Pos

	// The products of x: wq_a, wkv, and the compressors' and the indexer's.
	// Without branches they go in one launch where the backend can; with
	// them each lane computes those it reads, so that the main branch
	// waits for wq_a alone.
	qr := be.Scratch(compute.F32, T, q)
	kv := be.Scratch(compute.F32, T, d)
	var ca, cz, ia, iz, wt compute.Tensor
	if A.comp != nil {
		ca, cz = m.compressOut(d, kind.Attn == CSA, st)
	}
	if A.indexer != nil {
		ia, iz = m.compressOut(cfg.IndexHeadDim, true, st)
		wt = be.Scratch(compute.F32, T, cfg.IndexHeads)
	}
	split := m.br != nil
	if !split {
		m.args.mm.add(qr, A.wqA)
		m.kvProducts(A, kv, ca, cz)
		m.indexerProducts(A, ia, iz, wt)
		m.matMuls(x)
	}

	// laneKV: kv = RoPE(RMSNorm(wkv·x)), the single key and value vector of
	// each token, and the compressor's entries.
	m.branch(laneKV)
	if split {
		m.kvProducts(A, kv, ca, cz)
		m.matMuls(x)
	}
	m.normRoPE(kv, A.kvNorm, eps, pos, 1, inv)
	if A.comp != nil {
		m.compress(ca, cz, A.comp, d, kind.Attn == CSA, kind.Rate, st.kind(refs.compressed), st.kind(refs.compressor), st)
	}
	// Attention reads this step's kv as later steps will read it from the
	// window ring: through the cache's format.
	kvAttn := kv
	if f := lay.kv; f.format != compute.SlotF32 {
		kvAttn = be.Scratch(compute.F32, T, d)
		be.RoundTrip(kvAttn, kv, f.format, f.rope)
	}
	// laneIndexer: the indexer's keys (its compressor), which need x's
	// products only.
	if A.indexer != nil {
		m.branch(laneIndexer)
		if split {
			m.indexerProducts(A, ia, iz, wt)
			m.matMuls(x)
		}
		m.compress(ia, iz, &A.indexer.comp, cfg.IndexHeadDim, true, kind.Rate, st.kind(refs.indexer), st.kind(refs.idxComp), st)
	}

	// qr = RMSNorm(wq_a·x), which the queries and the indexer read.
	m.branch(0)
	if split {
		be.MatMul(qr, x, A.wqA)
	}
	be.RMSNorm(qr, qr, A.qNorm, eps)
	args := &m.args.attn
	*args = compute.AttentionArgs{
		KV: kvAttn, Window: st.kind(refs.window), WindowSize: cfg.Window,
		Compressed: st.kind(refs.compressed), Rate: kind.Rate,
		Sink: A.sink, Heads: H, Dim: d, Scale: float32(1 / math.Sqrt(float64(d))),
		// The values' rotation at the query position undone on the way
		// out (one op with the attention where the backend fuses them).
		OutRoPE: inv,
	}
	// The queries, q = wq_b·qr, per-head unweighted rms, RoPE: on laneQ
	// beside the indexer's queries and top-k where the layer has an
	// indexer (the longest chain), else on the main branch.
	if A.indexer != nil {
		m.branch(laneQ)
	}
	Q := be.Scratch(compute.F32, T, H*d)
	be.MatMul(Q, qr, A.wqB)
	Qh := Q.Reshape(T*H, d)
	m.normRoPE(Qh, compute.Tensor{}, eps, pos, H, inv)
	// The indexer's choice of compressed entries, once its keys are in.
	if A.indexer != nil {
		m.branch(0)
		args.Sel, args.N = m.indexerSelect(A.indexer, kind.Rate, st.kind(refs.indexer), wt, qr, st)
	}
	m.join(laneQ)
	m.join(laneKV)
	// The output projections' weights into the cache while the attention
	// runs (HBM idles there), after wq_b, which they would compete with.
	m.ahead(L, aheadOut) // returns to the main branch

	// Attention per token over the window and the compressed entries; then
	// the window ring keeps each span's last `window` kv vectors.
	args.Q = Q
	args.Out = be.Scratch(compute.F32, T, H*d)
	be.SparseAttention(args, st.spans)
	// Nothing in the layer reads the window ring after the attention: its
	// store runs beside the output projections (the layer's end joins it).
	m.branch(laneKV)
	be.StoreRing(st.kind(refs.window), cfg.Window, kv, st.spans)
	m.branch(0)

	// The grouped output projection (of the output turned back, OutRoPE):
	// group g's heads through wo_a[g], all groups through wo_b.
	u := be.Scratch(compute.F32, T, cfg.OGroups*cfg.OLoraRank)
	y := be.Scratch(compute.F32, T, D)
	if m.ch != nil {
		m.ch.GroupedMatMulThen(y, u, args.Out, A.woA, A.woB)
		return y
	}
	be.GroupedMatMul(u, args.Out, A.woA)
	be.MatMul(y, u, A.woB)
	return y
}

// normRoPE normalizes the rows of x in place (RMSNorm with weight w) and
// turns them (RoPE at pos, heads rows a position): one op where the
// backend fuses them.
func (m *Model) normRoPE(x, w compute.Tensor, eps float32, pos compute.Tensor, heads int, invFreq compute.Tensor) {
	if m.nr != nil {
		m.nr.RMSNormRoPE(x, w, eps, pos, heads, invFreq)
		return
	}
	m.be.RMSNorm(x, x, w, eps)
	m.be.RoPE(x, pos, heads, invFreq, false)
}

// indexerSelect runs the lightning indexer of a CSA layer and returns, per
// token of the batch, the compressed entries its attention uses (Sel, and
// their count N): all entries closed at or before the token when there are
// at most index_topk of them, else the index_topk best by score. wt is
// weights_proj·x.
func (m *Model) indexerSelect(Ix *rIndexer, rate int, keys compute.Paged, wt, qr compute.Tensor, st *step) (sel, n compute.Tensor) {
	be, cfg := m.be, m.Cfg
	T, nI, dI := st.T, cfg.IndexHeads, cfg.IndexHeadDim
	qI := be.Scratch(compute.F32, T, nI*dI)
	be.MatMul(qI, qr, Ix.wqB)
	be.RoPE(qI.Reshape(T*nI, dI), st.spans.Pos, nI, m.rope.compress, false)
	m.join(laneIndexer) // the keys
	sel = be.Scratch(compute.I32, T, cfg.IndexTopK)
	n = be.Scratch(compute.I32, T, 1)
	args := &m.args.idx
	*args = compute.IndexerArgs{Q: qI, W: wt, Keys: keys, Heads: nI, Dim: dI, Rate: rate, TopK: cfg.IndexTopK, Sel: sel, N: n}
	be.IndexerSelect(args, st.spans)
	return sel, n
}

// compressOut returns the scratch of a compressor's values a = wkv·x and
// scores z = wgate·x: an overlapping compressor (CSA) is 2·width wide.
func (m *Model) compressOut(width int, overlap bool, st *step) (a, z compute.Tensor) {
	cw := width
	if overlap {
		cw = 2 * width
	}
	return m.be.Scratch(compute.F32, st.T, cw), m.be.Scratch(compute.F32, st.T, cw)
}

// kvProducts queues, in the pass's products of x, kv = wkv·x and the
// compressor's values and scores (ca, cz) when the layer has one.
func (m *Model) kvProducts(A *rAttention, kv, ca, cz compute.Tensor) {
	m.args.mm.add(kv, A.wkv)
	if A.comp != nil {
		m.args.mm.add(ca, A.comp.wkv)
		m.args.mm.add(cz, A.comp.wgate)
	}
}

// indexerProducts queues the indexer's products of x, when the layer has
// one: its compressor's values and scores (ia, iz) and the head weights
// wt = weights_proj·x.
func (m *Model) indexerProducts(A *rAttention, ia, iz, wt compute.Tensor) {
	if Ix := A.indexer; Ix != nil {
		m.args.mm.add(ia, Ix.comp.wkv)
		m.args.mm.add(iz, Ix.comp.wgate)
		m.args.mm.add(wt, Ix.weightsProj)
	}
}

// compress runs one compressor (spec §3, "Compressor") over every span,
// from each token's values a = wkv·x and scores z = wgate·x
// (compressProducts): the backend adds the positional bias, emits the
// entry of every window that closes inside the span and keeps in the ring
// what later windows need. An overlapping compressor (CSA) is 2·width
// wide: the first half (Ca) of a token feeds the next window's entry, the
// second half (Cb) its own.
func (m *Model) compress(a, z compute.Tensor, c *rCompressor, width int, overlap bool, rate int, entries, ring compute.Paged, st *step) {
	be := m.be
	args := &m.args.comp
	*args = compute.CompressArgs{
		A: a, Z: z, Ape: c.ape, Norm: c.norm, Width: width, Rate: rate, Overlap: overlap,
		Entries: entries, Ring: ring, InvFreq: m.rope.compress, Eps: float32(m.Cfg.RMSEps),
	}
	be.Compress(args, st.spans)
}

// products are the matrix products of one input a layer queues together
// (matMuls runs them), kept in the model so that a step allocates nothing.
type products struct {
	ys [8]compute.Tensor
	ws [8]*compute.Matrix
	n  int
}

func (p *products) add(y compute.Tensor, w *compute.Matrix) {
	p.ys[p.n], p.ws[p.n] = y, w
	p.n++
}

// matMuls runs the queued products of x, in one call where the backend
// takes several (compute.MultiMatMul: the same values), and empties the
// queue.
func (m *Model) matMuls(x compute.Tensor) {
	p := &m.args.mm
	if f := m.multi; f != nil {
		f.MatMuls(p.ys[:p.n], x, p.ws[:p.n])
	} else {
		for i := range p.n {
			m.be.MatMul(p.ys[i], x, p.ws[i])
		}
	}
	clear(p.ys[:p.n])
	clear(p.ws[:p.n])
	p.n = 0
}
