package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// MoE implements compute.Experts (DeepSeek-V4 spec §3, "MoE"): tokens are
// grouped by expert so that each expert's products run once over all the
// tokens routed to it.
func (b *Backend) MoE(y, x, tokens compute.Tensor, a *compute.MoEArgs) {
	T, D := x.Rows, x.Cols
	E, K := a.Gate.Rows, a.K
	checkShape("MoE y", y, T, D)
	toks := I32(tokens)
	if len(toks) != T {
		panic(fmt.Sprintf("cpu: MoE of %d rows with %d tokens", T, len(toks)))
	}
	xv, yv := F32(x), F32(y)
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	scores := b.scratchF32(T * E)
	b.MatMulF32(scores, xv, T, a.Gate)
	for t := range T {
		score(scores[t*E:(t+1)*E], a.Scoring)
	}

	// Route: per token K experts and their weights.
	mb := &b.s.moe
	mb.idx = growInts(mb.idx, T*K)
	mb.wt = grow(mb.wt, T*K)
	mb.biased = grow(mb.biased, E)
	idx, wt, biased := mb.idx, mb.wt, mb.biased
	var bias []float32
	var tid []int32
	if a.Tid2Eid.Valid() {
		tid = I32(a.Tid2Eid)
	} else if a.Bias.Valid() {
		bias = F32(a.Bias)
	}
	for t := range T {
		s := scores[t*E : (t+1)*E]
		it := idx[t*K : (t+1)*K]
		if tid != nil {
			copy(it, tid[int(toks[t])*K:(int(toks[t])+1)*K])
		} else {
			if bias == nil {
				topK(it, s, K)
			} else {
				for e := range biased {
					biased[e] = s[e] + bias[e]
				}
				topK(it, biased, K)
			}
		}
		var sum float32
		for k, e := range it {
			wt[t*K+k] = s[e]
			sum += s[e]
		}
		for k := range K {
			wt[t*K+k] = wt[t*K+k] / (sum + 1e-20) * a.RoutedScale
		}
	}

	// Group the entries t*K+k by expert, in increasing order within each.
	mb.off = growInts(mb.off, E+1)
	mb.list = growInts(mb.list, T*K)
	off, list := mb.off, mb.list
	clear(off)
	for _, e := range idx {
		off[e+1]++
	}
	for e := range E {
		off[e+1] += off[e]
	}
	mb.fill = growInts(mb.fill, E)
	fill := mb.fill
	copy(fill, off[:E])
	for i, e := range idx {
		list[fill[e]] = int32(i)
		fill[e]++
	}
	clear(yv)
	xe := b.scratchF32(T * D)
	ye := b.scratchF32(T * D)
	for e := range E {
		list := list[off[e]:off[e+1]]
		if len(list) == 0 {
			continue
		}
		n := len(list)
		for i, tk := range list {
			t := int(tk) / K
			copy(xe[i*D:(i+1)*D], xv[t*D:(t+1)*D])
		}
		b.swiglu(&a.Experts[e], ye[:n*D], xe[:n*D], n, a.Limit)
		for i, tk := range list {
			t := int(tk) / K
			axpy(yv[t*D:(t+1)*D], wt[tk], ye[i*D:(i+1)*D])
		}
	}
	shared := b.scratchF32(T * D)
	b.swiglu(&a.Shared, shared, xv, T, sharedLimit(a))
	if a.SharedGate == nil {
		for i := range yv {
			yv[i] += shared[i]
		}
		return
	}
	gate := b.scratchF32(T)
	b.MatMulF32(gate, xv, T, a.SharedGate)
	for t := range T {
		axpy(yv[t*D:(t+1)*D], sigmoid(gate[t]), shared[t*D:(t+1)*D])
	}
}

// swiglu computes w2·(silu(min(w1·x, L)) ⊙ clamp(w3·x, -L, L)) for n rows.
func (b *Backend) swiglu(ex *compute.SwiGLU, y, x []float32, n int, L float32) {
	I := ex.W1.Rows
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	g := b.scratchF32(n * I)
	u := b.scratchF32(n * I)
	b.MatMulF32(g, x, n, ex.W1)
	b.MatMulF32(u, x, n, ex.W3)
	for i := range g {
		gv := min(g[i], L)
		uv := min(max(u[i], -L), L)
		g[i] = gv * sigmoid(gv) * uv
	}
	b.MatMulF32(y, g, n, ex.W2)
}

// sharedLimit is the clamp of a's shared expert: Limit unless
// SharedUnclamped.
func sharedLimit(a *compute.MoEArgs) float32 {
	if a.SharedUnclamped {
		return float32(math.Inf(1))
	}
	return a.Limit
}

// score applies the router's scoring function to logits in place.
func score(s []float32, fn compute.Scoring) {
	switch fn {
	case compute.SqrtSoftplus:
		for i, v := range s {
			s[i] = float32(math.Sqrt(softplus(float64(v))))
		}
	case compute.Sigmoid:
		for i, v := range s {
			s[i] = sigmoid(v)
		}
	case compute.Softmax:
		softmax32(s)
	}
}

// softplus is log(1+e^x) with PyTorch's threshold: x itself above 20.
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// moeBufs are MoE's routing tables, reused call to call.
type moeBufs struct {
	idx, off, fill, list []int32
	wt, biased           []float32
}
