package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// TestRoPEHalf against the rotation of the definition in float64: the
// first R channels rotated in pairs (j, j+R/2), the rest untouched.
func TestRoPEHalf(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	be := New(2)
	for _, sh := range []struct{ rows, heads, d, R int }{{12, 4, 32, 8}, {300, 2, 256, 64}, {3, 3, 10, 10}} {
		x := randVec(rng, sh.rows*sh.d)
		pos := make([]int32, sh.rows/sh.heads)
		for i := range pos {
			pos[i] = int32(rng.IntN(100000))
		}
		inv := make([]float32, sh.R/2)
		for j := range inv {
			inv[j] = float32(math.Pow(1e7, -2*float64(j)/float64(sh.R)))
		}
		got := slices.Clone(x)
		be.RoPEHalf(Wrap(got, sh.rows, sh.d), WrapI32(pos, 1, len(pos)), sh.heads, Wrap(inv, 1, len(inv)))
		for r := range sh.rows {
			row, g := x[r*sh.d:(r+1)*sh.d], got[r*sh.d:(r+1)*sh.d]
			for j := range sh.d {
				want := float64(row[j])
				if j < sh.R {
					jj := j % (sh.R / 2)
					ang := float64(float32(pos[r/sh.heads]) * inv[jj])
					c, s := math.Cos(ang), math.Sin(ang)
					a, b := float64(row[jj]), float64(row[jj+sh.R/2])
					if j < sh.R/2 {
						want = a*c - b*s
					} else {
						want = b*c + a*s
					}
				}
				if d := math.Abs(float64(g[j]) - want); d > 1e-6*(1+math.Abs(want)) {
					t.Fatalf("%+v row %d ch %d: %g, want %g", sh, r, j, g[j], want)
				}
			}
		}
	}
}

// TestCausalAttention: grouped-query causal attention over the cache,
// against float64 softmax attention of the definition, for spans that
// continue from keys already cached and f32 or bf16 slots (whose keys and
// values are compared rounded to bf16, as the op reads them back).
func TestCausalAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	be := New(2)
	for _, f := range []compute.SlotFormat{compute.SlotF32, compute.SlotBF16} {
		for _, sh := range []struct{ H, Hkv, d int }{{4, 2, 32}, {8, 1, 16}, {3, 3, 8}} {
			lens, past := []int{1, 7, 40}, []int{9, 0, 30}
			T := sum(lens)
			kvw := sh.Hkv * sh.d
			kv := newTestPaged(be, rng, len(lens), 80, 2*kvw, 16, f)
			// The cached positions before each span.
			hist := make([][][]float32, len(lens))
			for s := range lens {
				for p := range past[s] {
					kv.set(s, p, randVec(rng, 2*kvw))
					hist[s] = append(hist[s], kv.get(s, p))
				}
			}
			Q, K, V := randVec(rng, T*sh.H*sh.d), randVec(rng, T*kvw), randVec(rng, T*kvw)
			out := make([]float32, T*sh.H*sh.d)
			scale := float32(1 / math.Sqrt(float64(sh.d)))
			be.CausalAttention(&compute.CausalArgs{
				Out: Wrap(out, T, sh.H*sh.d), Q: Wrap(Q, T, sh.H*sh.d), K: Wrap(K, T, kvw), V: Wrap(V, T, kvw),
				KV: kv.p, Heads: sh.H, KVHeads: sh.Hkv, Dim: sh.d, Scale: scale,
			}, spansTensor(lens, past))
			round := func(v []float32) []float32 {
				if f == compute.SlotF32 {
					return v
				}
				b := make([]byte, 2*len(v))
				quant.EncodeBF16(b, v)
				r := make([]float32, len(v))
				quant.DecodeBF16(r, b)
				return r
			}
			start := 0
			for s, n := range lens {
				all := hist[s]
				for i := range n {
					t0 := start + i
					all = append(all, round(append(slices.Clone(K[t0*kvw:(t0+1)*kvw]), V[t0*kvw:(t0+1)*kvw]...)))
				}
				for p := range all {
					if got := kv.get(s, p); !bitsEqual(got, all[p]) {
						t.Fatalf("%v %+v span %d: slot %d does not hold its keys and values", f, sh, s, p)
					}
				}
				for i := range n {
					t0 := start + i
					L := past[s] + i + 1
					for h := range sh.H {
						g := h / (sh.H / sh.Hkv)
						q := Q[(t0*sh.H+h)*sh.d : (t0*sh.H+h+1)*sh.d]
						sc := make([]float64, L)
						mx := math.Inf(-1)
						for p := range L {
							for j := range sh.d {
								sc[p] += float64(q[j]) * float64(all[p][g*sh.d+j])
							}
							sc[p] *= float64(scale)
							mx = max(mx, sc[p])
						}
						var den float64
						for p := range sc {
							sc[p] = math.Exp(sc[p] - mx)
							den += sc[p]
						}
						for j := range sh.d {
							var o float64
							for p := range L {
								o += sc[p] / den * float64(all[p][kvw+g*sh.d+j])
							}
							if got := out[(t0*sh.H+h)*sh.d+j]; math.Abs(float64(got)-o) > 2e-6*(1+math.Abs(o)) {
								t.Fatalf("%v %+v span %d token %d head %d ch %d: %g, want %g", f, sh, s, i, h, j, got, o)
							}
						}
					}
				}
				start += n
			}
		}
	}
}

