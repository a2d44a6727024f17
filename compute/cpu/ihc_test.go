package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
)

// TestIHC: IHCPre's input and write-back weights and IHCPost's update
// against spec/models/hy4.md §2 written out in float64, and the same
// bits for a token whether it runs alone or in a batch.
func TestIHC(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	b := New(2)
	const T, C, D = 5, 4, 12
	p := compute.IHCParams{HC: C, D: D, NormEps: 1e-5, Eps: 1e-6, Magnitude: 2}
	fn, fd := testMatrix(rng, compute.F32, 2*C, C*D, 0, 0)
	base, scale := randVec(rng, 2*C), []float32{0.7, -1.3}
	w := &compute.HC{Fn: fn, Base: Wrap(base, 1, 2*C), Scale: Wrap(scale, 1, 2)}
	h := randVec(rng, T*C*D)
	for i := range h {
		h[i] *= float32(1 + i%7) // channels of different sizes
	}
	y := randVec(rng, T*D)
	x := make([]float32, T*D)
	post := make([]float32, T*C)
	b.IHCPre(Wrap(x, T, D), Wrap(post, T, C), Wrap(h, T, C*D), w, p)
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	for tk := range T {
		f := h[tk*C*D : (tk+1)*C*D]
		var ss float64
		for _, v := range f {
			ss += float64(v) * float64(v)
		}
		rms := 1 / math.Sqrt(ss/float64(len(f))+float64(p.NormEps))
		mix := make([]float64, 2*C)
		for i := range mix {
			for j, v := range f {
				mix[i] += float64(fd[i*C*D+j]) * float64(v)
			}
			mix[i] *= rms
		}
		for c := range C {
			wantPost := float64(p.Magnitude)*sig(mix[C+c]*float64(scale[1])+float64(base[C+c])) + float64(p.Eps)
			if !closeTo(post[tk*C+c], wantPost, 2) {
				t.Fatalf("token %d channel %d: post %g, want %g", tk, c, post[tk*C+c], wantPost)
			}
		}
		for d := range D {
			var want, l1 float64
			for c := range C {
				pre := sig(mix[c]*float64(scale[0])+float64(base[c])) + float64(p.Eps)
				want += pre * float64(f[c*D+d])
				l1 += math.Abs(pre * float64(f[c*D+d]))
			}
			if !closeTo(x[tk*D+d], want, l1) {
				t.Fatalf("token %d: x[%d] %g, want %g", tk, d, x[tk*D+d], want)
			}
		}
		// One token alone gives the same bits.
		x1, p1 := make([]float32, D), make([]float32, C)
		b.IHCPre(Wrap(x1, 1, D), Wrap(p1, 1, C), Wrap(slices.Clone(f), 1, C*D), w, p)
		if !slices.Equal(x1, x[tk*D:(tk+1)*D]) || !slices.Equal(p1, post[tk*C:(tk+1)*C]) {
			t.Fatalf("token %d: alone and batched differ", tk)
		}
	}
	h2 := slices.Clone(h)
	b.IHCPost(Wrap(h2, T, C*D), Wrap(y, T, D), Wrap(post, T, C), p)
	for tk := range T {
		for c := range C {
			for d := range D {
				i := (tk*C+c)*D + d
				want := float64(h[i]) + float64(post[tk*C+c])*float64(y[tk*D+d])
				if !closeTo(h2[i], want, math.Abs(float64(h[i]))+math.Abs(want)) {
					t.Fatalf("token %d channel %d: h[%d] %g, want %g", tk, c, d, h2[i], want)
				}
			}
		}
	}
}
