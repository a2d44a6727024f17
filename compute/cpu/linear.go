package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

var _ compute.Backend = (*Backend)(nil)

func checkShape(op string, t compute.Tensor, rows, cols int) {
	if t.Rows != rows || t.Cols != cols {
		panic(fmt.Sprintf("cpu: %s: tensor is %d×%d, want %d×%d", op, t.Rows, t.Cols, rows, cols))
	}
}

// MatMul implements compute.Linear.
func (b *Backend) MatMul(y, x compute.Tensor, w *compute.Matrix) {
	if x.Cols != w.Cols || y.Cols != w.Rows || y.Rows != x.Rows {
		panic(fmt.Sprintf("cpu: MatMul of x %d×%d by W %d×%d into y %d×%d", x.Rows, x.Cols, w.Rows, w.Cols, y.Rows, y.Cols))
	}
	b.MatMulF32(F32(y), F32(x), x.Rows, w)
}

// GroupedMatMul implements compute.Linear: each group's inputs are copied
// out into a contiguous block, multiplied, and copied into place.
func (b *Backend) GroupedMatMul(y, x compute.Tensor, ws []*compute.Matrix) {
	G, T := len(ws), x.Rows
	R, n := ws[0].Rows, ws[0].Cols
	checkShape("GroupedMatMul x", x, T, G*n)
	checkShape("GroupedMatMul y", y, T, G*R)
	yv, xv := F32(y), F32(x)
	if G == 1 {
		b.MatMulF32(yv, xv, T, ws[0])
		return
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	xg, yg := b.scratchF32(T*n), b.scratchF32(T*R)
	for g, w := range ws {
		for t := range T {
			copy(xg[t*n:(t+1)*n], xv[t*G*n+g*n:t*G*n+(g+1)*n])
		}
		b.MatMulF32(yg, xg, T, w)
		for t := range T {
			copy(yv[t*G*R+g*R:t*G*R+(g+1)*R], yg[t*R:(t+1)*R])
		}
	}
}

// RMSNorm implements compute.Linear.
func (b *Backend) RMSNorm(y, x, w compute.Tensor, eps float32) {
	checkShape("RMSNorm y", y, x.Rows, x.Cols)
	var wv []float32
	if w.Valid() {
		wv = F32(w)
	}
	b.RMSNormF32(F32(y), F32(x), wv, x.Rows, x.Cols, eps)
}

// RoPE implements compute.Linear.
func (b *Backend) RoPE(x, pos compute.Tensor, heads int, invFreq compute.Tensor, inverse bool) {
	p, inv := I32(pos), F32(invFreq)
	if heads <= 0 || len(p)*heads < x.Rows {
		panic(fmt.Sprintf("cpu: RoPE has %d positions of %d heads for %d rows", len(p), heads, x.Rows))
	}
	if 2*len(inv) > x.Cols {
		panic(fmt.Sprintf("cpu: RoPE rotates %d channels of rows of width %d", 2*len(inv), x.Cols))
	}
	b.s.rowsOp(rowJob{op: opRoPE, x: F32(x), T: x.Rows, n: x.Cols, pos: p, heads: heads, invFreq: inv, inverse: inverse})
}

// Embed implements compute.Linear.
func (b *Backend) Embed(h compute.Tensor, table *compute.Matrix, tokens compute.Tensor, copies int) {
	D := table.Cols
	ids := I32(tokens)
	checkShape("Embed h", h, len(ids), copies*D)
	hv := F32(h)
	for t, tok := range ids {
		if tok < 0 || int(tok) >= table.Rows {
			panic(fmt.Sprintf("cpu: Embed: token %d outside a table of %d rows", tok, table.Rows))
		}
		row := hv[t*copies*D : t*copies*D+D]
		MatrixRow(table, int(tok), row)
		for j := 1; j < copies; j++ {
			copy(hv[t*copies*D+j*D:], row)
		}
	}
}

// GatherRows implements compute.Linear.
func (b *Backend) GatherRows(dst, src, rows compute.Tensor) {
	r := I32(rows)
	checkShape("GatherRows dst", dst, len(r), src.Cols)
	d, s, n := F32(dst), F32(src), src.Cols
	for i, row := range r {
		copy(d[i*n:(i+1)*n], s[int(row)*n:(int(row)+1)*n])
	}
}

// AddRepeated implements compute.Linear.
func (b *Backend) AddRepeated(h, e compute.Tensor, n int) {
	if e.Cols != h.Cols || e.Rows*n != h.Rows {
		panic(fmt.Sprintf("cpu: AddRepeated of %d×%d, %d times, into %d×%d", e.Rows, e.Cols, n, h.Rows, h.Cols))
	}
	hv, ev, D := F32(h), F32(e), h.Cols
	for r := range h.Rows {
		axpy(hv[r*D:(r+1)*D], 1, ev[(r/n)*D:(r/n+1)*D])
	}
}

// MatrixRow decodes row r of an unquantized or FP8 matrix into dst.
func MatrixRow(w *compute.Matrix, r int, dst []float32) {
	n := w.Cols
	switch w.DType {
	case compute.F32:
		b := w.Data[r*n*4 : (r+1)*n*4]
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
		}
	case compute.BF16:
		b := w.Data[r*n*2 : (r+1)*n*2]
		for i := range dst {
			dst[i] = quant.BF16ToFloat32(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
		}
	case compute.F16:
		b := w.Data[r*n*2 : (r+1)*n*2]
		for i := range dst {
			dst[i] = quant.F16ToFloat32(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
		}
	case compute.FP8:
		bc := (w.Cols + w.BlockCols - 1) / w.BlockCols
		for i := range dst {
			s := quant.UE8M0ToFloat32(w.Scale[r/w.BlockRows*bc+i/w.BlockCols])
			dst[i] = quant.E4M3ToFloat32(w.Data[r*n+i]) * s
		}
	default:
		panic(fmt.Sprintf("cpu: cannot read rows of a %v matrix", w.DType))
	}
}

// The scalar helpers below keep the arithmetic the forward passes were
// checked with: float64 exponentials rounded to float32, sums in float32.

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// axpyGo computes y += a·x.
func axpyGo(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		// The conversion keeps the product rounded on its own (no fused
		// multiply-add, whatever GOAMD64), as the vector routines round it.
		y[i] += float32(a * x[i])
	}
}

// dot is the float32 dot product with four partial sums.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// softmax32 replaces x by its softmax, summing in float32.
func softmax32(x []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	var s float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		s += e
	}
	for i := range x {
		x[i] /= s
	}
}

// MatMuls implements compute.MultiMatMul, one MatMul a product.
func (b *Backend) MatMuls(ys []compute.Tensor, x compute.Tensor, ws []*compute.Matrix) {
	for i, w := range ws {
		b.MatMul(ys[i], x, w)
	}
}
