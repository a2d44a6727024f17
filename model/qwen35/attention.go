package qwen35

import (
	"math"

	"github.com/strata-inference/strata/compute"
)

// attention is a gated full-attention layer's token mixer on the normed
// input h [T, D] (spec §3), over every span's keys and values in kv:
//
//	[q_h | gate_h] = (q_proj h) per head;  q = RoPE(q_norm(q));  k = RoPE(k_norm(k_proj h));  v = v_proj h
//	o = softmax(q·kᵀ/√d + causal) v   (GQA);   out = o_proj(o ⊙ sigmoid(gate))
//
// RoPE on the first RopeDim channels of each head, rotate-half.
func (m *Model) attention(w *rAttention, kv compute.Paged, h compute.Tensor, st *step) compute.Tensor {
	be, cfg := m.be, m.Cfg
	T, Hq, Hkv, d := st.T, cfg.Heads, cfg.KVHeads, cfg.HeadDim
	eps := float32(cfg.RMSEps)
	pos := st.spans.Pos

	qg := be.Scratch(compute.F32, T, Hq*2*d)
	be.MatMul(qg, h, w.qProj)
	q := be.Scratch(compute.F32, T, Hq*d)
	gate := be.Scratch(compute.F32, T, Hq*d)
	be.SplitHalves(q, gate, qg, d)
	k := be.Scratch(compute.F32, T, Hkv*d)
	be.MatMul(k, h, w.kProj)
	v := be.Scratch(compute.F32, T, Hkv*d)
	be.MatMul(v, h, w.vProj)

	qh, kh := q.Reshape(T*Hq, d), k.Reshape(T*Hkv, d)
	be.RMSNorm(qh, qh, w.qNorm, eps)
	be.RMSNorm(kh, kh, w.kNorm, eps)
	be.RoPEHalf(qh, pos, Hq, m.w.invFreq)
	be.RoPEHalf(kh, pos, Hkv, m.w.invFreq)

	o := be.Scratch(compute.F32, T, Hq*d)
	be.CausalAttention(&compute.CausalArgs{
		Out: o, Q: q, K: k, V: v, KV: kv,
		Heads: Hq, KVHeads: Hkv, Dim: d, Scale: float32(1 / math.Sqrt(float64(d))),
	}, st.spans)
	be.MulSigmoid(o, gate)
	out := be.Scratch(compute.F32, T, cfg.Hidden)
	be.MatMul(out, o, w.oProj)
	return out
}
