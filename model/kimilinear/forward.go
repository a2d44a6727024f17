package kimilinear

import (
	"context"
	"fmt"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
)

// qkNormEps is the eps of kv_a_layernorm and q_a_layernorm (1e-6 whatever
// rms_norm_eps is).
const qkNormEps = 1e-6

// Forward runs one step over a ragged batch (spec §2): every span continues
// its sequence at position Seq.Len(), every matmul runs once over all
// tokens, the convolution and the delta rule read and overwrite each
// sequence's state in its cache slots, and MLA appends each token's latent.
// It returns the logits the spans ask for, LogitRows(b) rows of VocabSize,
// in span order, and advances each sequence by its span's length.
//
// The delta rule runs token by token on every path (compute.KDA), so that
// a token's logits are the same bits however its sequence was split into
// steps and whatever shares its batch: prefill, decode, chunked, batched,
// restored from a snapshot or refed after a rolled-back speculation. (The
// reference runs prompts in the chunked form; its paths agree with the
// recurrence to 7e-6.)
//
// Forward reserves the pages the spans need first and fails without
// touching any cache when the pool is short. If ctx is cancelled mid-step
// the states of the batch's sequences are left inconsistent: release them.
func (m *Model) Forward(ctx context.Context, b *model.Batch) ([]float32, error) {
	if err := m.validate(b); err != nil {
		return nil, err
	}
	for i, s := range b.Spans {
		if err := s.Seq.Reserve(s.Seq.Len() + s.Len); err != nil {
			return nil, fmt.Errorf("kimilinear: span %d: %w", i, err)
		}
	}
	be, cfg := m.be, m.Cfg
	be.ResetScratch(0)
	st, err := m.newStep(b)
	if err != nil {
		return nil, err
	}
	x := be.Scratch(compute.F32, st.T, cfg.Hidden)
	be.Embed(x, m.w.embed, st.tokens, 1)
	base := be.ScratchMark()
	for l := range m.w.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.layer(&m.w.layers[l], m.layout.layers[l], x, st)
		be.ResetScratch(base)
	}
	logits, err := m.head(x, st)
	if err != nil {
		return nil, err
	}
	for _, s := range b.Spans {
		s.Seq.Advance(s.Len)
	}
	return logits, nil
}

// layer runs decoder layer L on the residual stream x [T, D] in place:
// x += mixer(norm(x)); x += ffn(norm(x)).
func (m *Model) layer(L *rLayer, refs layerRefs, x compute.Tensor, st *step) {
	be, cfg := m.be, m.Cfg
	eps := float32(cfg.RMSEps)
	h := be.Scratch(compute.F32, st.T, cfg.Hidden)
	be.RMSNorm(h, x, L.inputNorm, eps)
	var y compute.Tensor
	if L.kind == KDA {
		y = m.kda(L.kda, st.kind(refs.state), st.kind(refs.conv), h, st)
	} else {
		y = m.mla(L.mla, st.kind(refs.mla), h, st)
	}
	be.AddRepeated(x, y, 1)
	be.RMSNorm(h, x, L.postNorm, eps)
	y = be.Scratch(compute.F32, st.T, cfg.Hidden)
	if L.dense != nil {
		m.ops.SwiGLU(y, h, L.dense)
	} else {
		m.ops.RoutedMoE(y, h, st.tokens, L.moe, m.routing)
	}
	be.AddRepeated(x, y, 1)
}

// kda is a KDA layer's token mixer on the normed input h [T, D] (spec §4),
// continuing every span from its conv and delta-rule state:
//
//	[q | k | v] = silu(causal conv([q_proj | k_proj | v_proj] h))
//	g = −exp(A_log)·softplus(f_b(f_a h) + dt_bias)  (per channel);  β = sigmoid(b_proj h)
//	o = per-channel gated delta rule(q̂, k̂, v, g, β)
//	out = o_proj(RMSNorm_o_norm(o) ⊙ sigmoid(g_b(g_a h)))   (the norm per head)
func (m *Model) kda(w *rKDA, state, conv compute.Paged, h compute.Tensor, st *step) compute.Tensor {
	be, cfg := m.be, m.Cfg
	T, n, Hl, dk := st.T, cfg.LinDim(), cfg.LinHeads, cfg.LinHeadDim

	qkv := be.Scratch(compute.F32, T, 3*n)
	be.MatMul(qkv, h, w.qkv)
	mixed := be.Scratch(compute.F32, T, 3*n)
	// With one tap the conv keeps no history (conv is then the zero Paged).
	m.ops.CausalConv(&compute.ConvArgs{Y: mixed, X: qkv, W: w.conv, State: conv, SiLU: true}, st.spans)

	fa := be.Scratch(compute.F32, T, dk)
	be.MatMul(fa, h, w.fa)
	a := be.Scratch(compute.F32, T, n)
	be.MatMul(a, fa, w.fb)
	bb := be.Scratch(compute.F32, T, Hl)
	be.MatMul(bb, h, w.bProj)

	o := be.Scratch(compute.F32, T, n)
	m.ops.KDARule(&compute.KDAArgs{
		Out: o, QKV: mixed, A: a, B: bb, NegA: w.negA, DtBias: w.dtBias, State: state,
		H: Hl, Dk: dk, Dv: dk,
	}, st.spans)

	ga := be.Scratch(compute.F32, T, dk)
	be.MatMul(ga, h, w.ga)
	gate := be.Scratch(compute.F32, T, n)
	be.MatMul(gate, ga, w.gb)
	on := o.Reshape(T*Hl, dk)
	be.RMSNorm(on, on, w.norm, float32(cfg.RMSEps))
	m.ops.MulSigmoid(o, gate)
	out := be.Scratch(compute.F32, T, cfg.Hidden)
	be.MatMul(out, o, w.oProj)
	return out
}

