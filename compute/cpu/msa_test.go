package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/strata-inference/strata/compute"
)

// selectBlocks64 is the definition of the lightning indexer's block
// selection in float64 (spec/models/minimax-m3.md §4): max-pooled scores
// per block, the local blocks forced in, the top blocks kept, ascending.
func selectBlocks64(q []float64, keys [][]float32, p, B, K, local int) []int32 {
	nb := p/B + 1
	bs := make([]float64, nb)
	for i := range bs {
		bs[i] = math.Inf(-1)
	}
	for j := 0; j <= p; j++ {
		var s float64
		for c := range q {
			s += q[c] * float64(keys[j][c])
		}
		bs[j/B] = max(bs[j/B], s)
	}
	for i := range local {
		bs[max(0, p/B-i)] = math.Inf(1)
	}
	ids := make([]int, nb)
	for i := range ids {
		ids[i] = i
	}
	sort.SliceStable(ids, func(a, b int) bool { return bs[ids[a]] > bs[ids[b]] })
	ids = ids[:min(K, nb)]
	sort.Ints(ids)
	out := make([]int32, len(ids))
	for i, v := range ids {
		out[i] = int32(v)
	}
	return out
}

// TestBlockSelect: the op's selection equals the float64 definition's, for
// spans continuing from cached keys, tokens with fewer blocks than TopK
// (all kept) and more (blocks dropped), one and two local blocks, f32 and
// bf16 key slots; the keys land in their slots.
func TestBlockSelect(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	be := New(2)
	for _, f := range []compute.SlotFormat{compute.SlotF32, compute.SlotBF16} {
		for _, sh := range []struct{ H, d, B, K, local int }{{2, 16, 4, 3, 1}, {3, 8, 5, 4, 2}, {1, 32, 8, 4, 1}, {2, 8, 4, 3, 0}} {
			lens, past := []int{1, 9, 30}, []int{41, 0, 25}
			T := sum(lens)
			kc := newTestPaged(be, rng, len(lens), 80, sh.d, 8, f)
			hist := make([][][]float32, len(lens))
			for s := range lens {
				for p := range past[s] {
					kc.set(s, p, randVec(rng, sh.d))
					hist[s] = append(hist[s], kc.get(s, p))
				}
			}
			Q, K := randVec(rng, T*sh.H*sh.d), randVec(rng, T*sh.d)
			sel, cnt := make([]int32, T*sh.H*sh.K), make([]int32, T*sh.H)
			be.BlockSelect(&compute.BlockSelectArgs{
				Q: Wrap(Q, T, sh.H*sh.d), K: Wrap(K, T, sh.d), Keys: kc.p, Heads: sh.H, Dim: sh.d,
				Block: sh.B, TopK: sh.K, Local: sh.local, Sel: WrapI32(sel, T, sh.H*sh.K), N: WrapI32(cnt, T, sh.H),
			}, spansTensor(lens, past))
			start, dropped := 0, 0
			for s, n := range lens {
				all := hist[s]
				for i := range n {
					all = append(all, kc.get(s, past[s]+i))
					if f == compute.SlotF32 && !bitsEqual(all[len(all)-1], K[(start+i)*sh.d:(start+i+1)*sh.d]) {
						t.Fatalf("%v %+v span %d: slot %d does not hold its key", f, sh, s, past[s]+i)
					}
				}
				for i := range n {
					t0, p := start+i, past[s]+i
					for h := range sh.H {
						q := make([]float64, sh.d)
						for c := range q {
							q[c] = float64(Q[(t0*sh.H+h)*sh.d+c])
						}
						want := selectBlocks64(q, all, p, sh.B, sh.K, sh.local)
						got := sel[t0*sh.H*sh.K+h*sh.K : t0*sh.H*sh.K+h*sh.K+int(cnt[t0*sh.H+h])]
						if !slices.Equal(got, want) {
							t.Fatalf("%v %+v span %d token %d head %d: blocks %v, want %v", f, sh, s, i, h, got, want)
						}
						if p/sh.B+1 > sh.K {
							dropped++
						}
					}
				}
				start += n
			}
			if dropped == 0 {
				t.Fatalf("%+v: no token had blocks to drop", sh)
			}
		}
	}
}

