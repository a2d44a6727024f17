package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

func closeTo(got float32, want, scale float64) bool {
	return math.Abs(float64(got)-want) <= 1e-5*(1+math.Abs(scale))
}

// TestHeadMatMul: every head's product reads the first n channels of its
// group and lands in its own block of y.
func TestHeadMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	b := New(2)
	const T, H, w, n, R = 5, 3, 7, 4, 6
	x := randVec(rng, T*H*w)
	var ws []*compute.Matrix
	var dense [][]float32
	for range H {
		m, d := testMatrix(rng, compute.BF16, R, n, 0, 0)
		ws, dense = append(ws, m), append(dense, d)
	}
	y := make([]float32, T*H*R)
	b.HeadMatMul(Wrap(y, T, H*R), Wrap(x, T, H*w), ws)
	for tk := range T {
		for h := range H {
			for r := range R {
				var s, l1 float64
				for i := range n {
					p := float64(dense[h][r*n+i]) * float64(x[tk*H*w+h*w+i])
					s, l1 = s+p, l1+math.Abs(p)
				}
				if got := y[tk*H*R+h*R+r]; !closeTo(got, s, l1) {
					t.Fatalf("token %d head %d row %d: %g, want %g", tk, h, r, got, s)
				}
			}
		}
	}
}

// TestRoPELeading: both pairings against the rotation written out in
// float64, the channels after the rotated ones untouched, one position per
// heads rows.
func TestRoPELeading(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	b := New(1)
	const rows, heads, n, nf = 6, 2, 10, 3
	inv := []float32{1, 0.1, 0.01}
	pos := []int32{0, 5, 1000}
	for _, half := range []bool{false, true} {
		x := randVec(rng, rows*n)
		y := slices.Clone(x)
		b.RoPELeading(Wrap(y, rows, n), WrapI32(pos, 1, len(pos)), heads, Wrap(inv, 1, nf), half)
		for r := range rows {
			row, got := x[r*n:(r+1)*n], y[r*n:(r+1)*n]
			for j := range nf {
				a, c := 2*j, 2*j+1
				if half {
					a, c = j, nf+j
				}
				ang := float64(float32(pos[r/heads]) * inv[j])
				cs, sn := math.Cos(ang), math.Sin(ang)
				wa := float64(row[a])*cs - float64(row[c])*sn
				wc := float64(row[c])*cs + float64(row[a])*sn
				if !closeTo(got[a], wa, 1) || !closeTo(got[c], wc, 1) {
					t.Fatalf("half=%v row %d pair %d: (%g, %g), want (%g, %g)", half, r, j, got[a], got[c], wa, wc)
				}
			}
			for i := 2 * nf; i < n; i++ {
				if got[i] != row[i] {
					t.Fatalf("half=%v row %d: channel %d changed", half, r, i)
				}
			}
		}
	}
}

func TestLayerNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	b := New(1)
	const rows, n = 4, 9
	x, w, bias := randVec(rng, rows*n), randVec(rng, n), randVec(rng, n)
	for i := range x {
		x[i] = 3 + 2*x[i] // a mean to remove
	}
	y := make([]float32, rows*n)
	b.LayerNorm(Wrap(y, rows, n), Wrap(x, rows, n), Wrap(w, 1, n), Wrap(bias, 1, n), 1e-6)
	for r := range rows {
		var m, v float64
		for _, e := range x[r*n : (r+1)*n] {
			m += float64(e) / n
		}
		for _, e := range x[r*n : (r+1)*n] {
			v += (float64(e) - m) * (float64(e) - m) / n
		}
		for i := range n {
			want := (float64(x[r*n+i])-m)/math.Sqrt(v+1e-6)*float64(w[i]) + float64(bias[i])
			if !closeTo(y[r*n+i], want, 3) {
				t.Fatalf("row %d channel %d: %g, want %g", r, i, y[r*n+i], want)
			}
		}
	}
	// In place.
	b.LayerNorm(Wrap(x, rows, n), Wrap(x, rows, n), Wrap(w, 1, n), Wrap(bias, 1, n), 1e-6)
	if !slices.Equal(x, y) {
		t.Fatal("in-place LayerNorm differs")
	}
}

