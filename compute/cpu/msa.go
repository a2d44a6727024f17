package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/strata-inference/strata/compute"
)

var _ compute.MSA = (*Backend)(nil)

// BlockSelect implements compute.MSA. This step's keys are written into
// their slots first; then work items are tokens, each reading its span's
// keys 0..pos once for all indexer heads.
func (b *Backend) BlockSelect(a *compute.BlockSelectArgs, sp compute.Spans) {
	H, d, B, K, Lc := a.Heads, a.Dim, a.Block, a.TopK, a.Local
	T := a.Q.Rows
	if H <= 0 || d <= 0 || B <= 0 || K <= 0 || Lc < 0 || Lc > K {
		panic(fmt.Sprintf("cpu: BlockSelect: %d heads of %d, block %d, top %d, local %d", H, d, B, K, Lc))
	}
	checkShape("BlockSelect Q", a.Q, T, H*d)
	checkShape("BlockSelect K", a.K, T, d)
	checkShape("BlockSelect Sel", a.Sel, T, H*K)
	checkShape("BlockSelect N", a.N, T, H)
	if a.Keys.Width != d {
		panic(fmt.Sprintf("cpu: BlockSelect: key slots of %d values, want %d", a.Keys.Width, d))
	}
	Q, Kv, sel, cnt, pos := F32(a.Q), F32(a.K), I32(a.Sel), I32(a.N), I32(sp.Pos)
	span := make([]int, T)
	for si, s := range spansOf(sp) {
		sl := spanSlots(a.Keys, si)
		for t := s.start; t < s.start+s.n; t++ {
			span[t] = si
			sl.write(int(pos[t]), Kv[t*d:(t+1)*d])
		}
	}
	type work struct {
		bs, buf []float32
		idx     []int32
	}
	works := newPerWorker(b.s, func() *work { return &work{buf: make([]float32, d)} })
	b.s.forItems(T, func(worker, t int) {
		p := int(pos[t])
		n, nb := p+1, p/B+1
		out := sel[t*H*K : (t+1)*H*K]
		if nb <= K {
			for h := range H {
				for i := range nb {
					out[h*K+i] = int32(i)
				}
				cnt[t*H+h] = int32(nb)
			}
			return
		}
		w := works.get(worker)
		w.bs = grow(w.bs, H*nb)
		for i := range w.bs {
			w.bs[i] = float32(math.Inf(-1))
		}
		sl := spanSlots(a.Keys, span[t])
		for j := range n {
			key := sl.read(j, d, w.buf)
			for h := range H {
				s := dot(Q[(t*H+h)*d:(t*H+h+1)*d], key)
				if v := &w.bs[h*nb+j/B]; s > *v || s != s {
					*v = s
				}
			}
		}
		if cap(w.idx) < K {
			w.idx = make([]int32, K)
		}
		idx := w.idx[:K]
		qb := p / B
		for h := range H {
			bs := w.bs[h*nb : (h+1)*nb]
			for i := range Lc {
				bs[max(0, qb-i)] = float32(math.Inf(1))
			}
			b.TopK(idx, bs, K)
			slices.Sort(idx)
			copy(out[h*K:(h+1)*K], idx)
			cnt[t*H+h] = int32(K)
		}
	})
}

