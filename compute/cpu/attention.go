package cpu

import (
	"math"
	"runtime"
	"sync"

	"github.com/strata-inference/strata/compute"
)

// IndexerSelect implements compute.Attention (DeepSeek-V4's lightning
// indexer): entry e's score for a token is Σ_h w_h·relu(q_h·k_e)/sqrt(dim),
// with w scaled by 1/sqrt(heads).
func (b *Backend) IndexerSelect(a *compute.IndexerArgs, sp compute.Spans) {
	nI, dI, K := a.Heads, a.Dim, a.TopK
	T := a.Q.Rows
	checkShape("IndexerSelect Q", a.Q, T, nI*dI)
	checkShape("IndexerSelect W", a.W, T, nI)
	checkShape("IndexerSelect Sel", a.Sel, T, K)
	qI, wt, sel, cnt, pos := F32(a.Q), F32(a.W), I32(a.Sel), I32(a.N), I32(sp.Pos)
	wscale := float32(1 / math.Sqrt(float64(nI)))
	for i := range wt {
		wt[i] *= wscale
	}
	sscale := float32(1 / math.Sqrt(float64(dI)))
	type job struct{ t, span int }
	var jobs []job
	for si, s := range spansOf(sp) {
		for i := range s.n {
			jobs = append(jobs, job{s.start + i, si})
		}
	}
	// score writes the scores of entries [lo, hi) of token t's span.
	score := func(t int, keys slots, scores []float32, lo, hi int, kbuf []float32) {
		qt, wtt := qI[t*nI*dI:(t+1)*nI*dI], wt[t*nI:(t+1)*nI]
		for e := lo; e < hi; e++ {
			k := keys.read(e, dI, kbuf)
			var sc float32
			for h := range nI {
				if v := dot(qt[h*dI:(h+1)*dI], k); v > 0 {
					sc += v * sscale * wtt[h]
				}
			}
			scores[e] = sc
		}
	}
	// selectFor writes token jb.t's selection. With fewer tokens than
	// workers (decoding) a token's entries are scored in parallel,
	// otherwise tokens are; each score depends on its token and entry
	// alone, so both give the same bits.
	manyTokens := len(jobs) >= runtime.GOMAXPROCS(0)
	selectFor := func(jb job, scores, kbuf []float32) []float32 {
		t := jb.t
		n := (int(pos[t]) + 1) / a.Rate
		out := sel[t*K : (t+1)*K]
		if n <= K {
			for i := range n {
				out[i] = int32(i)
			}
			for i := n; i < K; i++ {
				out[i] = -1
			}
			cnt[t] = int32(n)
			return scores
		}
		keys := spanSlots(a.Keys, jb.span)
		if cap(scores) < n {
			scores = make([]float32, n)
		}
		scores = scores[:n]
		if manyTokens {
			score(t, keys, scores, 0, n, kbuf)
		} else {
			parallelFor(n, func(lo, hi int) { score(t, keys, scores, lo, hi, make([]float32, dI)) })
		}
		b.TopK(out, scores, K)
		cnt[t] = int32(K)
		return scores
	}
	if !manyTokens {
		var scores []float32
		kbuf := make([]float32, dI)
		for _, jb := range jobs {
			scores = selectFor(jb, scores, kbuf)
		}
		return
	}
	parallelFor(len(jobs), func(lo, hi int) {
		var scores []float32
		kbuf := make([]float32, dI)
		for _, jb := range jobs[lo:hi] {
			scores = selectFor(jb, scores, kbuf)
		}
	})
}

// attnMatMACs is the size (keys × head dim × heads) from which a token's
// attention runs through the matmul kernels rather than the scalar loop:
// below it the gather and the two kernel launches cost more than they save.
const attnMatMACs = 1 << 16

// attnBufs are attendMat's buffers, reused token to token.
type attnBufs struct{ k, kt, l []float32 }

