package gemma4

import (
	"context"
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
)

// Forward runs one step over a ragged batch: every span continues its
// sequence at position Seq.Len(), every matmul runs once over all tokens,
// and each sequence's cache is read and updated in place. It returns the
// logits the spans ask for, LogitRows(b) rows of VocabSize, in span order,
// and advances each sequence by its span's length.
//
// Forward reserves the pages the spans need first and fails without
// touching any cache when the pool is short. If ctx is cancelled mid-step
// the caches of the batch's sequences are left inconsistent: release them.
func (m *Model) Forward(ctx context.Context, b *model.Batch) ([]float32, error) {
	if err := m.validate(b); err != nil {
		return nil, err
	}
	for i, s := range b.Spans {
		if err := s.Seq.Reserve(s.Seq.Len() + s.Len); err != nil {
			return nil, fmt.Errorf("gemma4: span %d: %w", i, err)
		}
	}
	be, cfg := m.be, m.Cfg
	be.ResetScratch(0)
	st, err := m.newStep(b)
	if err != nil {
		return nil, err
	}
	var keyRope compute.Tensor
	if cfg.Rope[Full].Pairs > 0 && m.anyKEqV() {
		if keyRope, err = m.keyRopeFor(st.maxPos + 1); err != nil {
			return nil, err
		}
	}
	T, D := st.T, cfg.Hidden

	// h0 = embed_tokens[id] · sqrt(D).
	h := be.Scratch(compute.F32, T, D)
	be.Embed(h, m.w.embed, st.tokens, 1)
	be.MulScalar(h, m.w.embedScale)
	var ple compute.Tensor
	if cfg.PLE > 0 {
		ple = m.perLayerInputs(h, st)
	}
	// The keys and values of layers that later KV-shared layers read live
	// for the whole step: the ring is written only after its last reader.
	kept := make([]stepKV, len(cfg.Layers))
	for l, spec := range cfg.Layers {
		if !spec.Shared && m.lastReader[l] > l {
			kept[l] = m.newStepKV(spec, T)
		}
	}
	base := be.ScratchMark()
	for l := range cfg.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.layer(l, h, ple, st, kept, keyRope)
		be.ResetScratch(base)
	}
	logits, err := m.head(h, st)
	if err != nil {
		return nil, err
	}
	for _, s := range b.Spans {
		s.Seq.Advance(s.Len)
	}
	return logits, nil
}

func (m *Model) anyKEqV() bool {
	for _, l := range m.Cfg.Layers {
		if l.KEqV {
			return true
		}
	}
	return false
}

// stepKV is a layer's keys and values of this step's tokens, as its cache
// will give them back; k is the zero Tensor for K=V layers.
type stepKV struct{ k, v compute.Tensor }

func (m *Model) newStepKV(spec Layer, T int) stepKV {
	w := spec.KVHeads * spec.HeadDim
	kv := stepKV{v: m.be.Scratch(compute.F32, T, w)}
	if !spec.KEqV {
		kv.k = m.be.Scratch(compute.F32, T, w)
	}
	return kv
}

// perLayerInputs computes every layer's per-layer input (spec §2) and
// returns them layer-major, [L·T, P]: rows i·T .. i·T+T-1 are layer i's.
//
//	tok = embed_tokens_per_layer[id] · sqrt(P)
//	ctx = RMSNorm_per_layer_projection_norm((per_layer_model_projection · h0) · D^(−1/2))  (over each P)
//	ple = (ctx + tok) · 2^(−1/2)
func (m *Model) perLayerInputs(h0 compute.Tensor, st *step) compute.Tensor {
	be, cfg := m.be, m.Cfg
	T, L, P := st.T, len(cfg.Layers), cfg.PLE
	ctx := be.Scratch(compute.F32, T, L*P)
	be.MatMul(ctx, h0, m.w.pleProj)
	be.MulScalar(ctx, float32(1/math.Sqrt(float64(cfg.Hidden))))
	rows := ctx.Reshape(T*L, P)
	be.RMSNorm(rows, rows, m.w.pleNorm, float32(cfg.RMSEps))
	tok := be.Scratch(compute.F32, T, L*P)
	be.Embed(tok, m.w.pleEmbed, st.tokens, 1)
	be.MulScalar(tok, m.w.pleScale)
	be.AddRepeated(ctx, tok, 1)
	be.MulScalar(ctx, float32(1/math.Sqrt2))
	out := be.Scratch(compute.F32, L*T, P)
	be.GatherRows(out, rows, st.pleOrder)
	return out
}