// mla is an MLA layer's token mixer on the normed input h [T, D] (spec
// §3), in the absorbed form over the cached [latent | k_pe] of every
// position, with nothing rotated:
//
//	Q = q_proj h viewed [H, n + r];  [lat | k_pe] = kv_a_proj_with_mqa h;  lat = RMSNorm(lat)
//	Q_h·K_h = (W_kb,hᵀ q_nope_h)·lat + q_pe_h·k_pe;  o_h = W_vb,h Σ p·lat;  out = o_proj o
func (m *Model) mla(w *rMLA, kv compute.Paged, h compute.Tensor, st *step) compute.Tensor {
	be, cfg := m.be, m.Cfg
	T, H := st.T, cfg.Heads
	c, n, r, dv := cfg.KVLoraRank, cfg.NopeDim, cfg.RopeDim, cfg.VDim

	Q := be.Scratch(compute.F32, T, H*(n+r))
	if w.q != nil {
		be.MatMul(Q, h, w.q)
	} else {
		cq := be.Scratch(compute.F32, T, cfg.QLoraRank)
		be.MatMul(cq, h, w.qA)
		be.RMSNorm(cq, cq, w.qANorm, qkNormEps)
		be.MatMul(Q, cq, w.qB)
	}
	lat := be.Scratch(compute.F32, T, c)
	be.MatMul(lat, h, w.kvLat)
	be.RMSNorm(lat, lat, w.kvANorm, qkNormEps)
	kpe := be.Scratch(compute.F32, T, r)
	be.MatMul(kpe, h, w.kvRope)

	qlat := be.Scratch(compute.F32, T, H*c)
	m.ops.HeadMatMul(qlat, Q, w.wkbT)
	out := be.Scratch(compute.F32, T, H*c)
	m.ops.LatentAttention(&compute.LatentArgs{
		Out: out, QLat: qlat, Q: Q, Lat: lat, KRope: kpe, KV: kv,
		Heads: H, Latent: c, Rope: r, Scale: float32(cfg.SoftmaxScale()),
	}, st.spans)
	o := be.Scratch(compute.F32, T, H*dv)
	be.GroupedMatMul(o, out, w.wvb)
	y := be.Scratch(compute.F32, T, cfg.Hidden)
	be.MatMul(y, o, w.o)
	return y
}

// head computes the logits of the rows the spans ask for: the final
// RMSNorm and lm_head.
func (m *Model) head(x compute.Tensor, st *step) ([]float32, error) {
	be, cfg := m.be, m.Cfg
	if st.R == 0 {
		return nil, be.Sync()
	}
	sel := be.Scratch(compute.F32, st.R, cfg.Hidden)
	be.GatherRows(sel, x, st.rows)
	be.RMSNorm(sel, sel, m.w.norm, float32(cfg.RMSEps))
	out := be.Scratch(compute.F32, st.R, cfg.VocabSize)
	be.MatMul(out, sel, m.w.output)
	logits := make([]float32, st.R*cfg.VocabSize)
	if err := be.Read(logits, out); err != nil {
		return nil, err
	}
	return logits, nil
}

// validate checks the batch before anything is computed or cached.
func (m *Model) validate(b *model.Batch) error {
	if len(b.Spans) == 0 {
		return fmt.Errorf("kimilinear: a batch with no spans")
	}
	covered := 0
	seen := map[any]bool{}
	for i, s := range b.Spans {
		switch {
		case s.Seq == nil:
			return fmt.Errorf("kimilinear: span %d has no sequence", i)
		case s.Draft != nil:
			return fmt.Errorf("kimilinear: span %d carries a draft state, but the model has no draft head", i)
		case seen[s.Seq]:
			return fmt.Errorf("kimilinear: span %d: sequence appears twice in one batch", i)
		case s.Len <= 0 || s.Start != covered || s.Start+s.Len > len(b.Tokens):
			return fmt.Errorf("kimilinear: span %d covers tokens [%d,%d) of %d; spans must tile the batch in order", i, s.Start, s.Start+s.Len, len(b.Tokens))
		case s.Seq.Len()+s.Len > m.Cfg.MaxPosition:
			return fmt.Errorf("kimilinear: span %d reaches position %d, beyond the model's %d", i, s.Seq.Len()+s.Len, m.Cfg.MaxPosition)
		}
		seen[s.Seq] = true
		covered += s.Len
	}
	if covered != len(b.Tokens) {
		return fmt.Errorf("kimilinear: spans cover %d of %d tokens", covered, len(b.Tokens))
	}
	for i, t := range b.Tokens {
		if t < 0 || int(t) >= m.Cfg.VocabSize {
			return fmt.Errorf("kimilinear: token %d at batch index %d is outside the vocabulary of %d", t, i, m.Cfg.VocabSize)
		}
	}
	return nil
}
