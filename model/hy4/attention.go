package hy4

import (
	"github.com/strata-inference/strata/compute"
)

// qkNormEps is the eps of q_a_layernorm and kv_a_layernorm (1e-6 whatever
// rms_norm_eps is, spec §2).
const qkNormEps = 1e-6

// attention runs a layer's MLA on x [T, D] (the input_layernorm output)
// and returns its output [T, D] (spec §3). Every key is the cached
// [latent | k_pe] of a position; the DSA selection sel/cnt restricts each
// token to its top-k positions. A full layer computes the selection into
// sel/cnt first; a shared layer reads the one its closest earlier full
// layer left there. The softmax's denominator has the head's sink added;
// the output is gated per channel by sigmoid(gate_proj x) before o_proj.
//
// RoPE is rotate-half in the reference; the rows feeding every rotation
// were reordered at load (ropeOrder), so that the backend's interleaved
// RoPE on the trailing channels computes it.
func (m *Model) attention(A *rAttention, l int, x compute.Tensor, st *step, sel, cnt compute.Tensor) compute.Tensor {
	be, cfg := m.be, m.Cfg
	T, D, H := st.T, cfg.Hidden, cfg.Heads
	q, c, n, r, dv := cfg.QLoraRank, cfg.KVLoraRank, cfg.NopeDim, cfg.RopeDim, cfg.VDim
	pos := st.spans.Pos

	// cq = RMSNorm_q_a(q_a_proj x), which also feeds the indexer.
	cq := be.Scratch(compute.F32, T, q)
	be.MatMul(cq, x, A.qA)
	be.RMSNorm(cq, cq, A.qANorm, qkNormEps)
	// Q = q_b_proj cq viewed [H, n+r] = [q_nope | q_pe], q_pe rotated.
	Q := be.Scratch(compute.F32, T, H*(n+r))
	be.MatMul(Q, cq, A.qB)
	be.RoPE(Q.Reshape(T*H, n+r), pos, H, m.invFreq, false)

	// kv_a_proj_with_mqa x = [latent | k_pe]: lat = RMSNorm_kv_a(latent)
	// shared by every head; k_pe, one shared RoPE key, rotated.
	lat := be.Scratch(compute.F32, T, c)
	be.MatMul(lat, x, A.kvLat)
	be.RMSNorm(lat, lat, A.kvANorm, qkNormEps)
	kpe := be.Scratch(compute.F32, T, r)
	be.MatMul(kpe, x, A.kvRope)
	be.RoPE(kpe, pos, 1, m.invFreq, false)

	if A.indexer != nil {
		m.indexerSelect(A.indexer, l, x, cq, st, sel, cnt)
	}

	// Absorbed form: Q_h·K_h = (W_kb,hᵀ q_nope_h)·lat + q_pe_h·k_pe, and
	// o_h = W_vb,h (Σ p·lat).
	qlat := be.Scratch(compute.F32, T, H*c)
	m.mla.HeadMatMul(qlat, Q, A.wkbT)
	out := be.Scratch(compute.F32, T, H*c)
	m.mla.LatentAttention(&compute.LatentArgs{
		Out: out, QLat: qlat, Q: Q, Lat: lat, KRope: kpe,
		KV: st.paged[specMLA][l], Sel: sel, N: cnt,
		Heads: H, Latent: c, Rope: r, Scale: float32(cfg.SoftmaxScale()),
		Sink: A.sinks,
	}, st.spans)
	o := be.Scratch(compute.F32, T, H*dv)
	be.GroupedMatMul(o, out, A.wvb)
	g := be.Scratch(compute.F32, T, H*dv)
	be.MatMul(g, x, A.gate)
	m.gating.MulSigmoid(o, g)
	y := be.Scratch(compute.F32, T, D)
	be.MatMul(y, o, A.o)
	return y
}

// indexerSelect runs a full layer's lightning indexer (spec §3): it
// caches this step's keys ki = RoPE(LayerNorm(wk x)) (LayerNorm eps
// rms_norm_eps), then scores every cached key t ≤ position for every
// token, I[t] = Σ_h w_h·Hi^(-1/2)·di^(-1/2)·relu(qi_h·ki_t) with qi =
// RoPE(wq_b cq) and w = weights_proj x, and writes the top index_topk
// positions (all of them while there are no more) into sel, their count
// into cnt. RoPE covers the last r channels of qi and ki.
func (m *Model) indexerSelect(I *rIndexer, l int, x, cq compute.Tensor, st *step, sel, cnt compute.Tensor) {
	be, cfg := m.be, m.Cfg
	T, Hi, di := st.T, cfg.IndexHeads, cfg.IndexDim
	pos := st.spans.Pos

	qi := be.Scratch(compute.F32, T, Hi*di)
	be.MatMul(qi, cq, I.wqB)
	be.RoPE(qi.Reshape(T*Hi, di), pos, Hi, m.invFreq, false)
	ki := be.Scratch(compute.F32, T, di)
	be.MatMul(ki, x, I.wk)
	m.mla.LayerNorm(ki, ki, I.kNorm, I.kBias, float32(cfg.RMSEps))
	be.RoPE(ki, pos, 1, m.invFreq, false)
	keys := st.paged[specIndexer][m.layout.keys[l]]
	// One key per position, written once: a ring longer than any sequence.
	be.StoreRing(keys, cfg.MaxPosition, ki, st.spans)

	w := be.Scratch(compute.F32, T, Hi)
	be.MatMul(w, x, I.weightsProj)
	be.IndexerSelect(&compute.IndexerArgs{Q: qi, W: w, Keys: keys, Heads: Hi, Dim: di, Rate: 1, TopK: cfg.IndexTopK, Sel: sel, N: cnt}, st.spans)
}