// SparseAttention implements compute.Attention.
func (b *Backend) SparseAttention(a *compute.AttentionArgs, sp compute.Spans) {
	H, d := a.Heads, a.Dim
	T := a.Q.Rows
	checkShape("SparseAttention Q", a.Q, T, H*d)
	checkShape("SparseAttention KV", a.KV, T, d)
	checkShape("SparseAttention Out", a.Out, T, H*d)
	Q, kv, O, pos, sink := F32(a.Q), F32(a.KV), F32(a.Out), I32(sp.Pos), F32(a.Sink)
	var sel, cnt []int32
	if a.Sel.Valid() {
		sel, cnt = I32(a.Sel), I32(a.N)
	}
	K := a.Sel.Cols
	hasComp := a.Compressed.Pool.Valid()
	spans := spansOf(sp)
	type job struct{ t, span int }
	jobs := make([]job, 0, T)
	for si, s := range spans {
		for i := range s.n {
			jobs = append(jobs, job{s.start + i, si})
		}
	}
	// Gather each token's keys (in parallel); attend at once where there are
	// few, and through the matmul kernels where there are many.
	keyLists := make([][][]float32, len(jobs))
	big := make([]bool, len(jobs))
	parallelFor(len(jobs), func(lo, hi int) {
		var logits []float32
		for i := lo; i < hi; i++ {
			jb := jobs[i]
			s := spans[jb.span]
			t, p, p0 := jb.t, int(pos[jb.t]), s.pos0
			var keys [][]float32
			// Decoded keys of formats other than f32 go to an arena of
			// their own per token (attendMat reads them after the loop).
			var arena []float32
			decoded := func(sl slots, k int) []float32 {
				if sl.format == compute.SlotF32 {
					return sl.read(k, d, nil)
				}
				if len(arena)+d > cap(arena) {
					arena = make([]float32, 0, max(64*d, 2*cap(arena)))
				}
				v := sl.read(k, d, arena[len(arena):len(arena)+d])
				arena = arena[:len(arena)+d]
				return v
			}
			ring := spanSlots(a.Window, jb.span)
			for k := max(0, p-a.WindowSize+1); k <= p; k++ {
				if k >= p0 {
					r := s.start + k - p0
					keys = append(keys, kv[r*d:(r+1)*d])
				} else {
					keys = append(keys, decoded(ring, k%a.WindowSize))
				}
			}
			if hasComp {
				ent := spanSlots(a.Compressed, jb.span)
				if sel != nil {
					for _, e := range sel[t*K : t*K+int(cnt[t])] {
						keys = append(keys, decoded(ent, int(e)))
					}
				} else {
					for e := range (p + 1) / a.Rate {
						keys = append(keys, decoded(ent, e))
					}
				}
			}
			if len(keys)*d*H >= attnMatMACs {
				keyLists[i], big[i] = keys, true
				continue
			}
			logits = attend(O[t*H*d:(t+1)*H*d], Q[t*H*d:(t+1)*H*d], keys, sink, H, d, a.Scale, logits)
		}
	})
	for i, jb := range jobs {
		if big[i] {
			t := jb.t
			b.attendMat(O[t*H*d:(t+1)*H*d], Q[t*H*d:(t+1)*H*d], keyLists[i], sink, H, d, a.Scale)
		}
	}
}

// attendMat is attend for one token with many keys: the keys are gathered
// into a matrix K [n, d] and its transpose, the logits of all heads are
// K·q_h (one matmul), and the outputs are Kᵀ·p_h (another).
func (b *Backend) attendMat(o, q []float32, keys [][]float32, sink []float32, H, d int, scale float32) {
	n := len(keys)
	ab := &b.s.attn
	ab.k = grow(ab.k, n*d)
	ab.kt = grow(ab.kt, n*d)
	ab.l = grow(ab.l, H*n)
	K, KT, logit := ab.k, ab.kt, ab.l
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
	b.MatMulF32(logit, q, H, compute.F32View(K, n, d))
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
	b.MatMulF32(o, logit, H, compute.F32View(KT, d, n))
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

// parallelFor runs fn over [0, n) split into contiguous chunks, one per CPU.
func parallelFor(n int, fn func(lo, hi int)) {
	w := min(runtime.GOMAXPROCS(0), n)
	if w <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := range w {
		lo, hi := i*n/w, (i+1)*n/w
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}
