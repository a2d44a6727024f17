//go:build goexperiment.simd && amd64

package cpu

import (
	"simd/archsimd"
	"unsafe"

	"github.com/strata-inference/strata/quant"
)

// AVX-512 one-token kernels for four rows: each row one 16-lane FMA chain
// over the kernel layout's columns, reduced by sumLanes, exactly as the
// prefill kernels (decode, then gemm4x1/gemm4x2) compute it. x is packed:
// zero-padded to a multiple of 16 columns. A row's last partial vector is
// decoded through a zero-padded buffer, as the prefill kernels' padded rows.

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

func reduce4(a0, a1, a2, a3 vec) (out [4]float32) {
	var l lanes
	for i, a := range [4]vec{a0, a1, a2, a3} {
		stAcc(a, &l)
		out[i] = sumLanes(&l)
	}
	return out
}

// tail4 adds the products of columns [k, K) of the four rows, decoded by
// dec into zero-padded vectors, to the chains.
func tail4(a *[4]vec, k, K int, px unsafe.Pointer, dec func(i, c int) float32) {
	if k >= K {
		return
	}
	u := ldf(px, k)
	var t [16]float32
	for i := range a {
		clear(t[:])
		for c := k; c < K; c++ {
			t[c-k] = dec(i, c)
		}
		a[i] = archsimd.LoadFloat32x16(&t).MulAdd(u, a[i])
	}
}

func dot4F32(r *row4, K int, x []float32) [4]float32 {
	if !hasAVX512 {
		return dot4F32Go(r, K, x)
	}
	x = x[:roundUp(K, 16)]
	p0, p1, p2, p3, px := ptr(r.w[0][:4*K]), ptr(r.w[1][:4*K]), ptr(r.w[2][:4*K]), ptr(r.w[3][:4*K]), unsafe.Pointer(unsafe.SliceData(x))
	var a0, a1, a2, a3 vec
	k := 0
	for ; k+16 <= K; k += 16 {
		u := ldf(px, k)
		a0 = ldF32(p0, k).MulAdd(u, a0)
		a1 = ldF32(p1, k).MulAdd(u, a1)
		a2 = ldF32(p2, k).MulAdd(u, a2)
		a3 = ldF32(p3, k).MulAdd(u, a3)
	}
	a := [4]vec{a0, a1, a2, a3}
	tail4(&a, k, K, px, func(i, c int) float32 { return f32At(r.w[i], c) })
	return reduce4(a[0], a[1], a[2], a[3])
}

func dot4BF16(r *row4, K int, x []float32) [4]float32 {
	if !hasAVX512 {
		return dot4BF16Go(r, K, x)
	}
	x = x[:roundUp(K, 16)]
	p0, p1, p2, p3, px := ptr(r.w[0][:2*K]), ptr(r.w[1][:2*K]), ptr(r.w[2][:2*K]), ptr(r.w[3][:2*K]), unsafe.Pointer(unsafe.SliceData(x))
	var a0, a1, a2, a3 vec
	k := 0
	for ; k+16 <= K; k += 16 {
		u := ldf(px, k)
		a0 = ldBF16(p0, k).MulAdd(u, a0)
		a1 = ldBF16(p1, k).MulAdd(u, a1)
		a2 = ldBF16(p2, k).MulAdd(u, a2)
		a3 = ldBF16(p3, k).MulAdd(u, a3)
	}
	a := [4]vec{a0, a1, a2, a3}
	tail4(&a, k, K, px, func(i, c int) float32 { return bf16At(r.w[i], c) })
	return reduce4(a[0], a[1], a[2], a[3])
}