// layer runs decoder layer l on the stream h [T, D] in place (spec §3).
func (m *Model) layer(l int, h, ple compute.Tensor, st *step, kept []stepKV, keyRope compute.Tensor) {
	be, cfg := m.be, m.Cfg
	L := &m.w.layers[l]
	T, D := st.T, cfg.Hidden
	eps := float32(cfg.RMSEps)

	// h = h + RMSNorm_post_attention(Attn(RMSNorm_input(h)))
	x := be.Scratch(compute.F32, T, D)
	be.RMSNorm(x, h, L.inputNorm, eps)
	a := m.attention(l, x, st, kept, keyRope)
	be.RMSNorm(a, a, L.postAttnNorm, eps)
	be.AddRepeated(h, a, 1)

	// h = h + RMSNorm_post_feedforward(MLP(RMSNorm_pre_feedforward(h)) [+ experts])
	f := m.feedForward(L, h, T)
	be.RMSNorm(f, f, L.postFFNorm, eps)
	be.AddRepeated(h, f, 1)

	// h = h + RMSNorm_post_per_layer_input(per_layer_projection(gelu(per_layer_input_gate·h) ⊙ ple[l]))
	if L.ple != nil {
		P := cfg.PLE
		g := be.Scratch(compute.F32, T, P)
		be.MatMul(g, h, L.ple.gate)
		be.GeluMul(g, g, ple.Slice(l*T, (l+1)*T))
		p := be.Scratch(compute.F32, T, D)
		be.MatMul(p, g, L.ple.proj)
		be.RMSNorm(p, p, L.ple.norm, eps)
		be.AddRepeated(h, p, 1)
	}
	if L.scalar != 1 {
		be.MulScalar(h, L.scalar)
	}
}

// feedForward computes the dense MLP of the stream h and, with experts,
// adds the routed experts' output (spec §3, §5); it returns [T, D] before
// the post-feedforward norm.
func (m *Model) feedForward(L *rLayer, h compute.Tensor, T int) compute.Tensor {
	be, cfg := m.be, m.Cfg
	D := cfg.Hidden
	eps := float32(cfg.RMSEps)
	x := be.Scratch(compute.F32, T, D)
	be.RMSNorm(x, h, L.preFFNorm, eps)
	I := L.gate.Rows
	g := be.Scratch(compute.F32, T, I)
	u := be.Scratch(compute.F32, T, I)
	be.MatMul(g, x, L.gate)
	be.MatMul(u, x, L.up)
	be.GeluMul(g, g, u)
	y := be.Scratch(compute.F32, T, D)
	be.MatMul(y, g, L.down)
	if e := L.moe; e != nil {
		be.RMSNorm(y, y, e.postNorm1, eps)
		// Router, on the stream itself: softmax(proj · RMSNorm(h)·scale·D^(−1/2)).
		xr := be.Scratch(compute.F32, T, D)
		be.RMSNorm(xr, h, e.routerNorm, eps)
		logits := be.Scratch(compute.F32, T, e.proj.Rows)
		be.MatMul(logits, xr, e.proj)
		xe := be.Scratch(compute.F32, T, D)
		be.RMSNorm(xe, h, e.preNorm2, eps)
		ye := be.Scratch(compute.F32, T, D)
		be.GeluExperts(ye, xe, logits, &e.args)
		be.RMSNorm(ye, ye, e.postNorm2, eps)
		be.AddRepeated(y, ye, 1)
	}
	return y
}

// head computes the logits of the rows the spans ask for: final norm,
// the output projection (the embedding when tied), and the cap.
func (m *Model) head(h compute.Tensor, st *step) ([]float32, error) {
	be, cfg := m.be, m.Cfg
	R := st.R
	if R == 0 {
		return nil, be.Sync()
	}
	x := be.Scratch(compute.F32, R, cfg.Hidden)
	be.GatherRows(x, h, st.rows)
	be.RMSNorm(x, x, m.w.norm, float32(cfg.RMSEps))
	out := be.Scratch(compute.F32, R, cfg.VocabSize)
	be.MatMul(out, x, m.w.output)
	if cfg.Softcap > 0 {
		be.TanhCap(out, float32(cfg.Softcap))
	}
	logits := make([]float32, R*cfg.VocabSize)
	if err := be.Read(logits, out); err != nil {
		return nil, err
	}
	return logits, nil
}
