package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

var _ compute.SharedKV = (*Backend)(nil)

// minNormal32 is the smallest normal float32.
const minNormal32 = 0x1p-126

// RoPESplit implements compute.SharedKV.
func (b *Backend) RoPESplit(x, pos compute.Tensor, heads int, invFreq compute.Tensor) {
	xv, p, inv := F32(x), I32(pos), F32(invFreq)
	n := x.Cols
	if n%2 != 0 || 2*len(inv) > n {
		panic(fmt.Sprintf("cpu: RoPESplit of %d frequencies over rows of width %d", len(inv), n))
	}
	if heads <= 0 || len(p)*heads < x.Rows {
		panic(fmt.Sprintf("cpu: RoPESplit has %d positions of %d heads for %d rows", len(p), heads, x.Rows))
	}
	rows := x.Rows
	work := func(lo, hi int) {
		cos, sin := make([]float32, len(inv)), make([]float32, len(inv))
		last := int32(-1)
		for r := lo; r < hi; r++ {
			if q := p[r/heads]; q != last {
				splitAngles(cos, sin, q, inv)
				last = q
			}
			rotateSplit(xv[r*n:(r+1)*n], cos, sin)
		}
	}
	if rows*n < 1<<15 {
		work(0, rows)
		return
	}
	b.s.parallelFor(rows, work)
}

// splitAngles writes the cosines and sines of position p's angles
// float32(p)·f, computed in float64 and rounded to float32.
func splitAngles(cos, sin []float32, p int32, inv []float32) {
	fp := float32(p)
	for i, f := range inv {
		s, c := math.Sincos(float64(fp * f))
		cos[i], sin[i] = float32(c), float32(s)
	}
}

// rotateSplit rotates channel i of x with channel i + len(x)/2 by the
// angle whose cosine and sine are cos[i] and sin[i], for i < len(cos).
func rotateSplit(x, cos, sin []float32) {
	h := len(x) / 2
	for i := range cos {
		c, s := cos[i], sin[i]
		a, b := x[i], x[i+h]
		x[i] = float32(a*c) - float32(b*s)
		x[i+h] = float32(b*c) + float32(a*s)
	}
}

// StoreKV implements compute.SharedKV.
func (b *Backend) StoreKV(c compute.Paged, ring int, k, v compute.Tensor, sp compute.Spans) {
	vv, w := F32(v), v.Cols
	var kv []float32
	kw := 0
	if k.Valid() {
		checkShape("StoreKV k", k, v.Rows, v.Cols)
		kv, kw = F32(k), k.Cols
	}
	if c.Width != kw+w {
		panic(fmt.Sprintf("cpu: StoreKV of %d+%d values into slots of %d", kw, w, c.Width))
	}
	row := make([]float32, kw+w)
	for i, s := range spansOf(sp) {
		sl := spanSlots(c, i)
		first := s.pos0
		if ring > 0 {
			first = max(s.pos0, s.pos0+s.n-ring)
		}
		for p := first; p < s.pos0+s.n; p++ {
			t := s.start + p - s.pos0
			slot := p
			if ring > 0 {
				slot = p % ring
			}
			copy(row[:kw], kv[t*kw:(t+1)*kw])
			copy(row[kw:], vv[t*w:(t+1)*w])
			sl.write(slot, row)
		}
	}
}

