package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// TestRoutedExpertsMatchMoE: Route, RunExperts over the (token, k) pairs
// split into two groups in a shuffled order (as two devices would hold
// them), then Combine, give MoE's output bit for bit, for hash routing
// (a token whose row repeats an expert included), learned routing with and without a
// bias under every scoring, a gated shared expert, and F32, FP8 and FP4
// experts.
func TestRoutedExpertsMatchMoE(t *testing.T) {
	const D, E, I, V = 64, 8, 32, 50
	for _, tc := range []struct {
		name    string
		K       int
		hash    bool
		bias    bool
		scoring compute.Scoring
		gate    bool
		dtype   compute.DType
	}{
		{"hash/sqrtsoftplus/fp4", 2, true, false, compute.SqrtSoftplus, false, compute.FP4},
		{"learned-bias/sqrtsoftplus/fp8", 3, false, true, compute.SqrtSoftplus, false, compute.FP8},
		{"learned/softmax/gated/f32", 2, false, false, compute.Softmax, true, compute.F32},
		{"learned-bias/sigmoid/f32", 1, false, true, compute.Sigmoid, false, compute.F32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, uint64(tc.K)))
			mat := func(r, c int, dt compute.DType) *compute.Matrix {
				v := randVec(rng, r*c)
				switch dt {
				case compute.FP8:
					d, s := quant.QuantizeFP8Block(v, r, c)
					return &compute.Matrix{DType: compute.FP8, Rows: r, Cols: c, Data: d, Scale: s, BlockRows: 128, BlockCols: 128}
				case compute.FP4:
					d, s := quant.QuantizeFP4(v, r, c)
					return &compute.Matrix{DType: compute.FP4, Rows: r, Cols: c, Data: d, Scale: s}
				}
				return compute.F32View(v, r, c)
			}
			be := New(2)
			a := &compute.MoEArgs{Gate: mat(E, D, compute.F32), K: tc.K, Scoring: tc.scoring, RoutedScale: 1.5, Limit: 3}
			for range E {
				a.Experts = append(a.Experts, compute.SwiGLU{W1: mat(I, D, tc.dtype), W2: mat(D, I, tc.dtype), W3: mat(I, D, tc.dtype)})
			}
			a.Shared = compute.SwiGLU{W1: mat(I, D, compute.F32), W2: mat(D, I, compute.F32), W3: mat(I, D, compute.F32)}
			if tc.bias {
				a.Bias = Wrap(randVec(rng, E), 1, E)
			}
			if tc.gate {
				a.SharedGate = mat(1, D, compute.F32)
			}
			if tc.hash {
				tab := make([]int32, V*tc.K)
				for i := range tab {
					tab[i] = int32(rng.IntN(E))
				}
				// Token 0 goes to expert 5 twice: Combine must keep k's
				// order between equal experts. (MoE's scratch holds T rows
				// per expert, so the batches that have token 0 are large.)
				tab[0], tab[1] = 5, 5
				a.Tid2Eid = WrapI32(tab, V, tc.K)
			}
			for _, T := range []int{1, 7, 33} {
				K := tc.K
				x := randVec(rng, T*D)
				for i := range x {
					x[i] *= 3 // reach the clamp
				}
				toks := make([]int32, T)
				for i := range toks {
					toks[i] = int32(1 + rng.IntN(V-1))
				}
				if T >= 7 {
					toks[0] = 0
				}
				want := make([]float32, T*D)
				be.MoE(Wrap(want, T, D), Wrap(x, T, D), WrapI32(toks, 1, T), a)

				idx, wt := make([]int32, T*K), make([]float32, T*K)
				be.Route(WrapI32(idx, T, K), Wrap(wt, T, K), Wrap(x, T, D), WrapI32(toks, 1, T), a)
				// The pairs in a shuffled order, cut in two groups.
				pairs := rng.Perm(T * K)
				cut := len(pairs) / 3
				slot := make([]int32, T*K)
				ye := make([]float32, T*K*D)
				row := 0
				for _, g := range [][]int{pairs[:cut], pairs[cut:]} {
					xs := make([]float32, len(g)*D)
					eid := make([]int32, len(g))
					for i, p := range g {
						copy(xs[i*D:], x[p/K*D:(p/K+1)*D])
						eid[i] = idx[p]
						slot[p] = int32(row + i)
					}
					ys := make([]float32, len(g)*D)
					sub := *a
					sub.Experts = make([]compute.SwiGLU, E) // only the experts the group names
					for _, e := range eid {
						sub.Experts[e] = a.Experts[e]
					}
					be.RunExperts(Wrap(ys, len(g), D), Wrap(xs, len(g), D), WrapI32(eid, 1, len(g)), &sub)
					copy(ye[row*D:], ys)
					row += len(g)
				}
				got := make([]float32, T*D)
				be.Combine(Wrap(got, T, D), Wrap(x, T, D), Wrap(ye, T*K, D), WrapI32(idx, T, K), Wrap(wt, T, K), WrapI32(slot, T, K), a)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("T=%d: y[%d][%d] = %v, MoE %v", T, i/D, i%D, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestRunExpertsMissingWeights: a row sent to a backend that does not hold
// its expert fails loudly instead of computing with nothing.
func TestRunExpertsMissingWeights(t *testing.T) {
	be := New(1)
	a := &compute.MoEArgs{Experts: make([]compute.SwiGLU, 4), K: 1}
	defer func() {
		if r := recover(); r == nil || !contains(fmt.Sprint(r), "expert 2, whose weights are not on this backend") {
			t.Fatalf("panic %v", r)
		}
	}()
	be.RunExperts(Wrap(make([]float32, 4), 1, 4), Wrap(make([]float32, 4), 1, 4), WrapI32([]int32{2}, 1, 1), a)
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
