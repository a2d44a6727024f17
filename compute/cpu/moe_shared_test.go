package cpu

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/strata-inference/strata/compute"
)

// TestMoESharedGate: softmax routing without a bias, the top k weights
// renormalised, and the shared expert scaled by sigmoid of its gate
// (Qwen3.5-MoE), against the definition in float64.
func TestMoESharedGate(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	be := New(2)
	const T, D, E, K, I = 5, 16, 6, 2, 8
	mat := func(r, c int) (*compute.Matrix, []float32) {
		v := randVec(rng, r*c)
		return compute.F32View(v, r, c), v
	}
	gate, gv := mat(E, D)
	sg, sgv := mat(1, D)
	type ex struct{ w1, w2, w3 []float32 }
	var exs []ex
	a := &compute.MoEArgs{Gate: gate, K: K, Scoring: compute.Softmax, RoutedScale: 1, Limit: float32(math.Inf(1)), SharedGate: sg}
	for range E + 1 {
		m1, v1 := mat(I, D)
		m2, v2 := mat(D, I)
		m3, v3 := mat(I, D)
		exs = append(exs, ex{v1, v2, v3})
		a.Experts = append(a.Experts, compute.SwiGLU{W1: m1, W2: m2, W3: m3})
	}
	a.Shared, a.Experts = a.Experts[E], a.Experts[:E]
	x := randVec(rng, T*D)
	y := make([]float32, T*D)
	toks := make([]int32, T)
	be.MoE(Wrap(y, T, D), Wrap(x, T, D), WrapI32(toks, 1, T), a)
	dotv := func(w []float32, r, n int, v []float64) float64 {
		var s float64
		for c := range n {
			s += float64(w[r*n+c]) * v[c]
		}
		return s
	}
	expert := func(e ex, v []float64) []float64 {
		h := make([]float64, I)
		for i := range I {
			g, u := dotv(e.w1, i, D, v), dotv(e.w3, i, D, v)
			h[i] = g / (1 + math.Exp(-g)) * u
		}
		out := make([]float64, D)
		for r := range D {
			out[r] = dotv(e.w2, r, I, h)
		}
		return out
	}
	for t0 := range T {
		v := make([]float64, D)
		for c := range D {
			v[c] = float64(x[t0*D+c])
		}
		p := make([]float64, E)
		var den float64
		for e := range E {
			p[e] = math.Exp(dotv(gv, e, D, v))
			den += p[e]
		}
		order := []int{0, 1, 2, 3, 4, 5}
		sort.Slice(order, func(i, j int) bool { return p[order[i]] > p[order[j]] })
		want := make([]float64, D)
		top := p[order[0]] + p[order[1]]
		for _, e := range order[:K] {
			o := expert(exs[e], v)
			for r := range D {
				want[r] += p[e] / top * o[r]
			}
		}
		sh := expert(exs[E], v)
		s := 1 / (1 + math.Exp(-dotv(sgv, 0, D, v)))
		for r := range D {
			want[r] += s * sh[r]
			if got := float64(y[t0*D+r]); math.Abs(got-want[r]) > 1e-4*(1+math.Abs(want[r])) {
				t.Fatalf("token %d [%d] = %g, want %g", t0, r, got, want[r])
			}
		}
	}
}
