package deepseekv4

import (
	"math"

	"github.com/strata-inference/strata/compute"
)

// attention runs a layer's attention on x [T, D] (the attn_norm output) and
// returns its output [T, D] (spec §3, "Attention"). It reads and updates the
// window ring, compressed entries and indexer keys of every span's sequence.
func (m *Model) attention(A *Attention, kind LayerSpec, refs *layerRefs, x []float32, b *Batch, pos []int32) []float32 {
	cfg := m.Cfg
	T, D, H, d, q := len(b.Tokens), cfg.Hidden, cfg.Heads, cfg.HeadDim, cfg.QLoraRank
	eps := float32(cfg.RMSEps)
	inv := m.rope.forLayer(kind.Attn)
	headPos := repeatPos(pos, H)

	// qr = RMSNorm(wq_a·x); q = wq_b·qr, per-head unweighted rms, RoPE.
	qr := m.s.get(T * q)
	m.be.MatMul(qr, x, T, A.WqA)
	m.be.RMSNorm(qr, qr, A.QNorm, T, q, eps)
	Q := m.s.get(T * H * d)
	m.be.MatMul(Q, qr, T, A.WqB)
	m.be.RMSNorm(Q, Q, nil, T*H, d, eps)
	m.be.RoPE(Q, T*H, d, headPos, inv, false)

	// kv = RoPE(RMSNorm(wkv·x)): the single key and value vector of each token.
	kv := m.s.get(T * d)
	m.be.MatMul(kv, x, T, A.Wkv)
	m.be.RMSNorm(kv, kv, A.KVNorm, T, d, eps)
	m.be.RoPE(kv, T, d, pos, inv, false)

	if A.Comp != nil {
		m.compress(A.Comp, d, kind.Attn == CSA, kind.Rate, refs.compressed, refs.compressor, x, b)
	}
	var selected [][]int32
	if A.Indexer != nil {
		m.compress(&A.Indexer.Comp, cfg.IndexHeadDim, true, kind.Rate, refs.indexer, refs.idxComp, x, b)
		selected = m.indexerSelect(A.Indexer, kind.Rate, refs.indexer, x, qr, b, pos)
	}

	// Attention per token over the window and the compressed entries.
	O := m.s.get(T * H * d)
	scale := float32(1 / math.Sqrt(float64(d)))
	win := refs.window
	type job struct{ t, span int }
	jobs := make([]job, 0, T)
	for si, s := range b.Spans {
		for i := range s.Len {
			jobs = append(jobs, job{s.Start + i, si})
		}
	}
	// Gather each token's keys (in parallel); attend at once where there are
	// few, and through the backend's matmul kernels where there are many.
	keyLists := make([][][]float32, len(jobs))
	big := make([]bool, len(jobs))
	parallelFor(len(jobs), func(lo, hi int) {
		var logits []float32
		for i := lo; i < hi; i++ {
			jb := jobs[i]
			s := &b.Spans[jb.span]
			t, p, p0 := jb.t, int(pos[jb.t]), s.Seq.Len
			var keys [][]float32
			ring := s.Seq.Table(win.spec, win.idx)
			for k := max(0, p-cfg.Window+1); k <= p; k++ {
				if k >= p0 {
					r := s.Start + k - p0
					keys = append(keys, kv[r*d:(r+1)*d])
				} else {
					keys = append(keys, ring.Slot(k % cfg.Window)[:d])
				}
			}
			if A.Comp != nil {
				ent := s.Seq.Table(refs.compressed.spec, refs.compressed.idx)
				if selected != nil {
					for _, e := range selected[t] {
						keys = append(keys, ent.Slot(int(e))[:d])
					}
				} else {
					for e := range (p + 1) / kind.Rate {
						keys = append(keys, ent.Slot(e)[:d])
					}
				}
			}
			if len(keys)*d*H >= attendMatMACs {
				keyLists[i], big[i] = keys, true
				continue
			}
			logits = attend(O[t*H*d:(t+1)*H*d], Q[t*H*d:(t+1)*H*d], keys, A.Sink, H, d, scale, logits)
		}
	})
	for i, jb := range jobs {
		if big[i] {
			t := jb.t
			m.attendMat(O[t*H*d:(t+1)*H*d], Q[t*H*d:(t+1)*H*d], keyLists[i], A.Sink, H, d, scale)
		}
	}

	// The window ring keeps each span's last `window` kv vectors.
	for _, s := range b.Spans {
		ring := s.Seq.Table(win.spec, win.idx)
		p0 := s.Seq.Len
		for p := max(p0, p0+s.Len-cfg.Window); p < p0+s.Len; p++ {
			r := s.Start + p - p0
			copy(ring.Slot(p%cfg.Window), kv[r*d:(r+1)*d])
		}
	}

	// Undo the values' rotation at the query position, then the grouped
	// output projection: group g's heads through wo_a[g], all groups through wo_b.
	m.be.RoPE(O, T*H, d, headPos, inv, true)
	G, R := cfg.OGroups, cfg.OLoraRank
	gin := H * d / G
	u := m.s.get(T * G * R)
	if G == 1 {
		m.be.MatMul(u, O, T, A.WoA[0])
	} else {
		xg := m.s.get(T * gin)
		yg := m.s.get(T * R)
		for g := range G {
			for t := range T {
				copy(xg[t*gin:(t+1)*gin], O[t*H*d+g*gin:t*H*d+(g+1)*gin])
			}
			m.be.MatMul(yg, xg, T, A.WoA[g])
			for t := range T {
				copy(u[t*G*R+g*R:t*G*R+(g+1)*R], yg[t*R:(t+1)*R])
			}
		}
	}
	y := m.s.get(T * D)
	m.be.MatMul(y, u, T, A.WoB)
	return y
}