// latentCache is a paged append cache of MLA latents for tests: span s
// holds pages [s·pagesPer, (s+1)·pagesPer) of its own pool.
type latentCache struct {
	pool     compute.Tensor
	pagesPer int
	perPage  int
	slot     int
	f        compute.SlotFormat
	c, r     int
}

func newLatentCache(b *Backend, spans, slots, c, r int, f compute.SlotFormat) *latentCache {
	slot := (slotBytes(c+r, r, f) + 3) / 4 * 4
	const perPage = 4
	lc := &latentCache{pagesPer: (slots + perPage - 1) / perPage, perPage: perPage, slot: slot, f: f, c: c, r: r}
	lc.pool, _ = b.Alloc(compute.U8, spans*lc.pagesPer, perPage*slot)
	return lc
}

// paged views the cache for a batch whose spans are the given sequences.
func (lc *latentCache) paged(seqs []int) compute.Paged {
	var pages []int32
	for _, s := range seqs {
		for p := range lc.pagesPer {
			pages = append(pages, int32(s*lc.pagesPer+p))
		}
	}
	return compute.Paged{Pool: lc.pool, Pages: WrapI32(pages, len(seqs), lc.pagesPer), PerPage: lc.perPage,
		SlotBytes: lc.slot, Format: lc.f, Width: lc.c + lc.r, Rope: lc.r}
}

// spansTab builds the span table of spans given as (length, first
// position) pairs, tokens laid out in span order.
func spansTab(spans [][2]int) compute.Spans {
	var tab, pos []int32
	start := 0
	for _, s := range spans {
		tab = append(tab, int32(start), int32(s[0]), int32(s[1]))
		for i := range s[0] {
			pos = append(pos, int32(s[1]+i))
		}
		start += s[0]
	}
	return compute.Spans{Tab: WrapI32(tab, len(spans), 3), Pos: WrapI32(pos, 1, len(pos))}
}

// latentInputs are one sequence's per-position attention inputs.
type latentInputs struct {
	qlat, q, lat, kr []float32
}

func randLatentInputs(rng *rand.Rand, L, H, c, r, w int) latentInputs {
	return latentInputs{qlat: randVec(rng, L*H*c), q: randVec(rng, L*H*w), lat: randVec(rng, L*c), kr: randVec(rng, L*r)}
}

// refLatent is the definition in float64 for position p of one sequence:
// keys are the positions sel (all of 0..p when nil), each latent as the
// cache's format gives it back.
func refLatent(in latentInputs, p int, sel []int32, H, c, r, w int, scale float32, f compute.SlotFormat, sink []float32) []float64 {
	key := func(k int) []float32 {
		v := append(slices.Clone(in.lat[k*c:(k+1)*c]), in.kr[k*r:(k+1)*r]...)
		switch f {
		case compute.SlotBF16:
			b := make([]byte, 2*len(v))
			quant.EncodeBF16(b, v)
			quant.DecodeBF16(v, b)
		case compute.SlotFP8MLA:
			b := make([]byte, quant.FP8MLABytes(c+r, r))
			quant.EncodeFP8MLA(b, v, r)
			quant.DecodeFP8MLA(v, b, r)
		}
		return v
	}
	if sel == nil {
		for k := range p + 1 {
			sel = append(sel, int32(k))
		}
	}
	out := make([]float64, H*c)
	for h := range H {
		ql := in.qlat[(p*H+h)*c : (p*H+h+1)*c]
		qr := in.q[(p*H+h)*w+w-r : (p*H+h+1)*w]
		lg := make([]float64, len(sel))
		mx := math.Inf(-1)
		for s, k := range sel {
			kv := key(int(k))
			var d float64
			for i := range c {
				d += float64(ql[i]) * float64(kv[i])
			}
			for i := range r {
				d += float64(qr[i]) * float64(kv[c+i])
			}
			lg[s] = d * float64(scale)
			mx = max(mx, lg[s])
		}
		var sum float64
		for s := range lg {
			lg[s] = math.Exp(lg[s] - mx)
			sum += lg[s]
		}
		if sink != nil {
			sum += math.Exp(float64(sink[h]) - mx)
		}
		for s, k := range sel {
			kv := key(int(k))
			for i := range c {
				out[h*c+i] += lg[s] / sum * float64(kv[i])
			}
		}
	}
	return out
}