func dot4F16(r *row4, K int, x []float32) [4]float32 {
	if !hasAVX512 {
		return dot4F16Go(r, K, x)
	}
	x = x[:roundUp(K, 16)]
	p := [4]unsafe.Pointer{ptr(r.w[0][:2*K]), ptr(r.w[1][:2*K]), ptr(r.w[2][:2*K]), ptr(r.w[3][:2*K])}
	px := unsafe.Pointer(unsafe.SliceData(x))
	bits, inf := archsimd.BroadcastInt32x16(f16Bits), archsimd.BroadcastInt32x16(f16ExpMask)
	mul := archsimd.BroadcastFloat32x16(0x1p112)
	var a [4]vec
	var t [16]float32
	k := 0
	for ; k+16 <= K; k += 16 {
		u := ldf(px, k)
		for i := range a {
			v, ok := ldF16(p[i], k, bits, inf, mul)
			if !ok { // an infinity or NaN among the 16: the table decodes them
				for c := range t {
					t[c] = f16At(r.w[i], k+c)
				}
				v = archsimd.LoadFloat32x16(&t)
			}
			a[i] = v.MulAdd(u, a[i])
		}
	}
	tail4(&a, k, K, px, func(i, c int) float32 { return f16At(r.w[i], c) })
	return reduce4(a[0], a[1], a[2], a[3])
}

// dot4FP8 decodes each 16 columns with ldE4M3 (code times 2^-120, times
// 2^120 times the block scale: exactly code times scale), or, for a row
// whose scales overflow that trick or (when checkNaN) that holds a NaN
// code, from buf, where the row is decoded by decodeFP8Go. buf must hold 4K.
func dot4FP8(r *row4, K, bc int, x []float32, checkNaN bool, buf []float32) [4]float32 {
	if !hasAVX512 || bc%16 != 0 {
		return dot4FP8Go(r, K, bc, x)
	}
	x = x[:roundUp(K, 16)]
	px := unsafe.Pointer(unsafe.SliceData(x))
	var p [4]unsafe.Pointer
	var fast [4]bool
	for i := range p {
		p[i] = ptr(r.w[i][:K])
		fast[i] = e4m3Muls(r.s[i]) && (!checkNaN || !e4m3HasNaN(r.w[i][:K]))
		if !fast[i] {
			decodeFP8Go(buf[i*K:(i+1)*K], r.w[i][:K], r.s[i], bc)
		}
	}
	mask := archsimd.BroadcastInt32x16(e4m3Bits)
	if fast[0] && fast[1] && fast[2] && fast[3] {
		return dot4FP8Fast(r, K, bc, px, mask)
	}
	var a [4]vec
	var m [4]vec
	k := 0
	for ; k+16 <= K; k += 16 {
		if k%bc == 0 {
			for i := range m {
				if fast[i] {
					mul, _ := e4m3Mul(r.s[i][k/bc])
					m[i] = archsimd.BroadcastFloat32x16(mul)
				}
			}
		}
		u := ldf(px, k)
		for i := range a {
			var v vec
			if fast[i] {
				v = ldE4M3(p[i], k, mask, m[i])
			} else {
				v = archsimd.LoadFloat32x16((*[16]float32)(buf[i*K+k : i*K+k+16]))
			}
			a[i] = v.MulAdd(u, a[i])
		}
	}
	tail4(&a, k, K, px, func(i, c int) float32 {
		return quant.E4M3ToFloat32(r.w[i][c]) * quant.UE8M0ToFloat32(r.s[i][c/bc])
	})
	return reduce4(a[0], a[1], a[2], a[3])
}

