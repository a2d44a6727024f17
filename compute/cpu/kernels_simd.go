//go:build goexperiment.simd && amd64

package cpu

import (
	"math"
	"simd/archsimd"
	"unsafe"

	"github.com/strata-inference/strata/quant"
)

// AVX-512 kernels. Each checks hasAVX512 and falls back to the portable
// kernel without it. The loops index through unsafe pointers after checking
// slice lengths once, to keep bounds checks and general-purpose register
// pressure out of the inner loops.
//
// Dequantization tricks, all exact:
//   - bf16: the 16 bits shifted left by 16 are the float32.
//   - e4m3: sign-extend the byte to 32 bits, shift left by 20 and keep the sign
//     bit and bits 20-26; that is the float32 whose exponent field is the e4m3
//     exponent and whose top mantissa bits are the e4m3 mantissa, normal or
//     subnormal alike, equal to the e4m3 value times 2^-120. Multiplying by
//     2^120 times the block scale, a power of two, gives the weight. Rows
//     holding NaNs (0x7F, 0xFF) go block by block, NaN blocks to the
//     portable code. (Subnormal e4m3 codes become float32 subnormals, which
//     cost nothing extra on the AMD EPYC this was measured on; checkpoints
//     have few of them anyway, about 2 in 10^4 codes.)
//   - f16: the same with a shift by 13 and 2^112; vectors holding infinities
//     or NaNs go to the portable code.
//   - e2m1: VPERMPS looks the 16 codes up in a 16-entry table pre-multiplied
//     by the group's scale. Even and odd columns come out in separate vectors,
//     so FP4 kernels use activations de-interleaved per 32 columns (see
//     fp4Deinterleaved) and decodeFP4 writes weights in that order.

// hasAVX512 reports whether the CPU runs the AVX-512 kernels. It is set at
// initialization and never changes.
var hasAVX512 = archsimd.X86.AVX512()

// fp4Deinterleaved reports whether the FP4 kernels take activations, and
// write decoded weights, de-interleaved per 32 columns: the 16 even columns
// of the group, then its 16 odd columns.
func fp4Deinterleaved() bool { return hasAVX512 }

type vec = archsimd.Float32x16

// e2m1Values are the 16 e2m1 values by code, for VPERMPS. Never written.
var e2m1Values = func() (t [16]float32) {
	for i := range t {
		t[i] = quant.E2M1ToFloat32(byte(i))
	}
	return t
}()

const (
	e4m3Bits   = -0x78100000 // int32(0x87F00000): the sign bit and bits 20-26
	f16Bits    = -0x70002000 // int32(0x8FFFE000): the sign bit and bits 13-27
	f16ExpMask = 0x0F800000  // the f16 exponent after the shift by 13
)

// ldf loads the 16 float32s at p + 4*i bytes, which must be 4-byte aligned.
func ldf(p unsafe.Pointer, i int) vec {
	return archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(p, 4*i)))
}

// Weights may sit anywhere in a memory-mapped checkpoint, so they are loaded
// as bytes and reinterpreted: the same instructions, with no alignment
// assumed (which -d=checkptr would check).

// ldF32 loads the 16 float32 weights at p + 4*i bytes.
func ldF32(p unsafe.Pointer, i int) vec {
	return archsimd.LoadUint8x64((*[64]uint8)(unsafe.Add(p, 4*i))).AsFloat32x16()
}

func stf(v vec, p unsafe.Pointer, i int) { v.Store((*[16]float32)(unsafe.Add(p, 4*i))) }

// ldBF16 loads the 16 bf16 values at p + 2*i bytes.
func ldBF16(p unsafe.Pointer, i int) vec {
	return archsimd.LoadUint8x32((*[32]uint8)(unsafe.Add(p, 2*i))).AsUint16x16().ExtendToUint32().ShiftAllLeft(16).AsFloat32x16()
}

// ldF16 loads the 16 f16 values at p + 2*i bytes, and false if one of them is
// infinite or NaN: the caller then converts those 16 another way. bits and
// inf are constants the caller keeps in registers (see dotF16).
func ldF16(p unsafe.Pointer, i int, bits, inf archsimd.Int32x16, mul vec) (vec, bool) {
	h := archsimd.LoadInt8x32((*[32]int8)(unsafe.Add(p, 2*i))).AsInt16x16().ExtendToInt32().ShiftAllLeft(13).And(bits)
	if h.And(inf).Equal(inf).ToBits() != 0 {
		return vec{}, false
	}
	return h.AsFloat32x16().Mul(mul), true
}

// ldE4M3 loads the 16 e4m3 values at p + i bytes, times 2^-120 times m.
func ldE4M3(p unsafe.Pointer, i int, mask archsimd.Int32x16, m vec) vec {
	return archsimd.LoadInt8x16((*[16]int8)(unsafe.Add(p, i))).ExtendToInt32().ShiftAllLeft(20).And(mask).AsFloat32x16().Mul(m)
}

