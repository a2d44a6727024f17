package dsa

import (
	"github.com/strata-inference/strata/compute"
)

// qkNormEps is the eps of q_a_layernorm and kv_a_layernorm (1e-6 whatever
// rms_norm_eps is), and of the indexer's key LayerNorm.
const qkNormEps = 1e-6

// attention runs a layer's MLA on x [T, D] (the input_layernorm output)
// and returns its output [T, D] (spec §4). Every key is the cached
// [latent | k_pe] of a position; the DSA selection sel/cnt restricts each
// token to its top-k positions. A full layer computes the selection into
// sel/cnt first (spec §5); a shared layer reads the one its closest
// earlier full layer left there.
func (m *Model) attention(A *rAttention, l int, x compute.Tensor, st *step, sel, cnt compute.Tensor) compute.Tensor {
	be, cfg := m.be, m.Cfg
	T, D, H := st.T, cfg.Hidden, cfg.Heads
	q, c, n, r, dv := cfg.QLoraRank, cfg.KVLoraRank, cfg.NopeDim, cfg.RopeDim, cfg.VDim
	pos := st.spans.Pos

	// cq = RMSNorm_q_a(q_a_proj x), which also feeds the indexer.
	cq := be.Scratch(compute.F32, T, q)
	be.MatMul(cq, x, A.qA)
	be.RMSNorm(cq, cq, A.qANorm, qkNormEps)
	// Q = q_b_proj cq viewed [H, n+r] = [q_nope | q_pe]; q_pe rotated
	// (interleaved pairs of the last r channels of each head).
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
		KV: st.paged[specMLA][m.layout.latent[l]], Sel: sel, N: cnt,
		Heads: H, Latent: c, Rope: r, Scale: float32(cfg.SoftmaxScale()),
	}, st.spans)
	o := be.Scratch(compute.F32, T, H*dv)
	be.GroupedMatMul(o, out, A.wvb)
	y := be.Scratch(compute.F32, T, D)
	be.MatMul(y, o, A.o)
	return y
}

// indexerSelect runs a full layer's lightning indexer (spec §5): it caches
// this step's keys ki = RoPE(LayerNorm(wk x)), then scores every cached
// key t ≤ position for every token, I[t] = Σ_h w_h·Hi^(-1/2)·relu(qi_h·ki_t
// ·di^(-1/2)) with qi = RoPE(wq_b cq) and w = weights_proj x, and writes
// the top index_topk positions (all of them while there are no more) into
// sel, their count into cnt. RoPE covers the first r channels of qi and
// ki, paired as the family pairs them.
func (m *Model) indexerSelect(I *rIndexer, l int, x, cq compute.Tensor, st *step, sel, cnt compute.Tensor) {
	be, cfg := m.be, m.Cfg
	T, Hi, di := st.T, cfg.IndexHeads, cfg.IndexDim
	pos := st.spans.Pos
	half := cfg.IndexerRope == Half

	qi := be.Scratch(compute.F32, T, Hi*di)
	be.MatMul(qi, cq, I.wqB)
	m.mla.RoPELeading(qi.Reshape(T*Hi, di), pos, Hi, m.invFreq, half)
	ki := be.Scratch(compute.F32, T, di)
	be.MatMul(ki, x, I.wk)
	m.mla.LayerNorm(ki, ki, I.kNorm, I.kBias, qkNormEps)
	m.mla.RoPELeading(ki, pos, 1, m.invFreq, half)
	keys := st.paged[specIndexer][m.layout.keys[l]]
	// One key per position, written once: a ring longer than any sequence.
	be.StoreRing(keys, cfg.MaxPosition, ki, st.spans)

	w := be.Scratch(compute.F32, T, Hi)
	be.MatMul(w, x, I.weightsProj)
	be.IndexerSelect(&compute.IndexerArgs{Q: qi, W: w, Keys: keys, Heads: Hi, Dim: di, Rate: 1, TopK: cfg.IndexTopK, Sel: sel, N: cnt}, st.spans)
}
