package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// RoPEHalf implements compute.Causal. Work items are blocks of rows; each
// worker keeps the cosines and sines of the last position it rotated
// (consecutive rows are usually a token's heads).
func (b *Backend) RoPEHalf(x, pos compute.Tensor, heads int, invFreq compute.Tensor) {
	p, inv, xv := I32(pos), F32(invFreq), F32(x)
	R, n := 2*len(inv), x.Cols
	if heads <= 0 || len(p)*heads < x.Rows {
		panic(fmt.Sprintf("cpu: RoPEHalf has %d positions of %d heads for %d rows", len(p), heads, x.Rows))
	}
	if R > n {
		panic(fmt.Sprintf("cpu: RoPEHalf rotates %d channels of rows of width %d", R, n))
	}
	const rows = 64
	type angles struct {
		cos, sin []float32
		pos      int32
		valid    bool
	}
	tabs := newPerWorker(b.s, func() *angles {
		return &angles{cos: make([]float32, len(inv)), sin: make([]float32, len(inv))}
	})
	half := len(inv)
	b.s.forItems((x.Rows+rows-1)/rows, func(worker, it int) {
		a := tabs.get(worker)
		for r := it * rows; r < min(x.Rows, (it+1)*rows); r++ {
			q := p[r/heads]
			if !a.valid || a.pos != q {
				pf := float32(q)
				for i, f := range inv {
					s, c := math.Sincos(float64(pf * f))
					a.cos[i], a.sin[i] = float32(c), float32(s)
				}
				a.pos, a.valid = q, true
			}
			row := xv[r*n : r*n+R]
			for j := range half {
				c, s := a.cos[j], a.sin[j]
				u, v := row[j], row[half+j]
				row[j] = float32(u*c) - float32(v*s)
				row[half+j] = float32(v*c) + float32(u*s)
			}
		}
	})
}

// CausalAttention implements compute.Causal. This step's keys and values
// are written into their slots first; then work items are (token, KV
// head) pairs, each reading the head's keys and values of positions
// 0..pos once for the query heads that share them.
func (b *Backend) CausalAttention(a *compute.CausalArgs, sp compute.Spans) {
	H, Hkv, d := a.Heads, a.KVHeads, a.Dim
	T := a.Q.Rows
	if Hkv <= 0 || H%Hkv != 0 || d <= 0 {
		panic(fmt.Sprintf("cpu: CausalAttention: %d query heads, %d KV heads of %d", H, Hkv, d))
	}
	kvw := Hkv * d
	checkShape("CausalAttention Q", a.Q, T, H*d)
	checkShape("CausalAttention Out", a.Out, T, H*d)
	checkShape("CausalAttention K", a.K, T, kvw)
	checkShape("CausalAttention V", a.V, T, kvw)
	if a.KV.Width != 2*kvw {
		panic(fmt.Sprintf("cpu: CausalAttention: KV slots of %d values, want %d", a.KV.Width, 2*kvw))
	}
	Q, K, V, O, pos := F32(a.Q), F32(a.K), F32(a.V), F32(a.Out), I32(sp.Pos)
	spans := spansOf(sp)
	span := make([]int, T) // each token's span
	kv := make([]float32, 2*kvw)
	for si, s := range spans {
		sl := spanSlots(a.KV, si)
		for t := s.start; t < s.start+s.n; t++ {
			span[t] = si
			copy(kv[:kvw], K[t*kvw:(t+1)*kvw])
			copy(kv[kvw:], V[t*kvw:(t+1)*kvw])
			sl.write(int(pos[t]), kv)
		}
	}
	group := H / Hkv
	type work struct {
		scores, keys, vals []float32
		kl, vl             [][]float32
	}
	works := newPerWorker(b.s, func() *work { return &work{} })
	b.s.forItems(T*Hkv, func(worker, it int) {
		t, g := it/Hkv, it%Hkv
		n := int(pos[t]) + 1
		sl := spanSlots(a.KV, span[t])
		w := works.get(worker)
		w.scores = grow(w.scores, group*n)
		// The head's keys and values, in place for f32 slots.
		keys, vals := w.kl[:0], w.vl[:0]
		defer func() { w.kl, w.vl = keys[:0], vals[:0] }()
		if sl.format == compute.SlotF32 {
			for p := range n {
				s := sl.slot(p)
				keys = append(keys, s[g*d:(g+1)*d])
				vals = append(vals, s[kvw+g*d:kvw+(g+1)*d])
			}
		} else {
			w.keys, w.vals = grow(w.keys, n*d), grow(w.vals, n*d)
			for p := range n {
				keys = append(keys, sl.slotRange(p, g*d, (g+1)*d, w.keys[p*d:(p+1)*d]))
				vals = append(vals, sl.slotRange(p, kvw+g*d, kvw+(g+1)*d, w.vals[p*d:(p+1)*d]))
			}
		}
		for i := range group {
			h := g*group + i
			qh := Q[(t*H+h)*d : (t*H+h+1)*d]
			s := w.scores[i*n : (i+1)*n]
			for p, k := range keys {
				s[p] = dot(qh, k) * a.Scale
			}
			softmax(s)
			oh := O[(t*H+h)*d : (t*H+h+1)*d]
			clear(oh)
			for p, v := range vals {
				axpy(oh, s[p], v)
			}
		}
	})
}