// runLatent feeds a batch: spans of (sequence, first position, length),
// their rows taken from each sequence's inputs, with an optional
// selection per token; it returns the outputs in batch order.
func runLatent(b *Backend, lc *latentCache, ins []latentInputs, spans [][3]int, sel func(seq, p int) []int32, K, H, c, r, w int, scale float32, sink []float32) []float32 {
	var qlat, q, lat, kr []float32
	var seqs []int
	var tab [][2]int
	var selv, cnt []int32
	for _, s := range spans {
		in := ins[s[0]]
		seqs = append(seqs, s[0])
		tab = append(tab, [2]int{s[2], s[1]})
		for p := s[1]; p < s[1]+s[2]; p++ {
			qlat = append(qlat, in.qlat[p*H*c:(p+1)*H*c]...)
			q = append(q, in.q[p*H*w:(p+1)*H*w]...)
			lat = append(lat, in.lat[p*c:(p+1)*c]...)
			kr = append(kr, in.kr[p*r:(p+1)*r]...)
			if sel != nil {
				ks := sel(s[0], p)
				row := make([]int32, K)
				for i := range row {
					row[i] = -1
				}
				copy(row, ks)
				selv = append(selv, row...)
				cnt = append(cnt, int32(len(ks)))
			}
		}
	}
	T := len(lat) / c
	out := make([]float32, T*H*c)
	a := &compute.LatentArgs{Out: Wrap(out, T, H*c), QLat: Wrap(qlat, T, H*c), Q: Wrap(q, T, H*w), Lat: Wrap(lat, T, c), KRope: Wrap(kr, T, r),
		KV: lc.paged(seqs), Heads: H, Latent: c, Rope: r, Scale: scale}
	if sink != nil {
		a.Sink = Wrap(sink, 1, H)
	}
	if sel != nil {
		a.Sel, a.N = WrapI32(selv, T, K), WrapI32(cnt, 1, T)
	}
	b.LatentAttention(a, spansTab(tab))
	return out
}

// TestLatentAttention: outputs against the float64 definition over every
// causal position and over a selection (with and without sinks), in each
// cache format, and the
// same bits whether a sequence is fed at once, in pieces, or batched with
// another.
//
// Widths of 8 and 4 take the scalar dot products; 32 and 16 the vector
// families' row routine (every family runs).
func TestLatentAttention(t *testing.T) {
	for _, sh := range []struct{ c, r, w int }{{8, 4, 6}, {32, 16, 24}} {
		for _, k := range families() {
			t.Run(fmt.Sprintf("c=%d r=%d %v", sh.c, sh.r, k), func(t *testing.T) {
				testLatentAttention(t, k, sh.c, sh.r, sh.w)
			})
		}
	}
}