// BlockSparseAttention implements compute.MSA. This step's keys and values
// are written into their slots first; then work items are (token, KV
// head) pairs, each gathering, per selection head its query heads use,
// the keys and values of the chosen blocks up to the token's position.
func (b *Backend) BlockSparseAttention(a *compute.BlockSparseArgs, sp compute.Spans) {
	H, Hkv, d, S, K, B := a.Heads, a.KVHeads, a.Dim, a.SelHeads, a.TopK, a.Block
	T := a.Q.Rows
	if Hkv <= 0 || H%Hkv != 0 || d <= 0 || S <= 0 || H%S != 0 || K <= 0 || B <= 0 {
		panic(fmt.Sprintf("cpu: BlockSparseAttention: %d query heads, %d KV heads of %d, %d selection heads of %d blocks of %d", H, Hkv, d, S, K, B))
	}
	kvw := Hkv * d
	checkShape("BlockSparseAttention Q", a.Q, T, H*d)
	checkShape("BlockSparseAttention Out", a.Out, T, H*d)
	checkShape("BlockSparseAttention K", a.K, T, kvw)
	checkShape("BlockSparseAttention V", a.V, T, kvw)
	checkShape("BlockSparseAttention Sel", a.Sel, T, S*K)
	checkShape("BlockSparseAttention N", a.N, T, S)
	if a.KV.Width != 2*kvw {
		panic(fmt.Sprintf("cpu: BlockSparseAttention: KV slots of %d values, want %d", a.KV.Width, 2*kvw))
	}
	Q, Kt, Vt, O, pos := F32(a.Q), F32(a.K), F32(a.V), F32(a.Out), I32(sp.Pos)
	sel, cnt := I32(a.Sel), I32(a.N)
	spans := spansOf(sp)
	span := make([]int, T)
	kv := make([]float32, 2*kvw)
	for si, s := range spans {
		sl := spanSlots(a.KV, si)
		for t := s.start; t < s.start+s.n; t++ {
			span[t] = si
			copy(kv[:kvw], Kt[t*kvw:(t+1)*kvw])
			copy(kv[kvw:], Vt[t*kvw:(t+1)*kvw])
			sl.write(int(pos[t]), kv)
		}
	}
	group, perSel := H/Hkv, H/S
	type work struct {
		scores, keys, vals []float32
		kl, vl             [][]float32
	}
	works := newPerWorker(b.s, func() *work { return &work{} })
	b.s.forItems(T*Hkv, func(worker, it int) {
		t, g := it/Hkv, it%Hkv
		p := int(pos[t])
		sl := spanSlots(a.KV, span[t])
		w := works.get(worker)
		keys, vals := w.kl[:0], w.vl[:0]
		defer func() { w.kl, w.vl = keys[:0], vals[:0] }()
		last := -1
		for i := range group {
			h := g*group + i
			if s := h / perSel; s != last {
				last = s
				keys, vals = keys[:0], vals[:0]
				nsel := int(cnt[t*S+s])
				if nsel < 0 || nsel > K {
					panic(fmt.Sprintf("cpu: BlockSparseAttention: token %d selects %d blocks of at most %d", t, nsel, K))
				}
				blocks := sel[t*S*K+s*K : t*S*K+s*K+nsel]
				total := 0
				for _, blk := range blocks {
					total += max(0, min(int(blk+1)*B, p+1)-int(blk)*B)
				}
				if sl.format != compute.SlotF32 {
					w.keys, w.vals = grow(w.keys, total*d), grow(w.vals, total*d)
				}
				k := 0
				for bi, blk := range blocks {
					if bi > 0 && blk <= blocks[bi-1] || blk < 0 {
						panic(fmt.Sprintf("cpu: BlockSparseAttention: token %d's blocks %v are not ascending", t, blocks))
					}
					for j := int(blk) * B; j < min(int(blk+1)*B, p+1); j++ {
						if sl.format == compute.SlotF32 {
							s := sl.slot(j)
							keys = append(keys, s[g*d:(g+1)*d])
							vals = append(vals, s[kvw+g*d:kvw+(g+1)*d])
						} else {
							keys = append(keys, sl.slotRange(j, g*d, (g+1)*d, w.keys[k*d:(k+1)*d]))
							vals = append(vals, sl.slotRange(j, kvw+g*d, kvw+(g+1)*d, w.vals[k*d:(k+1)*d]))
						}
						k++
					}
				}
			}
			w.scores = grow(w.scores, len(keys))
			qh := Q[(t*H+h)*d : (t*H+h+1)*d]
			s := w.scores[:len(keys)]
			for j, k := range keys {
				s[j] = dot(qh, k) * a.Scale
			}
			softmax(s)
			oh := O[(t*H+h)*d : (t*H+h+1)*d]
			clear(oh)
			for j, v := range vals {
				axpy(oh, s[j], v)
			}
		}
	})
}