// TestBlockSparseAttention against float64 softmax attention over the keys
// of the selected blocks up to each token's position, with selection heads
// shared by several KV heads' query heads and by fewer.
func TestBlockSparseAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	be := New(2)
	for _, f := range []compute.SlotFormat{compute.SlotF32, compute.SlotBF16} {
		for _, sh := range []struct{ H, Hkv, S, d, B, K int }{{4, 2, 2, 16, 4, 3}, {8, 2, 4, 8, 5, 2}, {4, 4, 1, 8, 3, 4}} {
			lens, past := []int{1, 6, 20}, []int{37, 0, 14}
			T := sum(lens)
			kvw := sh.Hkv * sh.d
			kv := newTestPaged(be, rng, len(lens), 64, 2*kvw, 8, f)
			hist := make([][][]float32, len(lens))
			for s := range lens {
				for p := range past[s] {
					kv.set(s, p, randVec(rng, 2*kvw))
					hist[s] = append(hist[s], kv.get(s, p))
				}
			}
			Q, K, V := randVec(rng, T*sh.H*sh.d), randVec(rng, T*kvw), randVec(rng, T*kvw)
			// Random ascending selections, always holding the token's own block.
			sel, cnt := make([]int32, T*sh.S*sh.K), make([]int32, T*sh.S)
			start := 0
			for s, n := range lens {
				for i := range n {
					t0, p := start+i, past[s]+i
					nb := p/sh.B + 1
					for h := range sh.S {
						ids := append([]int{p / sh.B}, rng.Perm(nb)[:min(nb, sh.K)]...)
						slices.Sort(ids)
						ids = slices.Compact(ids)[:min(nb, sh.K)]
						if !slices.Contains(ids, p/sh.B) {
							ids[len(ids)-1] = p / sh.B
						}
						for j, v := range ids {
							sel[t0*sh.S*sh.K+h*sh.K+j] = int32(v)
						}
						cnt[t0*sh.S+h] = int32(len(ids))
					}
				}
				start += n
			}
			out := make([]float32, T*sh.H*sh.d)
			scale := float32(1 / math.Sqrt(float64(sh.d)))
			be.BlockSparseAttention(&compute.BlockSparseArgs{
				CausalArgs: compute.CausalArgs{Out: Wrap(out, T, sh.H*sh.d), Q: Wrap(Q, T, sh.H*sh.d), K: Wrap(K, T, kvw), V: Wrap(V, T, kvw),
					KV: kv.p, Heads: sh.H, KVHeads: sh.Hkv, Dim: sh.d, Scale: scale},
				Sel: WrapI32(sel, T, sh.S*sh.K), N: WrapI32(cnt, T, sh.S), SelHeads: sh.S, TopK: sh.K, Block: sh.B,
			}, spansTensor(lens, past))
			start = 0
			for s, n := range lens {
				all := hist[s]
				for i := range n {
					all = append(all, kv.get(s, past[s]+i))
				}
				for i := range n {
					t0, p := start+i, past[s]+i
					for h := range sh.H {
						g, sg := h/(sh.H/sh.Hkv), h/(sh.H/sh.S)
						blocks := sel[t0*sh.S*sh.K+sg*sh.K : t0*sh.S*sh.K+sg*sh.K+int(cnt[t0*sh.S+sg])]
						var keys []int
						for j := 0; j <= p; j++ {
							if slices.Contains(blocks, int32(j/sh.B)) {
								keys = append(keys, j)
							}
						}
						q := Q[(t0*sh.H+h)*sh.d : (t0*sh.H+h+1)*sh.d]
						sc := make([]float64, len(keys))
						mx := math.Inf(-1)
						for k, j := range keys {
							for c := range sh.d {
								sc[k] += float64(q[c]) * float64(all[j][g*sh.d+c])
							}
							sc[k] *= float64(scale)
							mx = max(mx, sc[k])
						}
						var den float64
						for k := range sc {
							sc[k] = math.Exp(sc[k] - mx)
							den += sc[k]
						}
						for c := range sh.d {
							var o float64
							for k, j := range keys {
								o += sc[k] / den * float64(all[j][kvw+g*sh.d+c])
							}
							if got := out[(t0*sh.H+h)*sh.d+c]; math.Abs(float64(got)-o) > 2e-6*(1+math.Abs(o)) {
								t.Fatalf("%v %+v span %d token %d head %d ch %d: %g, want %g", f, sh, s, i, h, c, got, o)
							}
						}
					}
				}
				start += n
			}
		}
	}
}