func testLatentAttention(t *testing.T, kernels Kernels, c, r, w int) {
	rng := rand.New(rand.NewPCG(11, 12))
	const L, H, K = 13, 3, 5
	scale := float32(0.3)
	ins := []latentInputs{randLatentInputs(rng, L, H, c, r, w), randLatentInputs(rng, L, H, c, r, w)}
	// A selection that skips positions: every other one, newest first, at most K.
	sel := func(seq, p int) []int32 {
		var s []int32
		for k := p; k >= 0 && len(s) < K; k -= 2 {
			s = append(s, int32(k))
		}
		return s
	}
	// Sinks (HY4): one logit per head in every denominator, large enough
	// to take a visible share of the probability.
	sinks := []float32{1.5, -0.5, 4}
	for _, f := range []compute.SlotFormat{compute.SlotF32, compute.SlotBF16, compute.SlotFP8MLA} {
		for _, mode := range []int{0, 1, 2} {
			withSel := mode == 1
			var sink []float32
			if mode == 2 {
				withSel, sink = true, sinks
			}
			sf := sel
			if !withSel {
				sf = nil
			}
			b := newWith(t, 2, kernels)
			run := func(spans [][3]int) map[[2]int][]float32 {
				lc := newLatentCache(b, 2, L, c, r, f)
				got := map[[2]int][]float32{}
				for _, step := range spans {
					out := runLatent(b, lc, ins, [][3]int{step}, sf, K, H, c, r, w, scale, sink)
					for i := range step[2] {
						got[[2]int{step[0], step[1] + i}] = out[i*H*c : (i+1)*H*c]
					}
				}
				return got
			}
			whole := run([][3]int{{0, 0, L}, {1, 0, L}})
			pieces := run([][3]int{{0, 0, 4}, {1, 0, 1}, {0, 4, 1}, {1, 1, 12}, {0, 5, 8}})
			// Batched: both sequences in the same steps.
			lc := newLatentCache(b, 2, L, c, r, f)
			batched := map[[2]int][]float32{}
			for _, step := range [][][3]int{{{0, 0, 6}, {1, 0, 2}}, {{1, 2, 11}, {0, 6, 7}}} {
				out := runLatent(b, lc, ins, step, sf, K, H, c, r, w, scale, sink)
				row := 0
				for _, s := range step {
					for i := range s[2] {
						batched[[2]int{s[0], s[1] + i}] = out[row*H*c : (row+1)*H*c]
						row++
					}
				}
			}
			for seq := range 2 {
				for p := range L {
					k := [2]int{seq, p}
					var sl []int32
					if withSel {
						sl = sel(seq, p)
					}
					want := refLatent(ins[seq], p, sl, H, c, r, w, scale, f, sink)
					for i, v := range want {
						if !closeTo(whole[k][i], v, 1) {
							t.Fatalf("%v sel=%v sink=%v seq %d position %d value %d: %g, want %g", f, withSel, sink != nil, seq, p, i, whole[k][i], v)
						}
					}
					if !slices.Equal(whole[k], pieces[k]) || !slices.Equal(whole[k], batched[k]) {
						t.Fatalf("%v sel=%v seq %d position %d: fed whole, in pieces and batched differ", f, withSel, seq, p)
					}
				}
			}
		}
	}
}

// refRoute is the routing of compute.Routing written out in float64:
// sigmoid scores, group scores from the two best biased scores, the
// TopGroups best groups, the K best biased scores among their experts.
func refRoute(logits, bias []float64, G, TG, K int, norm bool, scale float64) (idx []int, wt []float64) {
	E := len(logits)
	s := make([]float64, E)
	c := make([]float64, E)
	for e, l := range logits {
		s[e] = 1 / (1 + math.Exp(-l))
		c[e] = s[e] + bias[e]
	}
	per := E / G
	type gs struct {
		g int
		v float64
	}
	var groups []gs
	for g := range G {
		v := slices.Clone(c[g*per : (g+1)*per])
		slices.Sort(v)
		groups = append(groups, gs{g, v[per-1] + v[per-2]})
	}
	slices.SortFunc(groups, func(a, b gs) int {
		if a.v > b.v {
			return -1
		}
		return 1
	})
	var cand []int
	for _, g := range groups[:TG] {
		for e := g.g * per; e < (g.g+1)*per; e++ {
			cand = append(cand, e)
		}
	}
	slices.SortFunc(cand, func(a, b int) int {
		if c[a] > c[b] {
			return -1
		}
		return 1
	})
	idx = cand[:K]
	var sum float64
	for _, e := range idx {
		wt = append(wt, s[e])
		sum += s[e]
	}
	for i := range wt {
		if norm {
			wt[i] /= sum + 1e-20
		}
		wt[i] *= scale
	}
	return idx, wt
}