// SharedKVAttention implements compute.SharedKV. Each span's keys and
// values are gathered once (decoded from the cache, or this step's rows;
// derived keys computed once per position) and shared by its tokens.
func (b *Backend) SharedKVAttention(a *compute.SharedKVArgs, sp compute.Spans) {
	H, G, d := a.Heads, a.KVHeads, a.Dim
	T := a.Q.Rows
	if G <= 0 || H%G != 0 || d%2 != 0 {
		panic(fmt.Sprintf("cpu: SharedKVAttention with %d heads over %d KV heads of %d", H, G, d))
	}
	W := G * d
	checkShape("SharedKVAttention Q", a.Q, T, H*d)
	checkShape("SharedKVAttention Out", a.Out, T, H*d)
	checkShape("SharedKVAttention V", a.V, T, W)
	var kStep []float32
	var knorm, rope []float32
	slotW := 2 * W
	if a.KFromV {
		slotW = W
		knorm = F32(a.KNorm)
		if len(knorm) != d {
			panic(fmt.Sprintf("cpu: SharedKVAttention KNorm of %d for heads of %d", len(knorm), d))
		}
		rope = F32(a.KeyRope)
		if a.KeyRope.Cols%2 != 0 || a.KeyRope.Cols > d {
			panic(fmt.Sprintf("cpu: SharedKVAttention KeyRope of width %d for heads of %d", a.KeyRope.Cols, d))
		}
	} else {
		checkShape("SharedKVAttention K", a.K, T, W)
		kStep = F32(a.K)
	}
	if a.Cache.Width != slotW {
		panic(fmt.Sprintf("cpu: SharedKVAttention over slots of %d values, want %d", a.Cache.Width, slotW))
	}
	Q, O, vStep, pos := F32(a.Q), F32(a.Out), F32(a.V), I32(sp.Pos)
	spans := spansOf(sp)

	// Per span: the keys and values of positions lo0 .. last, lo0 being
	// the first one any of its tokens reads.
	type table struct {
		lo         int
		keys, vals [][]float32
	}
	tabs := make([]table, len(spans))
	for si, s := range spans {
		if s.n == 0 {
			continue
		}
		lo0, last := 0, s.pos0+s.n-1
		if a.Window > 0 {
			lo0 = max(0, s.pos0-a.Window+1)
		}
		if a.KFromV && last >= a.KeyRope.Rows {
			panic(fmt.Sprintf("cpu: SharedKVAttention KeyRope has %d positions, the step reaches %d", a.KeyRope.Rows, last))
		}
		n := last - lo0 + 1
		tb := table{lo: lo0, keys: make([][]float32, n), vals: make([][]float32, n)}
		cache := spanSlots(a.Cache, si)
		cached := max(0, s.pos0-lo0) // positions read from the cache
		var arena []float32
		if a.Cache.Format != compute.SlotF32 {
			arena = make([]float32, cached*slotW)
		}
		for j := lo0; j <= last; j++ {
			var k, v []float32
			if j < s.pos0 {
				slot := j
				if a.Window > 0 {
					slot = j % a.Window
				}
				var buf []float32
				if arena != nil {
					off := (j - lo0) * slotW
					buf = arena[off : off+slotW]
				}
				row := cache.read(slot, slotW, buf)
				if a.KFromV {
					v = row
				} else {
					k, v = row[:W], row[W:]
				}
			} else {
				r := s.start + j - s.pos0
				v = vStep[r*W : (r+1)*W]
				if !a.KFromV {
					k = kStep[r*W : (r+1)*W]
				}
			}
			tb.keys[j-lo0], tb.vals[j-lo0] = k, v
		}
		if a.KFromV {
			derived := make([]float32, n*W)
			m := a.KeyRope.Cols / 2
			fill := func(lo, hi int) {
				for i := lo; i < hi; i++ {
					k := derived[i*W : (i+1)*W]
					v := tb.vals[i]
					cs := rope[(lo0+i)*2*m : (lo0+i+1)*2*m]
					for g := range G {
						kh, vh := k[g*d:(g+1)*d], v[g*d:(g+1)*d]
						for c := range kh {
							kh[c] = knorm[c] * vh[c]
						}
						rotateSplit(kh, cs[:m], cs[m:])
					}
					tb.keys[i] = k
				}
			}
			if n*W < 1<<15 {
				fill(0, n)
			} else {
				b.s.parallelFor(n, fill)
			}
		}
		tabs[si] = tb
	}

	type job struct{ t, span int }
	jobs := make([]job, 0, T)
	for si, s := range spans {
		for i := range s.n {
			jobs = append(jobs, job{s.start + i, si})
		}
	}
	// A token whose group of query heads reads many keys goes through the
	// matmul kernels (after the parallel loop: they parallelize inside);
	// the others through the scalar loop below. The choice depends on the
	// token's position alone, so it is the same on every path.
	hg := H / G
	keysOf := func(jb job) (keys, vals [][]float32) {
		tb := &tabs[jb.span]
		p := int(pos[jb.t])
		first := 0
		if a.Window > 0 {
			first = max(0, p-a.Window+1)
		}
		return tb.keys[first-tb.lo : p-tb.lo+1], tb.vals[first-tb.lo : p-tb.lo+1]
	}
	big := func(n int) bool { return hg >= 4 && n*d*hg >= attnMatMACs }
	work := func(lo, hi int) {
		var logits []float32
		var probs []float64
		for _, jb := range jobs[lo:hi] {
			t := jb.t
			keys, vals := keysOf(jb)
			if big(len(keys)) {
				continue
			}
			logits = grow(logits, len(keys))
			if cap(probs) < len(keys) {
				probs = make([]float64, len(keys))
			}
			probs = probs[:len(keys)]
			for h := range H {
				g := h / (H / G)
				q := Q[t*H*d+h*d : t*H*d+(h+1)*d]
				mx := float32(math.Inf(-1))
				for j, k := range keys {
					l := dot(q, k[g*d:(g+1)*d]) * a.Scale
					logits[j] = l
					mx = max(mx, l)
				}
				var sum float64
				for j, l := range logits[:len(keys)] {
					e := math.Exp(float64(l) - float64(mx))
					probs[j] = e
					sum += e
				}
				o := O[t*H*d+h*d : t*H*d+(h+1)*d]
				clear(o)
				for j, v := range vals {
					// A weight below float32's smallest normal adds nothing
					// the output can hold, and multiplying by subnormals is
					// two orders of magnitude slower: it is skipped.
					if w := float32(probs[j] / sum); w >= minNormal32 {
						axpy(o, w, v[g*d:(g+1)*d])
					}
				}
			}
		}
	}
	if len(jobs) > 0 {
		b.s.parallelFor(len(jobs), work)
	}
	for _, jb := range jobs {
		keys, vals := keysOf(jb)
		if !big(len(keys)) {
			continue
		}
		t := jb.t
		for g := range G {
			rows := Q[t*H*d+g*hg*d : t*H*d+(g+1)*hg*d]
			b.attendGroup(O[t*H*d+g*hg*d:t*H*d+(g+1)*hg*d], rows, keys, vals, g*d, hg, d, a.Scale)
		}
	}
}

