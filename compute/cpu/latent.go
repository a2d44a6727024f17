package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/strata-inference/strata/compute"
)

// LatentAttention implements compute.MLA. This step's latents are written
// into their slots first; then every token reads its keys back from the
// cache once, for all heads, in parallel over tokens.
func (b *Backend) LatentAttention(a *compute.LatentArgs, sp compute.Spans) {
	H, c, r := a.Heads, a.Latent, a.Rope
	T := a.Q.Rows
	if H <= 0 || c <= 0 || r < 0 || a.Q.Cols%H != 0 || a.Q.Cols/H <= r {
		panic(fmt.Sprintf("cpu: LatentAttention: %d heads of %d query channels, latent %d, rope %d", H, a.Q.Cols/max(H, 1), c, r))
	}
	w := a.Q.Cols / H
	checkShape("LatentAttention QLat", a.QLat, T, H*c)
	checkShape("LatentAttention Out", a.Out, T, H*c)
	checkShape("LatentAttention Lat", a.Lat, T, c)
	checkShape("LatentAttention KRope", a.KRope, T, r)
	if a.KV.Width != c+r || a.KV.Format != compute.SlotF32 && a.KV.Format != compute.SlotBF16 && a.KV.Rope != r {
		panic(fmt.Sprintf("cpu: LatentAttention: slots of %d values (%d RoPE), want %d (%d)", a.KV.Width, a.KV.Rope, c+r, r))
	}
	Q, QL, O, lat, kr, pos := F32(a.Q), F32(a.QLat), F32(a.Out), F32(a.Lat), F32(a.KRope), I32(sp.Pos)
	var sink []float32
	if a.Sink.Valid() {
		checkShape("LatentAttention Sink", a.Sink, 1, H)
		sink = F32(a.Sink)
	}
	var sel, cnt []int32
	K := 0
	if a.Sel.Valid() {
		sel, cnt, K = I32(a.Sel), I32(a.N), a.Sel.Cols
		checkShape("LatentAttention Sel", a.Sel, T, K)
	}
	spans := spansOf(sp)
	span := make([]int, T)
	slot := make([]float32, c+r)
	for si, s := range spans {
		sl := spanSlots(a.KV, si)
		for t := s.start; t < s.start+s.n; t++ {
			span[t] = si
			copy(slot[:c], lat[t*c:(t+1)*c])
			copy(slot[c:], kr[t*r:(t+1)*r])
			sl.write(int(pos[t]), slot)
		}
	}
	// Every token's keys are gathered once (decoded when the cache is not
	// f32) and shared by its heads. With at least as many tokens as
	// workers, tokens run in parallel; otherwise (decoding) each token's
	// heads do.
	byToken := T >= b.s.threads
	attendToken := func(t int, keys [][]float32, arena []float32) ([][]float32, []float32) {
		p := int(pos[t])
		sl := spanSlots(a.KV, span[t])
		n := p + 1
		if sel != nil {
			n = int(cnt[t])
			if n < 0 || n > K {
				panic(fmt.Sprintf("cpu: LatentAttention: token %d selects %d of %d keys", t, n, K))
			}
		}
		keys = keys[:0]
		if sl.format != compute.SlotF32 && cap(arena) < n*(c+r) {
			arena = make([]float32, n*(c+r))
		}
		for i := range n {
			k := i
			if sel != nil {
				k = int(sel[t*K+i])
				if k < 0 || k > p {
					panic(fmt.Sprintf("cpu: LatentAttention: token %d at position %d selects position %d", t, p, k))
				}
			}
			var buf []float32
			if sl.format != compute.SlotF32 {
				buf = arena[i*(c+r) : (i+1)*(c+r)]
			}
			keys = append(keys, sl.read(k, c+r, buf))
		}
		heads := func(lo, hi int) {
			logit := make([]float64, len(keys))
			for h := lo; h < hi; h++ {
				sk := math.Inf(-1)
				if sink != nil {
					sk = float64(sink[h])
				}
				latentHead(b.s.k, O[(t*H+h)*c:(t*H+h+1)*c], QL[(t*H+h)*c:(t*H+h+1)*c], Q[(t*H+h)*w+w-r:(t*H+h+1)*w], keys, c, a.Scale, sk, logit)
			}
		}
		if byToken {
			heads(0, H)
		} else {
			b.s.parallelFor(H, heads)
		}
		return keys, arena
	}
	if !byToken {
		var keys [][]float32
		var arena []float32
		for t := range T {
			keys, arena = attendToken(t, keys, arena)
		}
		return
	}
	b.s.parallelFor(T, func(lo, hi int) {
		var keys [][]float32
		var arena []float32
		for t := lo; t < hi; t++ {
			keys, arena = attendToken(t, keys, arena)
		}
	})
}

// latentHead is one head's attention over keys ([lat | kpe] each): out =
// Σ softmax(scale·(ql·lat + qr·kpe)) · lat, the exponentials in float64,
// with exp(sink) added to the denominator (sink -Inf: none). logit is
// scratch of len(keys).
//
// The vector families take the two dot products of four keys at a time
// through their 16-lane row routine (lanes reduced by sumLanesGo) when both
// widths are multiples of 16; otherwise, and on the portable family, dot.
// Either way a key's logit does not depend on the other keys or the path.
func latentHead(ks *kernelSet, out, ql, qr []float32, keys [][]float32, c int, scale float32, sink float64, logit []float64) {
	mx := sink
	r := len(qr)
	if ks.vector && c%16 == 0 && r%16 == 0 && c > 0 && r > 0 {
		var acc, accR [4]lanes
		var pl, pr [4]unsafe.Pointer
		for s0 := 0; s0 < len(keys); s0 += 4 {
			for i := range 4 {
				k := keys[min(s0+i, len(keys)-1)] // a short group repeats its last key
				pl[i], pr[i] = unsafe.Pointer(&k[0]), unsafe.Pointer(&k[c])
			}
			acc, accR = [4]lanes{}, [4]lanes{}
			ks.vec.dotF32(&acc, &pl, &ql[0], c)
			ks.vec.dotF32(&accR, &pr, &qr[0], r)
			for i := range min(4, len(keys)-s0) {
				v := float64(scale * (sumLanesGo(&acc[i]) + sumLanesGo(&accR[i])))
				logit[s0+i] = v
				mx = max(mx, v)
			}
		}
	} else {
		for s, k := range keys {
			v := float64(scale * (dot(ql, k[:c]) + dot(qr, k[c:])))
			logit[s] = v
			mx = max(mx, v)
		}
	}
	var sum float64
	if !math.IsInf(sink, -1) {
		sum = math.Exp(sink - mx)
	}
	for s, v := range logit {
		e := math.Exp(v - mx)
		logit[s] = e
		sum += e
	}
	clear(out)
	for s, k := range keys {
		axpy(out, float32(logit[s]/sum), k[:c])
	}
}
