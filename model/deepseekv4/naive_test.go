package deepseekv4

import (
	"math"
	"sort"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// naive is a slow, obviously correct backend.
type naive struct{}

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

func (naive) MatMul(y, x []float32, T int, w *compute.Matrix) {
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

func (naive) RMSNorm(y, x, w []float32, T, n int, eps float32) {
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

func (naive) RoPE(x []float32, T, n int, pos []int32, inv []float32, inverse bool) {
	rd := 2 * len(inv)
	for t := range T {
		row := x[t*n+n-rd : (t+1)*n]
		for i, f := range inv {
			ang := float32(pos[t]) * f
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

func (naive) Softmax(x []float32, T, n int) {
	for t := range T {
		r := x[t*n : (t+1)*n]
		mx := float32(math.Inf(-1))
		for _, v := range r {
			mx = max(mx, v)
		}
		var s float32
		for i, v := range r {
			r[i] = float32(math.Exp(float64(v - mx)))
			s += r[i]
		}
		for i := range r {
			r[i] /= s
		}
	}
}

func (naive) TopK(idx []int32, x []float32, k int) {
	ix := make([]int, len(x))
	for i := range ix {
		ix[i] = i
	}
	sort.SliceStable(ix, func(a, b int) bool { return x[ix[a]] > x[ix[b]] })
	for i := range k {
		idx[i] = int32(ix[i])
	}
}
