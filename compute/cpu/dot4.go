package cpu

import (
	"github.com/strata-inference/strata/quant"
)

// One-token products of four weight rows, computed with exactly the
// arithmetic of the prefill kernels (decode, then gemm4x1/gemm4x2), so that
// MatMul is batch-invariant: a token's outputs are the same bits whether it
// is alone or one of many. Each row's products are summed in one chain in
// the kernels' column order; the four rows' chains interleave, which gives
// the processor four independent chains to overlap.
//
// The portable arithmetic (these functions) sums each kChunk columns from
// zero and adds the chunk's sum to the row's total, as gemm4x1Go and
// gemm4x2Go do; the vector kernels (vec_amd64.go) keep 16 fused
// multiply-add lanes per row across the whole row and reduce them with
// sumLanesGo, as their prefill kernels (gemmRowsVec) do.

// row4 names four rows of one matrix by their bytes (and scales).
type row4 struct {
	w [4][]byte
	s [4][]byte // FP8: the row's column-block scales; FP4: its per-32 scales
}

// The portable kernels below all follow this pattern, with their decoder
// written out (a call per element would cost more than the arithmetic):
//
//	for each chunk of kChunk columns:
//		a_i = 0; for k in the chunk: a_i += dec(i, k) * x[k]
//		out[i] += a_i

func dot4F32Go(r *row4, K int, x []float32) (out [4]float32) {
	v0, ok0 := float32View(r.w[0])
	v1, ok1 := float32View(r.w[1])
	v2, ok2 := float32View(r.w[2])
	v3, ok3 := float32View(r.w[3])
	if !ok0 || !ok1 || !ok2 || !ok3 {
		var rows [4][]float32
		for i := range rows {
			rows[i] = make([]float32, K)
			decodeF32Go(rows[i], r.w[i])
		}
		v0, v1, v2, v3 = rows[0], rows[1], rows[2], rows[3]
	}
	return dot4F32s(v0[:K], v1[:K], v2[:K], v3[:K], x)
}

// dot4F32s is the portable pattern for float32 rows.
func dot4F32s(w0, w1, w2, w3, x []float32) (out [4]float32) {
	K := len(w0)
	w1, w2, w3, x = w1[:K], w2[:K], w3[:K], x[:K]
	for c0 := 0; c0 < K; c0 += kChunk {
		c1 := min(c0+kChunk, K)
		var a0, a1, a2, a3 float32
		for k := c0; k < c1; k++ {
			u := x[k]
			a0 += w0[k] * u
			a1 += w1[k] * u
			a2 += w2[k] * u
			a3 += w3[k] * u
		}
		out[0] += a0
		out[1] += a1
		out[2] += a2
		out[3] += a3
	}
	return out
}

func dot4BF16Go(r *row4, K int, x []float32) (out [4]float32) {
	h0, ok0 := uint16View(r.w[0][:2*K])
	h1, ok1 := uint16View(r.w[1][:2*K])
	h2, ok2 := uint16View(r.w[2][:2*K])
	h3, ok3 := uint16View(r.w[3][:2*K])
	if !ok0 || !ok1 || !ok2 || !ok3 {
		var rows [4][]float32
		for i := range rows {
			rows[i] = make([]float32, K)
			decodeBF16Go(rows[i], r.w[i])
		}
		return dot4F32s(rows[0], rows[1], rows[2], rows[3], x)
	}
	h1, h2, h3, x = h1[:K], h2[:K], h3[:K], x[:K]
	for c0 := 0; c0 < K; c0 += kChunk {
		c1 := min(c0+kChunk, K)
		var a0, a1, a2, a3 float32
		for k := c0; k < c1; k++ {
			u := x[k]
			a0 += bf16(h0[k]) * u
			a1 += bf16(h1[k]) * u
			a2 += bf16(h2[k]) * u
			a3 += bf16(h3[k]) * u
		}
		out[0] += a0
		out[1] += a1
		out[2] += a2
		out[3] += a3
	}
	return out
}