// attendMatMACs is the size (keys × head dim × heads) from which a token's
// attention runs through the backend's matmul kernels rather than the
// scalar loop: below it the gather and the two kernel launches cost more
// than they save.
const attendMatMACs = 1 << 16

// attendMat is attend for one token with many keys: the keys are gathered
// into a matrix K [n, d] and its transpose, the logits of all heads are
// K·q_h (one matmul), and the outputs are Kᵀ·p_h (another).
func (m *Model) attendMat(o, q []float32, keys [][]float32, sink []float32, H, d int, scale float32) {
	n := len(keys)
	m.attnK = grow(m.attnK, n*d)
	m.attnKT = grow(m.attnKT, n*d)
	m.attnL = grow(m.attnL, H*n)
	K, KT, logit := m.attnK, m.attnKT, m.attnL
	for s, k := range keys {
		copy(K[s*d:(s+1)*d], k)
	}
	// Transpose in 16×16 tiles to keep the strided writes in cache.
	const tile = 16
	for s0 := 0; s0 < n; s0 += tile {
		for j0 := 0; j0 < d; j0 += tile {
			for s := s0; s < min(s0+tile, n); s++ {
				row := K[s*d : (s+1)*d]
				for j := j0; j < min(j0+tile, d); j++ {
					KT[j*n+s] = row[j]
				}
			}
		}
	}
	m.be.MatMul(logit, q, H, compute.F32View(K, n, d))
	for h := range H {
		lh := logit[h*n : (h+1)*n]
		mx := sink[h]
		for i := range lh {
			lh[i] *= scale
			mx = max(mx, lh[i])
		}
		den := float32(math.Exp(float64(sink[h] - mx)))
		for i, v := range lh {
			e := float32(math.Exp(float64(v - mx)))
			lh[i] = e
			den += e
		}
		for i := range lh {
			lh[i] /= den
		}
	}
	m.be.MatMul(o, logit, H, compute.F32View(KT, d, n))
}

// attend computes one token's attention output o [H, d] for queries q [H, d]
// over keys (each used as key and value), with a per-head sink logit in the
// softmax denominator. buf is reusable scratch, returned possibly grown.
func attend(o, q []float32, keys [][]float32, sink []float32, H, d int, scale float32, buf []float32) []float32 {
	n := len(keys)
	if cap(buf) < H*n {
		buf = make([]float32, H*n)
	}
	logit := buf[:H*n]
	for s, k := range keys {
		for h := range H {
			logit[h*n+s] = dot(q[h*d:(h+1)*d], k) * scale
		}
	}
	for h := range H {
		lh := logit[h*n : (h+1)*n]
		mx := sink[h]
		for _, v := range lh {
			mx = max(mx, v)
		}
		den := float32(math.Exp(float64(sink[h] - mx)))
		for s, v := range lh {
			e := float32(math.Exp(float64(v - mx)))
			lh[s] = e
			den += e
		}
		for s := range lh {
			lh[s] /= den
		}
	}
	clear(o)
	for s, k := range keys {
		for h := range H {
			axpy(o[h*d:(h+1)*d], logit[h*n+s], k)
		}
	}
	return buf
}