// SwiGLUOAI implements compute.MSA.
func (b *Backend) SwiGLUOAI(y, x compute.Tensor, w *compute.SwiGLU, alpha, limit float32) {
	checkShape("SwiGLUOAI y", y, x.Rows, w.W2.Rows)
	b.swigluOAI(w, F32(y), F32(x), x.Rows, alpha, limit)
}

// swigluOAI computes w2·act(w1·x, w3·x) for n rows (see compute.MSA).
func (b *Backend) swigluOAI(ex *compute.SwiGLU, y, x []float32, n int, alpha, L float32) {
	I := ex.W1.Rows
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	g := b.scratchF32(n * I)
	u := b.scratchF32(n * I)
	b.MatMulF32(g, x, n, ex.W1)
	b.MatMulF32(u, x, n, ex.W3)
	for i := range g {
		gv := min(g[i], L)
		uv := min(max(u[i], -L), L)
		g[i] = (uv + 1) * (gv * sigmoid(alpha*gv))
	}
	b.MatMulF32(y, g, n, ex.W2)
}

// MoEOAI implements compute.MSA: tokens are grouped by expert so that each
// expert's products run once over all the tokens routed to it.
func (b *Backend) MoEOAI(y, x compute.Tensor, a *compute.MoEArgs, alpha float32) {
	T, D := x.Rows, x.Cols
	E, K := a.Gate.Rows, a.K
	checkShape("MoEOAI y", y, T, D)
	if a.Tid2Eid.Valid() || a.SharedGate != nil || K <= 0 || K > E || len(a.Experts) != E {
		panic(fmt.Sprintf("cpu: MoEOAI: %d of %d experts (%d bound), hash routing %v, shared gate %v", K, E, len(a.Experts), a.Tid2Eid.Valid(), a.SharedGate != nil))
	}
	xv, yv := F32(x), F32(y)
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	scores := b.scratchF32(T * E)
	b.MatMulF32(scores, xv, T, a.Gate)
	idx := make([]int32, T*K)
	wt := make([]float32, T*K)
	biased := make([]float32, E)
	var bias []float32
	if a.Bias.Valid() {
		bias = F32(a.Bias)
	}
	for t := range T {
		s := scores[t*E : (t+1)*E]
		score(s, a.Scoring)
		it := idx[t*K : (t+1)*K]
		if bias == nil {
			b.TopK(it, s, K)
		} else {
			for e := range biased {
				biased[e] = s[e] + bias[e]
			}
			b.TopK(it, biased, K)
		}
		var sum float32
		for _, e := range it {
			sum += s[e]
		}
		for k, e := range it {
			wt[t*K+k] = s[e] / (sum + 1e-20) * a.RoutedScale
		}
	}
	byExpert := make([][]int32, E) // entries t*K+k
	for i, e := range idx {
		byExpert[e] = append(byExpert[e], int32(i))
	}
	clear(yv)
	xe := b.scratchF32(T * D)
	ye := b.scratchF32(T * D)
	for e, list := range byExpert {
		if len(list) == 0 {
			continue
		}
		n := len(list)
		for i, tk := range list {
			t := int(tk) / K
			copy(xe[i*D:(i+1)*D], xv[t*D:(t+1)*D])
		}
		b.swigluOAI(&a.Experts[e], ye[:n*D], xe[:n*D], n, alpha, a.Limit)
		for i, tk := range list {
			t := int(tk) / K
			axpy(yv[t*D:(t+1)*D], wt[tk], ye[i*D:(i+1)*D])
		}
	}
	shared := b.scratchF32(T * D)
	b.swigluOAI(&a.Shared, shared, xv, T, alpha, a.Limit)
	for i := range yv {
		yv[i] += shared[i]
	}
}