// e4m3Mul returns 2^120 times the UE8M0 scale s, the multiplier of the raw
// e4m3 bits, and false when that overflows float32 or s is NaN.
func e4m3Mul(s byte) (float32, bool) {
	if s > 134 {
		return 0, false
	}
	return math.Float32frombits(uint32(s+120) << 23), true
}

// e4m3HasNaN reports whether q holds an e4m3 NaN (0x7F or 0xFF): the
// greatest magnitude code is 0x7F only then.
func e4m3HasNaN(q []byte) bool {
	n := len(q)
	p := unsafe.Pointer(unsafe.SliceData(q))
	c7F := archsimd.BroadcastUint8x64(0x7F)
	var hi archsimd.Uint8x64
	i := 0
	for ; i+64 <= n; i += 64 {
		hi = hi.Max(archsimd.LoadUint8x64((*[64]uint8)(unsafe.Add(p, i))).And(c7F))
	}
	if hi.Equal(c7F).ToBits() != 0 {
		return true
	}
	for ; i < n; i++ {
		if q[i]&0x7F == 0x7F {
			return true
		}
	}
	return false
}

// e4m3Muls reports whether every scale in scales has an e4m3Mul.
func e4m3Muls(scales []byte) bool {
	for _, s := range scales {
		if _, ok := e4m3Mul(s); !ok {
			return false
		}
	}
	return true
}

func hsum(a vec) float32 {
	b := a.GetLo().Add(a.GetHi())
	c := b.GetLo().Add(b.GetHi())
	var t [4]float32
	c.Store(&t)
	return (t[0] + t[2]) + (t[1] + t[3])
}

func decodeF32(dst []float32, w []byte) {
	if !hasAVX512 {
		decodeF32Go(dst, w)
		return
	}
	K := len(w) / 4
	dst = dst[:K]
	pw, pd := unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(dst))
	i := 0
	for ; i+16 <= K; i += 16 {
		stf(ldF32(pw, i), pd, i)
	}
	for ; i < K; i++ {
		dst[i] = f32At(w, i)
	}
}

func decodeBF16(dst []float32, w []byte) {
	if !hasAVX512 {
		decodeBF16Go(dst, w)
		return
	}
	K := len(w) / 2
	dst = dst[:K]
	pw, pd := unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(dst))
	i := 0
	for ; i+16 <= K; i += 16 {
		stf(ldBF16(pw, i), pd, i)
	}
	for ; i < K; i++ {
		dst[i] = bf16At(w, i)
	}
}

func decodeF16(dst []float32, w []byte) {
	if !hasAVX512 {
		decodeF16Go(dst, w)
		return
	}
	K := len(w) / 2
	dst = dst[:K]
	pw, pd := unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(dst))
	bits := archsimd.BroadcastInt32x16(f16Bits)
	inf := archsimd.BroadcastInt32x16(f16ExpMask)
	mul := archsimd.BroadcastFloat32x16(0x1p112)
	i := 0
	for ; i+16 <= K; i += 16 {
		v, ok := ldF16(pw, i, bits, inf, mul)
		if !ok {
			decodeF16Go(dst[i:i+16], w[2*i:2*i+32])
			continue
		}
		stf(v, pd, i)
	}
	decodeF16Go(dst[i:], w[2*i:])
}

func decodeFP8(dst []float32, w, scales []byte, bc int) {
	if !hasAVX512 || bc%16 != 0 {
		decodeFP8Go(dst, w, scales, bc)
		return
	}
	K := len(w)
	dst = dst[:K]
	scales = scales[:(K+bc-1)/bc]
	checked := !e4m3Muls(scales) || e4m3HasNaN(w)
	pw, pd := unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(dst))
	mask := archsimd.BroadcastInt32x16(e4m3Bits)
	for j, c0 := 0, 0; c0 < K; j, c0 = j+1, c0+bc {
		c1 := min(c0+bc, K)
		t := c0
		if mul, ok := e4m3Mul(scales[j]); ok && (!checked || !e4m3HasNaN(w[c0:c1])) {
			m := archsimd.BroadcastFloat32x16(mul)
			for ; t+16 <= c1; t += 16 {
				stf(ldE4M3(pw, t, mask, m), pd, t)
			}
		}
		if t < c1 {
			decodeFP8Go(dst[t:c1], w[t:c1], scales[j:j+1], bc)
		}
	}
}

func decodeFP4(dst []float32, w, scales []byte) {
	if !hasAVX512 {
		decodeFP4Go(dst, w, scales)
		return
	}
	G := len(scales)
	w, dst = w[:16*G], dst[:32*G]
	pw, pd := unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(dst))
	base := archsimd.LoadFloat32x16(&e2m1Values)
	for g := range G {
		t := base.Mul(archsimd.BroadcastFloat32x16(quant.UE8M0ToFloat32(scales[g])))
		v := archsimd.LoadUint8x16((*[16]uint8)(unsafe.Add(pw, 16*g))).ExtendToUint32()
		stf(t.Permute(v), pd, 32*g)
		stf(t.Permute(v.ShiftAllRight(4)), pd, 32*g+16)
	}
}

