package gemma4

import (
	"github.com/strata-inference/strata/compute"
)

// attention runs layer l's attention on x [T, D] (the input norm's output)
// and returns o_proj of its output, [T, D] (spec §4):
//
//	q   = RoPE(RMSNorm_q_norm(q_proj x))                 per query head
//	raw = k_proj x;  k = RoPE(RMSNorm_k_norm(raw))      per KV head
//	v   = RMSNorm_noweight(v_proj x), or of raw with K=V
//	o   = softmax(q·kᵀ · 1.0 + mask) v
//
// A non-shared layer computes its keys and values and stores them in its
// cache once the last layer reading them has run; a KV-shared layer reads
// its source's (this step's from kept, earlier ones from the source's
// cache). With K=V the cache holds v alone and the op derives the keys.
func (m *Model) attention(l int, x compute.Tensor, st *step, kept []stepKV, keyRope compute.Tensor) compute.Tensor {
	be, cfg := m.be, m.Cfg
	spec := cfg.Layers[l]
	A := &m.w.layers[l].attn
	T, Hq, dl, Hl := st.T, cfg.Heads, spec.HeadDim, spec.KVHeads
	eps := float32(cfg.RMSEps)
	pos := st.spans.Pos
	inv := m.w.invFreq[spec.Kind]

	q := be.Scratch(compute.F32, T, Hq*dl)
	be.MatMul(q, x, A.q)
	qh := q.Reshape(T*Hq, dl)
	be.RMSNorm(qh, qh, A.qNorm, eps)
	be.RoPESplit(qh, pos, Hq, inv)

	src := spec.Source
	kv := kept[src]
	if !spec.Shared {
		if !kv.v.Valid() {
			kv = m.newStepKV(spec, T)
		}
		m.keysValues(A, spec, x, kv, st)
	}
	srcA := &m.w.layers[src].attn
	args := compute.SharedKVArgs{
		Out: be.Scratch(compute.F32, T, Hq*dl), Q: q, K: kv.k, V: kv.v,
		Cache: st.cacheOf(m.layout, l), Heads: Hq, KVHeads: Hl, Dim: dl, Scale: 1,
	}
	if spec.Kind == Sliding {
		args.Window = cfg.Window
	}
	if spec.KEqV {
		args.KFromV, args.KNorm, args.KeyRope = true, srcA.kNorm, keyRope
	}
	be.SharedKVAttention(&args, st.spans)
	if m.lastReader[src] == l {
		be.StoreKV(args.Cache, args.Window, kv.k, kv.v, st.spans)
	}
	y := be.Scratch(compute.F32, T, cfg.Hidden)
	be.MatMul(y, args.Out, A.o)
	return y
}

// keysValues computes a non-shared layer's keys and values into kv, as
// the cache will give them back (through its format, so that this step
// attends to what later steps will read).
func (m *Model) keysValues(A *rAttention, spec Layer, x compute.Tensor, kv stepKV, st *step) {
	be := m.be
	T, dl, Hl := st.T, spec.HeadDim, spec.KVHeads
	eps := float32(m.Cfg.RMSEps)
	raw := be.Scratch(compute.F32, T, Hl*dl)
	be.MatMul(raw, x, A.k)
	rh := raw.Reshape(T*Hl, dl)
	vh := kv.v.Reshape(T*Hl, dl)
	if spec.KEqV {
		be.RMSNorm(vh, rh, compute.Tensor{}, eps)
	} else {
		kh := kv.k.Reshape(T*Hl, dl)
		be.RMSNorm(kh, rh, A.kNorm, eps)
		be.RoPESplit(kh, st.spans.Pos, Hl, m.w.invFreq[spec.Kind])
		be.MatMul(raw, x, A.v)
		be.RMSNorm(vh, rh, compute.Tensor{}, eps)
	}
	if f := m.layout.format; f != compute.SlotF32 {
		if kv.k.Valid() {
			be.RoundTrip(kv.k, kv.k, f, 0)
		}
		be.RoundTrip(kv.v, kv.v, f, 0)
	}
}