// TestMSASplits: selection and attention give a token the same bits
// whether its span's earlier tokens came in the same step or in earlier
// ones, and whatever else is in the batch.
func TestMSASplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	be := New(2)
	const H, Hkv, S, d, di, B, K, L = 4, 2, 2, 8, 8, 4, 3, 40
	kvw := Hkv * d
	Q, Kk, V := randVec(rng, L*H*d), randVec(rng, L*kvw), randVec(rng, L*kvw)
	QI, KI := randVec(rng, L*S*di), randVec(rng, L*di)
	run := func(splits []int) ([]float32, []int32) {
		kv := newTestPaged(be, rng, 2, L+5, 2*kvw, 4, compute.SlotF32)
		kc := newTestPaged(be, rng, 2, L+5, di, 4, compute.SlotF32)
		var out []float32
		var sels []int32
		pos := 0
		for _, n := range splits {
			// Another sequence's 3 tokens come first in every batch.
			const o = 3
			T := o + n
			qi := append(randVec(rng, o*S*di), QI[pos*S*di:(pos+n)*S*di]...)
			ki := append(randVec(rng, o*di), KI[pos*di:(pos+n)*di]...)
			sel, cnt := make([]int32, T*S*K), make([]int32, T*S)
			sp := spansTensor([]int{o, n}, []int{pos, pos})
			be.BlockSelect(&compute.BlockSelectArgs{Q: Wrap(qi, T, S*di), K: Wrap(ki, T, di), Keys: kc.p, Heads: S, Dim: di,
				Block: B, TopK: K, Local: 1, Sel: WrapI32(sel, T, S*K), N: WrapI32(cnt, T, S)}, sp)
			q := append(randVec(rng, o*H*d), Q[pos*H*d:(pos+n)*H*d]...)
			k := append(randVec(rng, o*kvw), Kk[pos*kvw:(pos+n)*kvw]...)
			v := append(randVec(rng, o*kvw), V[pos*kvw:(pos+n)*kvw]...)
			y := make([]float32, T*H*d)
			be.BlockSparseAttention(&compute.BlockSparseArgs{
				CausalArgs: compute.CausalArgs{Out: Wrap(y, T, H*d), Q: Wrap(q, T, H*d), K: Wrap(k, T, kvw), V: Wrap(v, T, kvw),
					KV: kv.p, Heads: H, KVHeads: Hkv, Dim: d, Scale: 0.3},
				Sel: WrapI32(sel, T, S*K), N: WrapI32(cnt, T, S), SelHeads: S, TopK: K, Block: B}, sp)
			out = append(out, y[o*H*d:]...)
			for tt := o; tt < T; tt++ {
				for h := range S {
					sels = append(sels, sel[tt*S*K+h*K:tt*S*K+h*K+int(cnt[tt*S+h])]...)
				}
			}
			pos += n
		}
		return out, sels
	}
	one, oneSel := run([]int{L})
	for _, s := range [][]int{{1, 39}, {7, 16, 17}, slices.Repeat([]int{1}, L)} {
		got, gotSel := run(s)
		if !bitsEqual(got, one) || !slices.Equal(gotSel, oneSel) {
			t.Errorf("split %v differs from one feed", s)
		}
	}
}

// oai64 is the SwiGLU-OAI activation in float64.
func oai64(g, u, alpha, L float64) float64 {
	g = min(g, L)
	u = min(max(u, -L), L)
	return (u + 1) * g / (1 + math.Exp(-alpha*g))
}

