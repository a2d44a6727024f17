package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// SplitHalves implements compute.Gating.
func (b *Backend) SplitHalves(a, c, x compute.Tensor, n int) {
	if n <= 0 || x.Cols%(2*n) != 0 {
		panic(fmt.Sprintf("cpu: SplitHalves of rows of %d into halves of %d", x.Cols, n))
	}
	m := x.Cols / (2 * n)
	checkShape("SplitHalves a", a, x.Rows, m*n)
	checkShape("SplitHalves b", c, x.Rows, m*n)
	av, cv, xv := F32(a), F32(c), F32(x)
	for r := range m * x.Rows {
		src := xv[r*2*n : (r+1)*2*n]
		copy(av[r*n:(r+1)*n], src[:n])
		copy(cv[r*n:(r+1)*n], src[n:])
	}
}

// MulSigmoid implements compute.Gating.
func (b *Backend) MulSigmoid(y, g compute.Tensor) {
	checkShape("MulSigmoid g", g, y.Rows, y.Cols)
	yv, gv := F32(y), F32(g)
	for i, v := range gv {
		yv[i] *= sigmoid(v)
	}
}

// SwiGLU implements compute.Gating with MoE's expert kernel, unclamped.
func (b *Backend) SwiGLU(y, x compute.Tensor, w *compute.SwiGLU) {
	checkShape("SwiGLU y", y, x.Rows, w.W2.Rows)
	b.swiglu(w, F32(y), F32(x), x.Rows, float32(math.Inf(1)))
}
