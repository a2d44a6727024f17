package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

var _ compute.MLA = (*Backend)(nil)

// HeadMatMul implements compute.MLA: each head's channels are copied out
// into a contiguous block, multiplied, and copied into place, as
// GroupedMatMul does.
func (b *Backend) HeadMatMul(y, x compute.Tensor, ws []*compute.Matrix) {
	H, T := len(ws), x.Rows
	if H == 0 || x.Cols%H != 0 {
		panic(fmt.Sprintf("cpu: HeadMatMul of rows of %d over %d heads", x.Cols, H))
	}
	w := x.Cols / H
	R, n := ws[0].Rows, ws[0].Cols
	if n > w {
		panic(fmt.Sprintf("cpu: HeadMatMul reads %d channels of heads of %d", n, w))
	}
	for h, m := range ws {
		if m.Rows != R || m.Cols != n {
			panic(fmt.Sprintf("cpu: HeadMatMul: head %d's matrix is %d×%d, head 0's %d×%d", h, m.Rows, m.Cols, R, n))
		}
	}
	checkShape("HeadMatMul y", y, T, H*R)
	yv, xv := F32(y), F32(x)
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	xh, yh := b.scratchF32(T*n), b.scratchF32(T*R)
	for h, m := range ws {
		for t := range T {
			copy(xh[t*n:(t+1)*n], xv[t*H*w+h*w:t*H*w+h*w+n])
		}
		b.MatMulF32(yh, xh, T, m)
		for t := range T {
			copy(yv[t*H*R+h*R:t*H*R+(h+1)*R], yh[t*R:(t+1)*R])
		}
	}
}

// RoPELeading implements compute.MLA. Consecutive rows usually are one
// token's heads, so the angles of the last position are kept.
func (b *Backend) RoPELeading(x, pos compute.Tensor, heads int, invFreq compute.Tensor, half bool) {
	p, inv, xv := I32(pos), F32(invFreq), F32(x)
	nf, n := len(inv), x.Cols
	if heads <= 0 || len(p)*heads < x.Rows {
		panic(fmt.Sprintf("cpu: RoPELeading has %d positions of %d heads for %d rows", len(p), heads, x.Rows))
	}
	if 2*nf > n {
		panic(fmt.Sprintf("cpu: RoPELeading rotates %d channels of rows of width %d", 2*nf, n))
	}
	cos, sin := make([]float32, nf), make([]float32, nf)
	last := int32(-1)
	for r := range x.Rows {
		if q := p[r/heads]; q != last {
			pf := float32(q)
			for i, f := range inv {
				s, c := math.Sincos(float64(pf * f))
				cos[i], sin[i] = float32(c), float32(s)
			}
			last = q
		}
		row := xv[r*n : r*n+2*nf]
		for j := range nf {
			a, c := 2*j, 2*j+1 // the pair rotated by frequency j
			if half {
				a, c = j, nf+j
			}
			u, v := row[a], row[c]
			row[a] = float32(u*cos[j]) - float32(v*sin[j])
			row[c] = float32(v*cos[j]) + float32(u*sin[j])
		}
	}
}

// LayerNorm implements compute.MLA.
func (b *Backend) LayerNorm(y, x, w, bias compute.Tensor, eps float32) {
	n := x.Cols
	checkShape("LayerNorm y", y, x.Rows, n)
	checkShape("LayerNorm w", w, 1, n)
	checkShape("LayerNorm b", bias, 1, n)
	yv, xv, wv, bv := F32(y), F32(x), F32(w), F32(bias)
	for r := range x.Rows {
		row := xv[r*n : (r+1)*n]
		var sum float64
		for _, v := range row {
			sum += float64(v)
		}
		mean := float32(sum / float64(n))
		var ss float64
		for _, v := range row {
			d := float64(v - mean)
			ss += d * d
		}
		inv := float32(1 / math.Sqrt(ss/float64(n)+float64(eps)))
		out := yv[r*n : (r+1)*n]
		for i, v := range row {
			out[i] = (v-mean)*inv*wv[i] + bv[i]
		}
	}
}