func dot4F16Go(r *row4, K int, x []float32) (out [4]float32) {
	h0, ok0 := uint16View(r.w[0][:2*K])
	h1, ok1 := uint16View(r.w[1][:2*K])
	h2, ok2 := uint16View(r.w[2][:2*K])
	h3, ok3 := uint16View(r.w[3][:2*K])
	if !ok0 || !ok1 || !ok2 || !ok3 {
		var rows [4][]float32
		for i := range rows {
			rows[i] = make([]float32, K)
			decodeF16Go(rows[i], r.w[i])
		}
		return dot4F32s(rows[0], rows[1], rows[2], rows[3], x)
	}
	h1, h2, h3, x = h1[:K], h2[:K], h3[:K], x[:K]
	for c0 := 0; c0 < K; c0 += kChunk {
		c1 := min(c0+kChunk, K)
		var a0, a1, a2, a3 float32
		for k := c0; k < c1; k++ {
			u := x[k]
			a0 += f16(h0[k]) * u
			a1 += f16(h1[k]) * u
			a2 += f16(h2[k]) * u
			a3 += f16(h3[k]) * u
		}
		out[0] += a0
		out[1] += a1
		out[2] += a2
		out[3] += a3
	}
	return out
}

// dot4FP8Go: each value is its e4m3 code times its block's power-of-two
// scale, exactly what decodeFP8Go writes.
func dot4FP8Go(r *row4, K, bc int, x []float32) (out [4]float32) {
	w0, w1, w2, w3 := r.w[0][:K], r.w[1][:K], r.w[2][:K], r.w[3][:K]
	x = x[:K]
	for c0 := 0; c0 < K; c0 += kChunk {
		c1 := min(c0+kChunk, K)
		var a0, a1, a2, a3 float32
		for b0 := c0; b0 < c1; {
			b1 := min(c1, (b0/bc+1)*bc) // the end of this scale block within the chunk
			j := b0 / bc
			m0, m1 := quant.UE8M0ToFloat32(r.s[0][j]), quant.UE8M0ToFloat32(r.s[1][j])
			m2, m3 := quant.UE8M0ToFloat32(r.s[2][j]), quant.UE8M0ToFloat32(r.s[3][j])
			q0, q1, q2, q3, v := w0[b0:b1], w1[b0:b1], w2[b0:b1], w3[b0:b1], x[b0:b1]
			q1, q2, q3, v = q1[:len(q0)], q2[:len(q0)], q3[:len(q0)], v[:len(q0)]
			for k, c := range q0 {
				u := v[k]
				a0 += quant.E4M3ToFloat32(c) * m0 * u
				a1 += quant.E4M3ToFloat32(q1[k]) * m1 * u
				a2 += quant.E4M3ToFloat32(q2[k]) * m2 * u
				a3 += quant.E4M3ToFloat32(q3[k]) * m3 * u
			}
			b0 = b1
		}
		out[0] += a0
		out[1] += a1
		out[2] += a2
		out[3] += a3
	}
	return out
}

// dot4FP4Go reads the natural column order (the portable kernels' layout);
// each value is its e2m1 code times its group's scale, as decodeFP4Go writes.
func dot4FP4Go(r *row4, K int, x []float32) (out [4]float32) {
	x = x[:K]
	for c0 := 0; c0 < K; c0 += kChunk {
		c1 := min(c0+kChunk, K)
		var a0, a1, a2, a3 float32
		for g := c0 / 32; g < c1/32; g++ {
			m0, m1 := quant.UE8M0ToFloat32(r.s[0][g]), quant.UE8M0ToFloat32(r.s[1][g])
			m2, m3 := quant.UE8M0ToFloat32(r.s[2][g]), quant.UE8M0ToFloat32(r.s[3][g])
			q0, q1, q2, q3 := r.w[0][16*g:16*g+16], r.w[1][16*g:16*g+16], r.w[2][16*g:16*g+16], r.w[3][16*g:16*g+16]
			v := x[32*g : 32*g+32]
			for i := range 16 {
				b0, b1, b2, b3 := q0[i], q1[i], q2[i], q3[i]
				u := v[2*i]
				a0 += quant.E2M1ToFloat32(b0&0xF) * m0 * u
				a1 += quant.E2M1ToFloat32(b1&0xF) * m1 * u
				a2 += quant.E2M1ToFloat32(b2&0xF) * m2 * u
				a3 += quant.E2M1ToFloat32(b3&0xF) * m3 * u
				u = v[2*i+1]
				a0 += quant.E2M1ToFloat32(b0>>4) * m0 * u
				a1 += quant.E2M1ToFloat32(b1>>4) * m1 * u
				a2 += quant.E2M1ToFloat32(b2>>4) * m2 * u
				a3 += quant.E2M1ToFloat32(b3>>4) * m3 * u
			}
		}
		out[0] += a0
		out[1] += a1
		out[2] += a2
		out[3] += a3
	}
	return out
}