// indexerSelect runs the lightning indexer of a CSA layer and returns, per
// token of the batch, the compressed entries its attention uses: all entries
// closed at or before the token when there are at most index_topk of them,
// else the index_topk best by score.
func (m *Model) indexerSelect(Ix *Indexer, rate int, ref slotRef, x, qr []float32, b *Batch, pos []int32) [][]int32 {
	cfg := m.Cfg
	T, nI, dI := len(b.Tokens), cfg.IndexHeads, cfg.IndexHeadDim
	qI := m.s.get(T * nI * dI)
	m.be.MatMul(qI, qr, T, Ix.WqB)
	m.be.RoPE(qI, T*nI, dI, repeatPos(pos, nI), m.rope.compress, false)
	wt := m.s.get(T * nI)
	m.be.MatMul(wt, x, T, Ix.WeightsProj)
	wscale := float32(1 / math.Sqrt(float64(nI)))
	for i := range wt {
		wt[i] *= wscale
	}
	sscale := float32(1 / math.Sqrt(float64(dI)))

	sel := make([][]int32, T)
	type job struct{ t, span int }
	var jobs []job
	for si, s := range b.Spans {
		for i := range s.Len {
			jobs = append(jobs, job{s.Start + i, si})
		}
	}
	parallelFor(len(jobs), func(lo, hi int) {
		var scores []float32
		for _, jb := range jobs[lo:hi] {
			t := jb.t
			n := (int(pos[t]) + 1) / rate
			if n <= cfg.IndexTopK {
				all := make([]int32, n)
				for i := range all {
					all[i] = int32(i)
				}
				sel[t] = all
				continue
			}
			keys := b.Spans[jb.span].Seq.Table(ref.spec, ref.idx)
			if cap(scores) < n {
				scores = make([]float32, n)
			}
			scores = scores[:n]
			qt, wtt := qI[t*nI*dI:(t+1)*nI*dI], wt[t*nI:(t+1)*nI]
			for e := range n {
				k := keys.Slot(e)[:dI]
				var sc float32
				for h := range nI {
					if v := dot(qt[h*dI:(h+1)*dI], k); v > 0 {
						sc += v * sscale * wtt[h]
					}
				}
				scores[e] = sc
			}
			idx := make([]int32, cfg.IndexTopK)
			m.be.TopK(idx, scores, cfg.IndexTopK)
			sel[t] = idx
		}
	})
	return sel
}

// compress runs one compressor (spec §3, "Compressor") over every span: it
// computes each token's values a = wkv·x and scores z = wgate·x + ape[p mod
// rate], emits the entry of every window that closes inside the span into
// the entries table, and keeps in the ring the tokens later windows need.
// An overlapping compressor (CSA) is 2·width wide: the first half (Ca) of a
// token feeds the next window's entry, the second half (Cb) its own.
func (m *Model) compress(c *Compressor, width int, overlap bool, rate int, entries, ringRef slotRef, x []float32, b *Batch) {
	T := len(b.Tokens)
	cw := width
	ringSlots := rate
	if overlap {
		cw, ringSlots = 2*width, 2*rate
	}
	a := m.s.get(T * cw)
	z := m.s.get(T * cw)
	m.be.MatMul(a, x, T, c.Wkv)
	m.be.MatMul(z, x, T, c.Wgate)
	for _, s := range b.Spans {
		for i := range s.Len {
			t, p := s.Start+i, s.Seq.Len+i
			axpy(z[t*cw:(t+1)*cw], 1, c.Ape[(p%rate)*cw:(p%rate+1)*cw])
		}
	}
	eps := float32(m.Cfg.RMSEps)
	mx := make([]float32, width)
	num := make([]float32, width)
	den := make([]float32, width)
	for _, s := range b.Spans {
		p0, n := s.Seq.Len, s.Len
		ents := s.Seq.Table(entries.spec, entries.idx)
		ring := s.Seq.Table(ringRef.spec, ringRef.idx)
		token := func(p int) (av, zv []float32) {
			if p >= p0 {
				r := s.Start + p - p0
				return a[r*cw : (r+1)*cw], z[r*cw : (r+1)*cw]
			}
			sl := ring.Slot(p % ringSlots)
			return sl[:cw], sl[cw:]
		}
		// Windows w closing inside the span: p0 <= (w+1)·rate-1 < p0+n.
		for w := (p0+rate)/rate - 1; w < (p0+n)/rate; w++ {
			for i := range mx {
				mx[i] = float32(math.Inf(-1))
			}
			clear(num)
			clear(den)
			// Each slot contributes value half av[off:] with score half zv[off:].
			visit := func(f func(av, zv []float32)) {
				if overlap && w > 0 {
					for p := (w - 1) * rate; p < w*rate; p++ {
						av, zv := token(p)
						f(av[:width], zv[:width])
					}
				}
				off := 0
				if overlap {
					off = width
				}
				for p := w * rate; p < (w+1)*rate; p++ {
					av, zv := token(p)
					f(av[off:off+width], zv[off:off+width])
				}
			}
			visit(func(_, zv []float32) {
				for i, v := range zv {
					mx[i] = max(mx[i], v)
				}
			})
			visit(func(av, zv []float32) {
				for i, v := range zv {
					e := float32(math.Exp(float64(v - mx[i])))
					den[i] += e
					num[i] += e * av[i]
				}
			})
			out := ents.Slot(w)[:width]
			for i := range out {
				out[i] = num[i] / den[i]
			}
			m.be.RMSNorm(out, out, c.Norm, 1, width, eps)
			m.be.RoPE(out, 1, width, []int32{int32(w * rate)}, m.rope.compress, false)
		}
		for p := max(p0, p0+n-ringSlots); p < p0+n; p++ {
			av, zv := token(p)
			sl := ring.Slot(p % ringSlots)
			copy(sl[:cw], av)
			copy(sl[cw:], zv)
		}
	}
}

// repeatPos repeats each position n times (one per head).
func repeatPos(pos []int32, n int) []int32 {
	out := make([]int32, len(pos)*n)
	for t, p := range pos {
		for h := range n {
			out[t*n+h] = p
		}
	}
	return out
}

// grow returns buf resized to n, reallocating only when it is too small.
func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}