func ldAcc(a *lanes) vec { return archsimd.LoadFloat32x16((*[16]float32)(a)) }

func sumLanes(l *lanes) float32 {
	if !hasAVX512 {
		return sumLanesGo(l)
	}
	return hsum(ldAcc(l))
}
func stAcc(v vec, a *lanes) { v.Store((*[16]float32)(a)) }

// gemm4x2 adds, lane by lane, the products w[i*ws+k]·xj[k] to acc[2i+j], for
// the four rows of w (stride ws) and the tokens x0, x1, over len(x0) columns,
// a multiple of 16.
func gemm4x2(w []float32, ws int, x0, x1 []float32, acc *[8]lanes) {
	if !hasAVX512 {
		gemm4x2Go(w, ws, x0, x1, acc)
		return
	}
	n := len(x0)
	x1 = x1[:n]
	w = w[:3*ws+n]
	p0 := unsafe.Pointer(unsafe.SliceData(w))
	p1 := unsafe.Add(p0, 4*ws)
	p2 := unsafe.Add(p1, 4*ws)
	p3 := unsafe.Add(p2, 4*ws)
	q0, q1 := unsafe.Pointer(unsafe.SliceData(x0)), unsafe.Pointer(unsafe.SliceData(x1))
	a00, a01, a10, a11 := ldAcc(&acc[0]), ldAcc(&acc[1]), ldAcc(&acc[2]), ldAcc(&acc[3])
	a20, a21, a30, a31 := ldAcc(&acc[4]), ldAcc(&acc[5]), ldAcc(&acc[6]), ldAcc(&acc[7])
	for k := 0; k < n; k += 16 {
		u0 := ldf(q0, k)
		u1 := ldf(q1, k)
		v := ldf(p0, k)
		a00 = v.MulAdd(u0, a00)
		a01 = v.MulAdd(u1, a01)
		v = ldf(p1, k)
		a10 = v.MulAdd(u0, a10)
		a11 = v.MulAdd(u1, a11)
		v = ldf(p2, k)
		a20 = v.MulAdd(u0, a20)
		a21 = v.MulAdd(u1, a21)
		v = ldf(p3, k)
		a30 = v.MulAdd(u0, a30)
		a31 = v.MulAdd(u1, a31)
	}
	stAcc(a00, &acc[0])
	stAcc(a01, &acc[1])
	stAcc(a10, &acc[2])
	stAcc(a11, &acc[3])
	stAcc(a20, &acc[4])
	stAcc(a21, &acc[5])
	stAcc(a30, &acc[6])
	stAcc(a31, &acc[7])
}

// gemm4x1 is gemm4x2 for one token, adding row i's products to acc[i].
func gemm4x1(w []float32, ws int, x0 []float32, acc *[4]lanes) {
	if !hasAVX512 {
		gemm4x1Go(w, ws, x0, acc)
		return
	}
	n := len(x0)
	w = w[:3*ws+n]
	p0 := unsafe.Pointer(unsafe.SliceData(w))
	p1 := unsafe.Add(p0, 4*ws)
	p2 := unsafe.Add(p1, 4*ws)
	p3 := unsafe.Add(p2, 4*ws)
	q0 := unsafe.Pointer(unsafe.SliceData(x0))
	a0, a1, a2, a3 := ldAcc(&acc[0]), ldAcc(&acc[1]), ldAcc(&acc[2]), ldAcc(&acc[3])
	for k := 0; k < n; k += 16 {
		u := ldf(q0, k)
		a0 = ldf(p0, k).MulAdd(u, a0)
		a1 = ldf(p1, k).MulAdd(u, a1)
		a2 = ldf(p2, k).MulAdd(u, a2)
		a3 = ldf(p3, k).MulAdd(u, a3)
	}
	stAcc(a0, &acc[0])
	stAcc(a1, &acc[1])
	stAcc(a2, &acc[2])
	stAcc(a3, &acc[3])
}

// sumFloat32 returns the float32 sum of a. The bandwidth benchmark uses it.
func sumFloat32(a []float32) float32 {
	if !hasAVX512 {
		return sumFloat32Go(a)
	}
	n := len(a)
	p := unsafe.Pointer(unsafe.SliceData(a))
	var a0, a1, a2, a3 vec
	i := 0
	for ; i+64 <= n; i += 64 {
		a0 = a0.Add(ldf(p, i))
		a1 = a1.Add(ldf(p, i+16))
		a2 = a2.Add(ldf(p, i+32))
		a3 = a3.Add(ldf(p, i+48))
	}
	s := hsum(a0.Add(a1).Add(a2.Add(a3)))
	for ; i < n; i++ {
		s += a[i]
	}
	return s
}
