package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

var _ compute.GeGLU = (*Backend)(nil)

// geluTanh is PyTorch's tanh approximation of GELU, in float64.
func geluTanh(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
}

// elementwise runs fn over [0, n) in parallel chunks when n is large.
func (b *Backend) elementwise(n int, fn func(lo, hi int)) {
	if n < 1<<16 {
		fn(0, n)
		return
	}
	b.s.parallelFor(n, fn)
}

// GeluMul implements compute.GeGLU.
func (b *Backend) GeluMul(y, gate, up compute.Tensor) {
	checkShape("GeluMul gate", gate, y.Rows, y.Cols)
	checkShape("GeluMul up", up, y.Rows, y.Cols)
	yv, g, u := F32(y), F32(gate), F32(up)
	b.elementwise(len(yv), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			yv[i] = geluTanh(g[i]) * u[i]
		}
	})
}

// MulScalar implements compute.GeGLU.
func (b *Backend) MulScalar(x compute.Tensor, s float32) {
	xv := F32(x)
	b.elementwise(len(xv), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xv[i] *= s
		}
	})
}

// TanhCap implements compute.GeGLU.
func (b *Backend) TanhCap(x compute.Tensor, c float32) {
	xv := F32(x)
	cc := float64(c)
	b.elementwise(len(xv), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xv[i] = float32(cc * math.Tanh(float64(xv[i])/cc))
		}
	})
}

// GeluExperts implements compute.GeGLU: tokens are grouped by expert so
// that each expert's products run once over the tokens routed to it, and
// each token's expert outputs are summed in rank order afterwards.
func (b *Backend) GeluExperts(y, x, logits compute.Tensor, a *compute.GeluExpertsArgs) {
	T, D := x.Rows, x.Cols
	E, K := len(a.Experts), a.K
	checkShape("GeluExperts y", y, T, D)
	checkShape("GeluExperts logits", logits, T, E)
	if K <= 0 || K > E {
		panic(fmt.Sprintf("cpu: GeluExperts choosing %d of %d experts", K, E))
	}
	scale := F32(a.PerExpertScale)
	if len(scale) != E {
		panic(fmt.Sprintf("cpu: GeluExperts has %d per-expert scales for %d experts", len(scale), E))
	}
	lg, xv, yv := F32(logits), F32(x), F32(y)

	// Route: per token its K experts (best first) and their weights.
	idx := make([]int32, T*K)
	wt := make([]float32, T*K)
	p := make([]float32, E)
	for t := range T {
		row := lg[t*E : (t+1)*E]
		mx := row[0]
		for _, v := range row[1:] {
			mx = max(mx, v)
		}
		var sum float64
		for e, v := range row {
			ex := math.Exp(float64(v) - float64(mx))
			p[e] = float32(ex)
			sum += ex
		}
		for e := range p {
			p[e] = float32(float64(p[e]) / sum)
		}
		it := idx[t*K : (t+1)*K]
		b.TopK(it, p, K)
		var top float32
		for _, e := range it {
			top += p[e]
		}
		for k, e := range it {
			wt[t*K+k] = p[e] / top * scale[e]
		}
	}

	byExpert := make([][]int32, E) // entries t*K+k
	for i, e := range idx {
		byExpert[e] = append(byExpert[e], int32(i))
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	out := b.scratchF32(T * K * D) // expert output of entry t*K+k
	xe := b.scratchF32(T * D)
	ye := b.scratchF32(T * D)
	for e, list := range byExpert {
		if len(list) == 0 {
			continue
		}
		n := len(list)
		for i, tk := range list {
			t := int(tk) / K
			copy(xe[i*D:(i+1)*D], xv[t*D:(t+1)*D])
		}
		b.geluExpert(&a.Experts[e], ye[:n*D], xe[:n*D], n)
		for i, tk := range list {
			copy(out[int(tk)*D:(int(tk)+1)*D], ye[i*D:(i+1)*D])
		}
	}
	clear(yv)
	for t := range T {
		for k := range K {
			axpy(yv[t*D:(t+1)*D], wt[t*K+k], out[(t*K+k)*D:(t*K+k+1)*D])
		}
	}
}

// geluExpert computes Down·(gelu(Gate·x) ⊙ Up·x) for n rows.
func (b *Backend) geluExpert(ex *compute.GeluExpert, y, x []float32, n int) {
	I := ex.Down.Cols
	if ex.GateUp.Rows != 2*I {
		panic(fmt.Sprintf("cpu: GeluExperts expert with gate-up %d×%d and down %d×%d", ex.GateUp.Rows, ex.GateUp.Cols, ex.Down.Rows, ex.Down.Cols))
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	gu := b.scratchF32(n * 2 * I)
	h := b.scratchF32(n * I)
	b.MatMulF32(gu, x, n, ex.GateUp)
	for r := range n {
		g, u := gu[r*2*I:r*2*I+I], gu[r*2*I+I:(r+1)*2*I]
		hr := h[r*I : (r+1)*I]
		for i := range hr {
			hr[i] = geluTanh(g[i]) * u[i]
		}
	}
	b.MatMulF32(y, h, n, ex.Down)
}
