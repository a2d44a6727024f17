package deepseekv4

import (
	"math"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/quant"
)

// naive is the CPU backend with the forward pass's own matrix products,
// norms and rotations replaced by slow, obviously correct loops that share
// no kernel code with it (the coarse ops still run the CPU backend's code).
type naive struct{ *cpu.Backend }

func newNaive() naive { return naive{cpu.New(1)} }

func decodeRow(w *compute.Matrix, r int) []float32 {
	out := make([]float32, w.Cols)
	n := w.Cols
	switch w.DType {
	case compute.F32:
		b := w.Data[r*n*4:]
		for i := range out {
			out[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
		}
	case compute.BF16:
		b := w.Data[r*n*2:]
		for i := range out {
			out[i] = quant.BF16ToFloat32(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
		}
	case compute.F16:
		b := w.Data[r*n*2:]
		for i := range out {
			out[i] = quant.F16ToFloat32(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
		}
	case compute.FP8:
		bc := (w.Cols + w.BlockCols - 1) / w.BlockCols
		for i := range out {
			out[i] = quant.E4M3ToFloat32(w.Data[r*n+i]) * quant.UE8M0ToFloat32(w.Scale[r/w.BlockRows*bc+i/w.BlockCols])
		}
	case compute.FP4:
		for i := range out {
			b := w.Data[r*n/2+i/2]
			code := b & 0xF
			if i%2 == 1 {
				code = b >> 4
			}
			out[i] = quant.E2M1ToFloat32(code) * quant.UE8M0ToFloat32(w.Scale[r*n/32+i/32])
		}
	}
	return out
}

func (naive) MatMul(yt, xt compute.Tensor, w *compute.Matrix) {
	y, x, T := cpu.F32(yt), cpu.F32(xt), xt.Rows
	for r := range w.Rows {
		row := decodeRow(w, r)
		for t := range T {
			var s float32
			for i, v := range row {
				s += v * x[t*w.Cols+i]
			}
			y[t*w.Rows+r] = s
		}
	}
}

func (naive) RMSNorm(yt, xt, wt compute.Tensor, eps float32) {
	y, x, T, n := cpu.F32(yt), cpu.F32(xt), xt.Rows, xt.Cols
	var w []float32
	if wt.Valid() {
		w = cpu.F32(wt)
	}
	for t := range T {
		var ss float32
		for _, v := range x[t*n : (t+1)*n] {
			ss += v * v
		}
		r := float32(1 / math.Sqrt(float64(ss/float32(n)+eps)))
		for i := range n {
			v := x[t*n+i] * r
			if w != nil {
				v *= w[i]
			}
			y[t*n+i] = v
		}
	}
}

func (naive) RoPE(xt, post compute.Tensor, heads int, invt compute.Tensor, inverse bool) {
	x, T, n, pos, inv := cpu.F32(xt), xt.Rows, xt.Cols, cpu.I32(post), cpu.F32(invt)
	rd := 2 * len(inv)
	for t := range T {
		row := x[t*n+n-rd : (t+1)*n]
		for i, f := range inv {
			ang := float32(pos[t/heads]) * f
			c, s := float32(math.Cos(float64(ang))), float32(math.Sin(float64(ang)))
			if inverse {
				s = -s
			}
			a, b := row[2*i], row[2*i+1]
			row[2*i] = a*c - b*s
			row[2*i+1] = b*c + a*s
		}
	}
}
