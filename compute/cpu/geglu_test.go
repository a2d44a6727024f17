package cpu

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/strata-inference/strata/compute"
)

func refGelu(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// TestGeluOps: GeluMul, MulScalar and TanhCap against their definitions,
// including GELU's known values (gelu(0) = 0, gelu(x) → x for large x,
// → 0 for large negative x).
func TestGeluOps(t *testing.T) {
	b := New(2)
	rng := rand.New(rand.NewPCG(3, 4))
	g := append(randVec(rng, 61), 0, 30, -30)
	u := randVec(rng, len(g))
	y := make([]float32, len(g))
	b.GeluMul(Wrap(y, 1, len(g)), Wrap(g, 1, len(g)), Wrap(u, 1, len(g)))
	for i := range y {
		want := refGelu(float64(g[i])) * float64(u[i])
		if math.Abs(float64(y[i])-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Fatalf("GeluMul element %d: %g, want %g", i, y[i], want)
		}
	}
	n := len(g)
	if y[n-3] != 0 || y[n-2] != 30*u[n-2] || y[n-1] != 0 {
		t.Fatalf("gelu(0, 30, -30)·u = %v, want 0, 30u, 0", y[n-3:])
	}
	x := append([]float32(nil), g...)
	b.MulScalar(Wrap(x, 1, n), 0.5)
	for i := range x {
		if x[i] != g[i]*0.5 {
			t.Fatalf("MulScalar element %d: %g, want %g", i, x[i], g[i]*0.5)
		}
	}
	x = append([]float32(nil), g...)
	b.TanhCap(Wrap(x, 1, n), 5)
	for i := range x {
		want := 5 * math.Tanh(float64(g[i])/5)
		if math.Abs(float64(x[i])-want) > 1e-6 || math.Abs(float64(x[i])) > 5 {
			t.Fatalf("TanhCap element %d: %g, want %g", i, x[i], want)
		}
	}
}

// TestGeluExperts: routing (softmax, top-k, renormalization, per-expert
// scale) and the experts' products against a float64 evaluation of the
// definition, and a token's output is the same bits alone and in a batch.
func TestGeluExperts(t *testing.T) {
	b := New(2)
	rng := rand.New(rand.NewPCG(5, 6))
	const T, D, E, I, K = 9, 12, 5, 7, 2
	var ex []compute.GeluExpert
	var dense [][2][]float32
	for range E {
		gu, gud := testMatrix(rng, compute.F32, 2*I, D, 0, 0)
		dn, dnd := testMatrix(rng, compute.F32, D, I, 0, 0)
		ex = append(ex, compute.GeluExpert{GateUp: gu, Down: dn})
		dense = append(dense, [2][]float32{gud, dnd})
	}
	scale := randVec(rng, E)
	args := &compute.GeluExpertsArgs{Experts: ex, PerExpertScale: Wrap(scale, 1, E), K: K}
	x := randVec(rng, T*D)
	lg := randVec(rng, T*E)
	for i := range lg {
		lg[i] *= 4
	}
	y := make([]float32, T*D)
	b.GeluExperts(Wrap(y, T, D), Wrap(x, T, D), Wrap(lg, T, E), args)
	for tk := range T {
		p := make([]float64, E)
		var sum float64
		for e := range E {
			p[e] = math.Exp(float64(lg[tk*E+e]))
			sum += p[e]
		}
		order := []int{0, 1, 2, 3, 4}
		sort.SliceStable(order, func(i, j int) bool { return p[order[i]] > p[order[j]] })
		top := p[order[0]] + p[order[1]]
		want := make([]float64, D)
		for _, e := range order[:K] {
			w := p[e] / top * float64(scale[e])
			gud, dnd := dense[e][0], dense[e][1]
			h := make([]float64, I)
			for i := range I {
				var gv, uv float64
				for c := range D {
					gv += float64(gud[i*D+c]) * float64(x[tk*D+c])
					uv += float64(gud[(I+i)*D+c]) * float64(x[tk*D+c])
				}
				h[i] = refGelu(gv) * uv
			}
			for r := range D {
				var s float64
				for i := range I {
					s += float64(dnd[r*I+i]) * h[i]
				}
				want[r] += w * s
			}
		}
		for r := range D {
			if d := math.Abs(float64(y[tk*D+r]) - want[r]); d > 2e-5*math.Max(1, math.Abs(want[r])) {
				t.Fatalf("token %d channel %d: %g, want %g", tk, r, y[tk*D+r], want[r])
			}
		}
		one := make([]float32, D)
		b.GeluExperts(Wrap(one, 1, D), Wrap(x[tk*D:(tk+1)*D], 1, D), Wrap(lg[tk*E:(tk+1)*E], 1, E), args)
		for r := range D {
			if one[r] != y[tk*D+r] {
				t.Fatalf("token %d alone: channel %d is %g, in the batch %g", tk, r, one[r], y[tk*D+r])
			}
		}
	}
}
