package qwen35

import "github.com/strata-inference/strata/compute"

// deltaNet is a Gated DeltaNet layer's token mixer on the normed input h
// [T, D] (spec §4), continuing every span from its conv and delta-rule
// state:
//
//	[q | k | v] = silu(causal conv(in_proj_qkv h));  z = in_proj_z h
//	β = sigmoid(in_proj_b h);  g = −exp(A_log)·softplus(in_proj_a h + dt_bias)
//	o = gated delta rule(q̂, k̂, v, g, β);  out = out_proj(RMSNorm_w(o) ⊙ silu(z))
func (m *Model) deltaNet(w *rDeltaNet, delta, conv compute.Paged, h compute.Tensor, st *step) compute.Tensor {
	be, cfg := m.be, m.Cfg
	T, C := st.T, cfg.ConvDim()
	Hv, dv := cfg.LinValueHeads, cfg.LinValueDim

	qkv := be.Scratch(compute.F32, T, C)
	be.MatMul(qkv, h, w.inQKV)
	z := be.Scratch(compute.F32, T, cfg.ValueDim())
	be.MatMul(z, h, w.inZ)
	bb := be.Scratch(compute.F32, T, Hv)
	be.MatMul(bb, h, w.inB)
	aa := be.Scratch(compute.F32, T, Hv)
	be.MatMul(aa, h, w.inA)

	// With one tap the conv keeps no history (conv is then the zero Paged).
	mixed := be.Scratch(compute.F32, T, C)
	be.CausalConv(&compute.ConvArgs{Y: mixed, X: qkv, W: w.conv, State: conv, SiLU: true}, st.spans)
	o := be.Scratch(compute.F32, T, cfg.ValueDim())
	args := &compute.DeltaArgs{
		Out: o, QKV: mixed, A: aa, B: bb, NegA: w.negA, DtBias: w.dtBias, State: delta,
		Hk: cfg.LinKeyHeads, Hv: Hv, Dk: cfg.LinKeyDim, Dv: dv,
	}
	if m.chunked {
		be.DeltaRuleChunked(args, st.spans, DeltaChunk)
	} else {
		be.DeltaRule(args, st.spans)
	}
	on := o.Reshape(T*Hv, dv)
	be.GatedRMSNorm(on, on, z.Reshape(T*Hv, dv), w.norm, float32(cfg.RMSEps))
	out := be.Scratch(compute.F32, T, cfg.Hidden)
	be.MatMul(out, o, w.outProj)
	return out
}