// dot4FP4 reads x de-interleaved per 32 columns (fp4Deinterleaved): per
// group, the 16 low nibbles (even columns), then the 16 high ones, as
// decodeFP4 writes them.
func dot4FP4(r *row4, K int, x []float32) [4]float32 {
	if !hasAVX512 {
		return dot4FP4Go(r, K, x)
	}
	G := K / 32
	x = x[:32*G]
	px := unsafe.Pointer(unsafe.SliceData(x))
	p0, p1, p2, p3 := ptr(r.w[0][:16*G]), ptr(r.w[1][:16*G]), ptr(r.w[2][:16*G]), ptr(r.w[3][:16*G])
	s0, s1, s2, s3 := r.s[0][:G], r.s[1][:G], r.s[2][:G], r.s[3][:G]
	base := archsimd.LoadFloat32x16(&e2m1Values)
	var a0, a1, a2, a3 vec
	for g := range G {
		ul, uh := ldf(px, 32*g), ldf(px, 32*g+16)
		t0 := base.Mul(archsimd.BroadcastFloat32x16(quant.UE8M0ToFloat32(s0[g])))
		t1 := base.Mul(archsimd.BroadcastFloat32x16(quant.UE8M0ToFloat32(s1[g])))
		t2 := base.Mul(archsimd.BroadcastFloat32x16(quant.UE8M0ToFloat32(s2[g])))
		t3 := base.Mul(archsimd.BroadcastFloat32x16(quant.UE8M0ToFloat32(s3[g])))
		v0 := archsimd.LoadUint8x16((*[16]uint8)(unsafe.Add(p0, 16*g))).ExtendToUint32()
		v1 := archsimd.LoadUint8x16((*[16]uint8)(unsafe.Add(p1, 16*g))).ExtendToUint32()
		v2 := archsimd.LoadUint8x16((*[16]uint8)(unsafe.Add(p2, 16*g))).ExtendToUint32()
		v3 := archsimd.LoadUint8x16((*[16]uint8)(unsafe.Add(p3, 16*g))).ExtendToUint32()
		a0 = t0.Permute(v0).MulAdd(ul, a0)
		a1 = t1.Permute(v1).MulAdd(ul, a1)
		a2 = t2.Permute(v2).MulAdd(ul, a2)
		a3 = t3.Permute(v3).MulAdd(ul, a3)
		a0 = t0.Permute(v0.ShiftAllRight(4)).MulAdd(uh, a0)
		a1 = t1.Permute(v1.ShiftAllRight(4)).MulAdd(uh, a1)
		a2 = t2.Permute(v2.ShiftAllRight(4)).MulAdd(uh, a2)
		a3 = t3.Permute(v3.ShiftAllRight(4)).MulAdd(uh, a3)
	}
	return reduce4(a0, a1, a2, a3)
}

// dot4FP8Fast is dot4FP8 when every row decodes with ldE4M3.
func dot4FP8Fast(r *row4, K, bc int, px unsafe.Pointer, mask archsimd.Int32x16) [4]float32 {
	p0, p1, p2, p3 := ptr(r.w[0][:K]), ptr(r.w[1][:K]), ptr(r.w[2][:K]), ptr(r.w[3][:K])
	var a0, a1, a2, a3 vec
	k := 0
	for j, c0 := 0, 0; c0 < K; j, c0 = j+1, c0+bc {
		c1 := c0 + (min(c0+bc, K)-c0)&^15
		mul0, _ := e4m3Mul(r.s[0][j])
		mul1, _ := e4m3Mul(r.s[1][j])
		mul2, _ := e4m3Mul(r.s[2][j])
		mul3, _ := e4m3Mul(r.s[3][j])
		m0, m1 := archsimd.BroadcastFloat32x16(mul0), archsimd.BroadcastFloat32x16(mul1)
		m2, m3 := archsimd.BroadcastFloat32x16(mul2), archsimd.BroadcastFloat32x16(mul3)
		for k = c0; k < c1; k += 16 {
			u := ldf(px, k)
			a0 = ldE4M3(p0, k, mask, m0).MulAdd(u, a0)
			a1 = ldE4M3(p1, k, mask, m1).MulAdd(u, a1)
			a2 = ldE4M3(p2, k, mask, m2).MulAdd(u, a2)
			a3 = ldE4M3(p3, k, mask, m3).MulAdd(u, a3)
		}
	}
	a := [4]vec{a0, a1, a2, a3}
	tail4(&a, k, K, px, func(i, c int) float32 {
		return quant.E4M3ToFloat32(r.w[i][c]) * quant.UE8M0ToFloat32(r.s[i][c/bc])
	})
	return reduce4(a[0], a[1], a[2], a[3])
}
