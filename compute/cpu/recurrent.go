package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// convBlock is how many channels one work item of CausalConv covers.
const convBlock = 512

// CausalConv implements compute.Recurrent. Work items are a span's block
// of channels: each reads its channels' history, convolves the span's
// rows and writes the new history, independently of the others.
func (b *Backend) CausalConv(a *compute.ConvArgs, sp compute.Spans) {
	T, C := a.X.Rows, a.X.Cols
	K := a.W.Rows
	checkShape("CausalConv Y", a.Y, T, C)
	checkShape("CausalConv W", a.W, K, C)
	if K < 1 {
		panic(fmt.Sprintf("cpu: CausalConv with %d taps", K))
	}
	x, y, w := F32(a.X), F32(a.Y), F32(a.W)
	spans := spansOf(sp)
	blocks := (C + convBlock - 1) / convBlock
	hist := K - 1
	bufs := newPerWorker(b.s, func() *[]float32 { v := make([]float32, 2*hist*convBlock); return &v })
	b.s.forItems(len(spans)*blocks, func(worker, it int) {
		si, blk := it/blocks, it%blocks
		s := spans[si]
		c0, c1 := blk*convBlock, min(C, (blk+1)*convBlock)
		n := c1 - c0
		var st slots
		if hist > 0 {
			st = spanSlots(a.State, si)
		}
		buf := *bufs.get(worker)
		// h's first K-1 rows: the history, oldest first.
		old := buf[:hist*n]
		for j := range hist {
			copy(old[j*n:(j+1)*n], st.slotRange(j, c0, c1, buf[hist*n+j*n:hist*n+(j+1)*n]))
		}
		row := func(i int) []float32 { // row i of h, channels [c0, c1)
			if i < hist {
				return old[i*n : (i+1)*n]
			}
			t := s.start + i - hist
			return x[t*C+c0 : t*C+c1]
		}
		for i := range s.n {
			t := s.start + i
			yt := y[t*C+c0 : t*C+c1]
			clear(yt)
			for j := range K {
				wj, hj := w[j*C+c0:j*C+c1], row(i+j)
				for c := range yt {
					yt[c] += wj[c] * hj[c]
				}
			}
			if a.SiLU {
				for c, v := range yt {
					yt[c] = silu(v)
				}
			}
		}
		// The new history is rows [n, n+K-1) of h.
		for j := range hist {
			st.writeRange(j, c0, row(s.n+j))
		}
	})
}

// GatedRMSNorm implements compute.Recurrent: the plain RMS norm of every
// row (as RMSNorm computes it), then the product with silu(z).
func (b *Backend) GatedRMSNorm(y, x, z, w compute.Tensor, eps float32) {
	R, n := x.Rows, x.Cols
	checkShape("GatedRMSNorm y", y, R, n)
	checkShape("GatedRMSNorm z", z, R, n)
	checkShape("GatedRMSNorm w", w, 1, n)
	yv, xv, zv, wv := F32(y), F32(x), F32(z), F32(w)
	rows := max(1, 1<<14/max(n, 1))
	b.s.forItems((R+rows-1)/rows, func(_, it int) {
		for r := it * rows; r < min(R, (it+1)*rows); r++ {
			yr := yv[r*n : (r+1)*n]
			rmsNorm(yr, xv[r*n:(r+1)*n], wv, eps)
			for i, g := range zv[r*n : (r+1)*n] {
				yr[i] *= silu(g)
			}
		}
	})
}

// silu is x·sigmoid(x), computed in float64 and rounded once.
func silu(x float32) float32 { return float32(float64(x) / (1 + math.Exp(-float64(x)))) }