// TestCausalAttentionSplits: a token's output is the same bits whether its
// span's earlier tokens came in the same step or earlier ones, and
// whatever else is in the batch.
func TestCausalAttentionSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	be := New(2)
	const H, Hkv, d, L = 4, 2, 16, 20
	kvw := Hkv * d
	Q, K, V := randVec(rng, L*H*d), randVec(rng, L*kvw), randVec(rng, L*kvw)
	run := func(splits []int) []float32 {
		kv := newTestPaged(be, rng, 2, L+5, 2*kvw, 4, compute.SlotF32)
		var out []float32
		pos := 0
		for _, n := range splits {
			// Another sequence's 3 tokens come first in every batch.
			q := append(randVec(rng, 3*H*d), Q[pos*H*d:(pos+n)*H*d]...)
			k := append(randVec(rng, 3*kvw), K[pos*kvw:(pos+n)*kvw]...)
			v := append(randVec(rng, 3*kvw), V[pos*kvw:(pos+n)*kvw]...)
			o := make([]float32, (3+n)*H*d)
			be.CausalAttention(&compute.CausalArgs{Out: Wrap(o, 3+n, H*d), Q: Wrap(q, 3+n, H*d), K: Wrap(k, 3+n, kvw), V: Wrap(v, 3+n, kvw),
				KV: kv.p, Heads: H, KVHeads: Hkv, Dim: d, Scale: 0.25}, spansTensor([]int{3, n}, []int{0, pos}))
			out = append(out, o[3*H*d:]...)
			pos += n
		}
		return out
	}
	one := run([]int{L})
	for _, s := range [][]int{{1, 19}, {7, 6, 7}, slices.Repeat([]int{1}, L)} {
		if !bitsEqual(run(s), one) {
			t.Errorf("split %v differs from one feed", s)
		}
	}
}

// TestGatingOps: SplitHalves, MulSigmoid, GatedRMSNorm and SwiGLU against
// their definitions.
func TestGatingOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	be := New(2)
	const T, m, n = 3, 4, 5
	x := randVec(rng, T*m*2*n)
	a, b := make([]float32, T*m*n), make([]float32, T*m*n)
	be.SplitHalves(Wrap(a, T, m*n), Wrap(b, T, m*n), Wrap(x, T, 2*m*n), n)
	for t0 := range T {
		for i := range m {
			for j := range n {
				if a[t0*m*n+i*n+j] != x[t0*2*m*n+i*2*n+j] || b[t0*m*n+i*n+j] != x[t0*2*m*n+i*2*n+n+j] {
					t.Fatalf("SplitHalves: row %d block %d value %d misplaced", t0, i, j)
				}
			}
		}
	}
	y, g := randVec(rng, 40), randVec(rng, 40)
	y0 := slices.Clone(y)
	be.MulSigmoid(Wrap(y, 4, 10), Wrap(g, 4, 10))
	for i := range y {
		want := float64(y0[i]) / (1 + math.Exp(-float64(g[i])))
		if math.Abs(float64(y[i])-want) > 1e-6*(1+math.Abs(want)) {
			t.Fatalf("MulSigmoid[%d] = %g, want %g", i, y[i], want)
		}
	}
	const R, w = 6, 16
	xs, zs, ws := randVec(rng, R*w), randVec(rng, R*w), randVec(rng, w)
	ys := make([]float32, R*w)
	be.GatedRMSNorm(Wrap(ys, R, w), Wrap(xs, R, w), Wrap(zs, R, w), Wrap(ws, 1, w), 1e-6)
	for r := range R {
		var ss float64
		for _, v := range xs[r*w : (r+1)*w] {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/w+1e-6)
		for i := range w {
			z := float64(zs[r*w+i])
			want := float64(ws[i]) * float64(xs[r*w+i]) * inv * z / (1 + math.Exp(-z))
			if got := float64(ys[r*w+i]); math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("GatedRMSNorm[%d][%d] = %g, want %g", r, i, got, want)
			}
		}
	}
	const D, I = 12, 7
	w1, w3, w2 := randVec(rng, I*D), randVec(rng, I*D), randVec(rng, D*I)
	sw := &compute.SwiGLU{W1: compute.F32View(w1, I, D), W3: compute.F32View(w3, I, D), W2: compute.F32View(w2, D, I)}
	xx := randVec(rng, 2*D)
	yy := make([]float32, 2*D)
	be.SwiGLU(Wrap(yy, 2, D), Wrap(xx, 2, D), sw)
	for t0 := range 2 {
		h := make([]float64, I)
		for i := range I {
			var gg, u float64
			for c := range D {
				gg += float64(w1[i*D+c]) * float64(xx[t0*D+c])
				u += float64(w3[i*D+c]) * float64(xx[t0*D+c])
			}
			h[i] = gg / (1 + math.Exp(-gg)) * u
		}
		for r := range D {
			var want float64
			for i := range I {
				want += float64(w2[r*I+i]) * h[i]
			}
			if got := float64(yy[t0*D+r]); math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
				t.Fatalf("SwiGLU[%d][%d] = %g, want %g", t0, r, got, want)
			}
		}
	}
}