// attnMatMACs is the size (keys × head dim × query heads of a group) from
// which a token's SharedKVAttention runs through the matmul kernels rather
// than the scalar loop: below it the gather and the two kernel launches
// cost more than they save.
const attnMatMACs = 1 << 16

// attnBufs are attendGroup's buffers, reused token to token.
type attnBufs struct{ k, kt, l []float32 }

// attendGroup is one token's attention for hg query heads q [hg, d] that
// share a KV head (channels off..off+d of every key and value row),
// through the matmul kernels: the keys gathered into K [n, d] and the
// values into Vᵀ [d, n], logits K·q_h, outputs Vᵀ·p_h. The softmax is the
// scalar loop's: exponentials in float64, weights below float32's
// smallest normal zero.
func (b *Backend) attendGroup(o, q []float32, keys, vals [][]float32, off, hg, d int, scale float32) {
	n := len(keys)
	ab := &b.s.attn
	ab.k = grow(ab.k, n*d)
	ab.kt = grow(ab.kt, n*d)
	ab.l = grow(ab.l, hg*n)
	K, VT, logit := ab.k, ab.kt, ab.l
	for j, k := range keys {
		copy(K[j*d:(j+1)*d], k[off:off+d])
	}
	const tile = 16 // transpose in tiles to keep the strided writes in cache
	for j0 := 0; j0 < n; j0 += tile {
		for c0 := 0; c0 < d; c0 += tile {
			for j := j0; j < min(j0+tile, n); j++ {
				v := vals[j][off : off+d]
				for c := c0; c < min(c0+tile, d); c++ {
					VT[c*n+j] = v[c]
				}
			}
		}
	}
	b.MatMulF32(logit, q, hg, compute.F32View(K, n, d))
	for h := range hg {
		lh := logit[h*n : (h+1)*n]
		mx := float32(math.Inf(-1))
		for j := range lh {
			lh[j] *= scale
			mx = max(mx, lh[j])
		}
		var sum float64
		for _, l := range lh {
			sum += math.Exp(float64(l) - float64(mx))
		}
		for j, l := range lh {
			w := float32(math.Exp(float64(l)-float64(mx)) / sum)
			if w < minNormal32 {
				w = 0
			}
			lh[j] = w
		}
	}
	b.MatMulF32(o, logit, hg, compute.F32View(VT, d, n))
}