// TestSwiGLUOAI and TestMoEOAI against float64 evaluations of the
// definitions, with the clamp active.
func TestSwiGLUOAI(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	be := New(2)
	const T, D, I = 5, 12, 7
	const alpha, L = 1.702, 0.8
	mk := func() (*compute.SwiGLU, [3][]float32) {
		w1, w3, w2 := randVec(rng, I*D), randVec(rng, I*D), randVec(rng, D*I)
		return &compute.SwiGLU{W1: compute.F32View(w1, I, D), W3: compute.F32View(w3, I, D), W2: compute.F32View(w2, D, I)}, [3][]float32{w1, w2, w3}
	}
	eval := func(w [3][]float32, x []float32) []float64 {
		h := make([]float64, I)
		for i := range I {
			var g, u float64
			for c := range D {
				g += float64(w[0][i*D+c]) * float64(x[c])
				u += float64(w[2][i*D+c]) * float64(x[c])
			}
			h[i] = oai64(g, u, alpha, L)
		}
		y := make([]float64, D)
		for r := range D {
			for i := range I {
				y[r] += float64(w[1][r*I+i]) * h[i]
			}
		}
		return y
	}
	sw, raw := mk()
	x := randVec(rng, T*D)
	y := make([]float32, T*D)
	be.SwiGLUOAI(Wrap(y, T, D), Wrap(x, T, D), sw, alpha, L)
	for t0 := range T {
		if d := maxDiff64(y[t0*D:(t0+1)*D], eval(raw, x[t0*D:(t0+1)*D])); d > 1e-5 {
			t.Fatalf("SwiGLUOAI row %d: max diff %g", t0, d)
		}
	}

	const E, K = 6, 2
	gate := randVec(rng, E*D)
	bias := randVec(rng, E)
	experts := make([]compute.SwiGLU, E)
	raws := make([][3][]float32, E)
	for e := range E {
		w, r := mk()
		experts[e], raws[e] = *w, r
	}
	shared, sraw := mk()
	a := &compute.MoEArgs{Gate: compute.F32View(gate, E, D), Bias: Wrap(bias, 1, E), Experts: experts, Shared: *shared,
		K: K, Scoring: compute.Sigmoid, RoutedScale: 2, Limit: L}
	be.MoEOAI(Wrap(y, T, D), Wrap(x, T, D), a, alpha)
	for t0 := range T {
		xr := x[t0*D : (t0+1)*D]
		s := make([]float64, E)
		for e := range E {
			var l float64
			for c := range D {
				l += float64(gate[e*D+c]) * float64(xr[c])
			}
			s[e] = 1 / (1 + math.Exp(-l))
		}
		ids := []int{0, 1, 2, 3, 4, 5}
		sort.SliceStable(ids, func(i, j int) bool { return s[ids[i]]+float64(bias[ids[i]]) > s[ids[j]]+float64(bias[ids[j]]) })
		want := eval(sraw, xr)
		den := s[ids[0]] + s[ids[1]]
		for _, e := range ids[:K] {
			ye := eval(raws[e], xr)
			for c := range want {
				want[c] += 2 * s[e] / den * ye[c]
			}
		}
		if d := maxDiff64(y[t0*D:(t0+1)*D], want); d > 1e-5 {
			t.Fatalf("MoEOAI row %d: max diff %g", t0, d)
		}
	}
}

// TestOAIBatchInvariance: SwiGLUOAI's and MoEOAI's outputs for a token are
// the same bits alone and in a batch (whose tokens share experts).
func TestOAIBatchInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	be := New(2)
	const T, D, I, E, K = 9, 24, 10, 5, 2
	mk := func() compute.SwiGLU {
		return compute.SwiGLU{W1: compute.F32View(randVec(rng, I*D), I, D), W3: compute.F32View(randVec(rng, I*D), I, D), W2: compute.F32View(randVec(rng, D*I), D, I)}
	}
	experts := make([]compute.SwiGLU, E)
	for e := range experts {
		experts[e] = mk()
	}
	a := &compute.MoEArgs{Gate: compute.F32View(randVec(rng, E*D), E, D), Bias: Wrap(randVec(rng, E), 1, E), Experts: experts, Shared: mk(),
		K: K, Scoring: compute.Sigmoid, RoutedScale: 2, Limit: 1}
	dense := mk()
	x := randVec(rng, T*D)
	for name, op := range map[string]func(y, x compute.Tensor){
		"MoEOAI":    func(y, x compute.Tensor) { be.MoEOAI(y, x, a, 1.702) },
		"SwiGLUOAI": func(y, x compute.Tensor) { be.SwiGLUOAI(y, x, &dense, 1.702, 1) },
	} {
		all := make([]float32, T*D)
		op(Wrap(all, T, D), Wrap(x, T, D))
		for tok := range T {
			one := make([]float32, D)
			op(Wrap(one, 1, D), Wrap(x[tok*D:(tok+1)*D], 1, D))
			if !bitsEqual(one, all[tok*D:(tok+1)*D]) {
				t.Fatalf("%s: token %d differs alone and in the batch", name, tok)
			}
		}
	}
}