// TestRoutedMoE: y against experts evaluated in float64 with the
// reference routing, grouped and plain, normalized or not, SwiGLU clamped
// or not (the shared expert with the routed ones or exempt).
func TestRoutedMoE(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	b := New(2)
	const T, D, E, I = 7, 8, 12, 5
	mat := func(rows, cols int) (*compute.Matrix, []float32) {
		return testMatrix(rng, compute.F32, rows, cols, 0, 0)
	}
	gate, gd := mat(E, D)
	type ex struct{ w1, w2, w3 []float32 }
	var experts []compute.SwiGLU
	var dense []ex
	for range E + 1 {
		w1, d1 := mat(I, D)
		w2, d2 := mat(D, I)
		w3, d3 := mat(I, D)
		experts = append(experts, compute.SwiGLU{W1: w1, W2: w2, W3: w3})
		dense = append(dense, ex{d1, d2, d3})
	}
	bias := randVec(rng, E)
	for i := range bias {
		bias[i] *= 0.3
	}
	x := randVec(rng, T*D)
	// swiglu clamps the gate from above and the up projection to ±L.
	swiglu := func(e ex, xt []float32, L float64) []float64 {
		h := make([]float64, I)
		for i := range I {
			var g, u float64
			for d := range D {
				g += float64(e.w1[i*D+d]) * float64(xt[d])
				u += float64(e.w3[i*D+d]) * float64(xt[d])
			}
			g, u = min(g, L), min(max(u, -L), L)
			h[i] = g / (1 + math.Exp(-g)) * u
		}
		y := make([]float64, D)
		for d := range D {
			for i := range I {
				y[d] += float64(e.w2[d*I+i]) * h[i]
			}
		}
		return y
	}
	type clamp struct {
		limit           float64
		sharedUnclamped bool
	}
	for i, rt := range []compute.Routing{{Groups: 4, TopGroups: 2}, {Groups: 3, TopGroups: 1}, {Groups: 1, TopGroups: 1}, {Groups: 2, TopGroups: 1, Unnormalized: true}, {Groups: 1, TopGroups: 1}, {Groups: 1, TopGroups: 1}} {
		const K = 3
		// The last two: SwiGLU clamped at 0.3 (active for these inputs),
		// the shared expert too (DeepSeek-V4) or not (HY4).
		cl := []clamp{{math.Inf(1), false}, {math.Inf(1), false}, {math.Inf(1), false}, {math.Inf(1), false}, {0.3, false}, {0.3, true}}[i]
		a := &compute.MoEArgs{Gate: gate, Bias: Wrap(bias, 1, E), Experts: experts[:E], Shared: experts[E], K: K,
			Scoring: compute.Sigmoid, RoutedScale: 2.5, Limit: float32(cl.limit), SharedUnclamped: cl.sharedUnclamped}
		y := make([]float32, T*D)
		b.RoutedMoE(Wrap(y, T, D), Wrap(x, T, D), WrapI32(make([]int32, T), 1, T), a, rt)
		for tk := range T {
			xt := x[tk*D : (tk+1)*D]
			lg := make([]float64, E)
			for e := range E {
				for d := range D {
					lg[e] += float64(gd[e*D+d]) * float64(xt[d])
				}
			}
			b64 := make([]float64, E)
			for e := range E {
				b64[e] = float64(bias[e])
			}
			idx, wt := refRoute(lg, b64, rt.Groups, rt.TopGroups, K, !rt.Unnormalized, 2.5)
			sharedL := cl.limit
			if cl.sharedUnclamped {
				sharedL = math.Inf(1)
			}
			want := swiglu(dense[E], xt, sharedL)
			for k, e := range idx {
				for d, v := range swiglu(dense[e], xt, cl.limit) {
					want[d] += wt[k] * v
				}
			}
			for d := range D {
				if !closeTo(y[tk*D+d], want[d], 10) {
					t.Fatalf("%+v %+v token %d channel %d: %g, want %g", rt, cl, tk, d, y[tk*D+d], want[d])
				}
			}
		}
	}
}
