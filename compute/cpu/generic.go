package cpu

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/strata-inference/strata/quant"
)

// Portable kernels. The dot kernels return Σ W[c]·x[c] over the K columns of
// one weight row (x may be longer than K); the decode kernels write the K
// dequantized values of one row to dst. FP4 kernels here read and write the
// natural column order. FP8 and FP4 kernels sum the products of one scale
// block and then multiply by the block's power-of-two scale, which is exact.

func f32At(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }

func bf16At(b []byte, i int) float32 {
	return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
}

func f16At(b []byte, i int) float32 { return f16(binary.LittleEndian.Uint16(b[2*i:])) }

func bf16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f16 returns the value of the IEEE half h by table lookup (van der Zijp,
// "Fast Half Float Conversions", 2008): the float32 bits are the sum of a
// mantissa entry, selected by the mantissa and whether the half is
// subnormal, and an exponent entry, selected by the sign and exponent. It
// uses no float arithmetic, so subnormals cost nothing extra.
func f16(h uint16) float32 {
	e := h >> 10
	return math.Float32frombits(f16Tab.mantissa[f16Tab.offset[e]+h&0x3FF] + f16Tab.exponent[e])
}

// f16Tab holds the tables of f16. Never written after initialization.
var f16Tab = func() (t struct {
	mantissa [2048]uint32
	exponent [64]uint32
	offset   [64]uint16
}) {
	for m := range 1024 {
		// Subnormal m·2^-24 is a normal float32.
		t.mantissa[m] = math.Float32bits(float32(m) * 0x1p-24)
		// Normal: the implicit 1 and mantissa, with exponent 2^-15 (the
		// exponent entry adds e<<23 to reach 2^(e-15)).
		t.mantissa[1024+m] = 0x38000000 + uint32(m)<<13
	}
	for e := range 64 {
		switch {
		case e == 0:
		case e == 32:
			t.exponent[e] = 0x80000000
		case e == 31:
			t.exponent[e] = 0x47800000 // with 0x38000000: all ones, infinity or NaN
		case e == 63:
			t.exponent[e] = 0xC7800000
		case e < 32:
			t.exponent[e] = uint32(e) << 23
		default:
			t.exponent[e] = 0x80000000 + uint32(e-32)<<23
		}
		if e != 0 && e != 32 {
			t.offset[e] = 1024
		}
	}
	return t
}()

// littleEndian reports whether the machine stores the low byte first, so
// that little-endian weights can be read through typed views. Never written.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// float32View returns b as a []float32 when that reads the little-endian
// float32s of b, which needs a little-endian machine and alignment.
func float32View(b []byte) ([]float32, bool) {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if !littleEndian || uintptr(p)%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(p), len(b)/4), true
}

// uint16View returns b as a []uint16 when that reads the little-endian
// uint16s of b.
func uint16View(b []byte) ([]uint16, bool) {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if !littleEndian || uintptr(p)%2 != 0 {
		return nil, false
	}
	return unsafe.Slice((*uint16)(p), len(b)/2), true
}

func dotF32Go(w []byte, x []float32) float32 {
	if v, ok := float32View(w); ok {
		return dotF32s(v, x)
	}
	K := len(w) / 4
	x = x[:K]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= K; i += 4 {
		b := w[4*i : 4*i+16 : 4*i+16]
		v := x[i : i+4 : i+4]
		s0 += f32At(b, 0) * v[0]
		s1 += f32At(b, 1) * v[1]
		s2 += f32At(b, 2) * v[2]
		s3 += f32At(b, 3) * v[3]
	}
	for ; i < K; i++ {
		s0 += f32At(w, i) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dotF32s returns Σ w[i]·x[i] over len(w) values.
func dotF32s(w, x []float32) float32 {
	x = x[:len(w)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(w); i += 8 {
		a := w[i : i+8 : i+8]
		v := x[i : i+8 : i+8]
		s0 += a[0]*v[0] + a[4]*v[4]
		s1 += a[1]*v[1] + a[5]*v[5]
		s2 += a[2]*v[2] + a[6]*v[6]
		s3 += a[3]*v[3] + a[7]*v[7]
	}
	for ; i < len(w); i++ {
		s0 += w[i] * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotBF16Go(w []byte, x []float32) float32 {
	K := len(w) / 2
	x = x[:K]
	var s0, s1, s2, s3 float32
	i := 0
	if h, ok := uint16View(w); ok {
		for ; i+8 <= K; i += 8 {
			a := h[i : i+8 : i+8]
			v := x[i : i+8 : i+8]
			s0 += bf16(a[0])*v[0] + bf16(a[4])*v[4]
			s1 += bf16(a[1])*v[1] + bf16(a[5])*v[5]
			s2 += bf16(a[2])*v[2] + bf16(a[6])*v[6]
			s3 += bf16(a[3])*v[3] + bf16(a[7])*v[7]
		}
	}
	for ; i < K; i++ {
		s0 += bf16At(w, i) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16Go(w []byte, x []float32) float32 {
	K := len(w) / 2
	x = x[:K]
	// A half's sign, exponent and mantissa placed in a float32 as if the bias
	// were 127, times 2^(127-15), is its value, normal or subnormal. Groups of
	// eight holding an infinity or a NaN, which would come out finite, take
	// the table instead.
	var s0, s1, s2, s3 float32
	i := 0
	if h, ok := uint16View(w); ok {
		for ; i+8 <= K; i += 8 {
			a := h[i : i+8 : i+8]
			v := x[i : i+8 : i+8]
			if f16Special4(uint64(a[0])|uint64(a[1])<<16|uint64(a[2])<<32|uint64(a[3])<<48) ||
				f16Special4(uint64(a[4])|uint64(a[5])<<16|uint64(a[6])<<32|uint64(a[7])<<48) {
				s0 += f16(a[0])*v[0] + f16(a[4])*v[4]
				s1 += f16(a[1])*v[1] + f16(a[5])*v[5]
				s2 += f16(a[2])*v[2] + f16(a[6])*v[6]
				s3 += f16(a[3])*v[3] + f16(a[7])*v[7]
				continue
			}
			s0 += f16Finite(uint32(a[0]))*v[0] + f16Finite(uint32(a[4]))*v[4]
			s1 += f16Finite(uint32(a[1]))*v[1] + f16Finite(uint32(a[5]))*v[5]
			s2 += f16Finite(uint32(a[2]))*v[2] + f16Finite(uint32(a[6]))*v[6]
			s3 += f16Finite(uint32(a[3]))*v[3] + f16Finite(uint32(a[7]))*v[7]
		}
	}
	for ; i < K; i++ {
		s0 += f16At(w, i) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// f16Special4 reports whether one of the four halves packed in q is infinite
// or NaN: adding 1 to a 5-bit exponent field carries into bit 15 of its lane
// only from 31.
func f16Special4(q uint64) bool {
	return (q&0x7C007C007C007C00+0x0400040004000400)&0x8000800080008000 != 0
}

// f16Finite returns the value of the finite half in the low 16 bits of h.
func f16Finite(h uint32) float32 {
	return math.Float32frombits(h&0x8000<<16|h&0x7FFF<<13) * 0x1p112
}

// dotFP8Go: w holds K e4m3 bytes; scales[j] is the UE8M0 scale of columns
// [j*bc, (j+1)*bc).
func dotFP8Go(w, scales []byte, bc int, x []float32) float32 {
	K := len(w)
	x = x[:K]
	var total float32
	for j, c0 := 0, 0; c0 < K; j, c0 = j+1, c0+bc {
		c1 := min(c0+bc, K)
		q, v := w[c0:c1], x[c0:c1]
		v = v[:len(q)]
		var s0, s1, s2, s3 float32
		i := 0
		for ; i+8 <= len(q); i += 8 {
			b := q[i : i+8 : i+8]
			u := v[i : i+8 : i+8]
			s0 += quant.E4M3ToFloat32(b[0])*u[0] + quant.E4M3ToFloat32(b[4])*u[4]
			s1 += quant.E4M3ToFloat32(b[1])*u[1] + quant.E4M3ToFloat32(b[5])*u[5]
			s2 += quant.E4M3ToFloat32(b[2])*u[2] + quant.E4M3ToFloat32(b[6])*u[6]
			s3 += quant.E4M3ToFloat32(b[3])*u[3] + quant.E4M3ToFloat32(b[7])*u[7]
		}
		for ; i < len(q); i++ {
			s0 += quant.E4M3ToFloat32(q[i]) * v[i]
		}
		total += ((s0 + s1) + (s2 + s3)) * quant.UE8M0ToFloat32(scales[j])
	}
	return total
}

// dotFP4Go: w holds K/2 bytes of two e2m1 codes (low nibble = even column);
// scales[g] is the UE8M0 scale of columns [32g, 32g+32).
func dotFP4Go(w, scales []byte, x []float32) float32 {
	var total float32
	for g, sc := range scales {
		q := w[16*g : 16*g+16 : 16*g+16]
		v := x[32*g : 32*g+32 : 32*g+32]
		var s0, s1, s2, s3 float32
		for i := 0; i < 16; i += 2 {
			b0, b1 := q[i], q[i+1]
			s0 += quant.E2M1ToFloat32(b0&0xF) * v[2*i]
			s1 += quant.E2M1ToFloat32(b0>>4) * v[2*i+1]
			s2 += quant.E2M1ToFloat32(b1&0xF) * v[2*i+2]
			s3 += quant.E2M1ToFloat32(b1>>4) * v[2*i+3]
		}
		total += ((s0 + s1) + (s2 + s3)) * quant.UE8M0ToFloat32(sc)
	}
	return total
}

func decodeF32Go(dst []float32, w []byte) {
	dst = dst[:len(w)/4]
	for i := range dst {
		dst[i] = f32At(w, i)
	}
}

func decodeBF16Go(dst []float32, w []byte) {
	dst = dst[:len(w)/2]
	for i := range dst {
		dst[i] = bf16At(w, i)
	}
}

func decodeF16Go(dst []float32, w []byte) {
	dst = dst[:len(w)/2]
	for i := range dst {
		dst[i] = f16At(w, i)
	}
}

func decodeFP8Go(dst []float32, w, scales []byte, bc int) {
	dst = dst[:len(w)]
	for j, c0 := 0, 0; c0 < len(w); j, c0 = j+1, c0+bc {
		c1 := min(c0+bc, len(w))
		s := quant.UE8M0ToFloat32(scales[j])
		d := dst[c0:c1]
		for i, b := range w[c0:c1] {
			d[i] = quant.E4M3ToFloat32(b) * s
		}
	}
}

func decodeFP4Go(dst []float32, w, scales []byte) {
	dst = dst[:2*len(w)]
	for i, b := range w {
		s := quant.UE8M0ToFloat32(scales[i/16])
		dst[2*i] = quant.E2M1ToFloat32(b&0xF) * s
		dst[2*i+1] = quant.E2M1ToFloat32(b>>4) * s
	}
}

// gemm4x2Go adds Σ_k w[i*ws+k]·xj[k] to acc[2i+j][0], for the four rows of w
// (stride ws) and the tokens x0, x1, over len(x0) columns.
func gemm4x2Go(w []float32, ws int, x0, x1 []float32, acc *[8]lanes) {
	n := len(x0)
	x1 = x1[:n]
	w0, w1, w2, w3 := w[:n], w[ws:ws+n], w[2*ws:2*ws+n], w[3*ws:3*ws+n]
	var a00, a01, a10, a11, a20, a21, a30, a31 float32
	for k := range n {
		u0, u1 := x0[k], x1[k]
		v := w0[k]
		a00 += v * u0
		a01 += v * u1
		v = w1[k]
		a10 += v * u0
		a11 += v * u1
		v = w2[k]
		a20 += v * u0
		a21 += v * u1
		v = w3[k]
		a30 += v * u0
		a31 += v * u1
	}
	acc[0][0] += a00
	acc[1][0] += a01
	acc[2][0] += a10
	acc[3][0] += a11
	acc[4][0] += a20
	acc[5][0] += a21
	acc[6][0] += a30
	acc[7][0] += a31
}

// gemm4x1Go is gemm4x2Go for one token: it adds row i's dot product to acc[i][0].
func gemm4x1Go(w []float32, ws int, x0 []float32, acc *[4]lanes) {
	n := len(x0)
	w0, w1, w2, w3 := w[:n], w[ws:ws+n], w[2*ws:2*ws+n], w[3*ws:3*ws+n]
	var a0, a1, a2, a3, b0, b1, b2, b3 float32
	k := 0
	for ; k+2 <= n; k += 2 {
		u, u1 := x0[k], x0[k+1]
		a0 += w0[k] * u
		a1 += w1[k] * u
		a2 += w2[k] * u
		a3 += w3[k] * u
		b0 += w0[k+1] * u1
		b1 += w1[k+1] * u1
		b2 += w2[k+1] * u1
		b3 += w3[k+1] * u1
	}
	for ; k < n; k++ {
		u := x0[k]
		a0 += w0[k] * u
		a1 += w1[k] * u
		a2 += w2[k] * u
		a3 += w3[k] * u
	}
	acc[0][0] += a0 + b0
	acc[1][0] += a1 + b1
	acc[2][0] += a2 + b2
	acc[3][0] += a3 + b3
}

// sumFloat32Go returns the float32 sum of a, with independent partial sums.
// The bandwidth benchmark uses it.
func sumFloat32Go(a []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		v := a[i : i+8 : i+8]
		s0 += v[0]
		s1 += v[1]
		s2 += v[2]
		s3 += v[3]
		s4 += v[4]
		s5 += v[5]
		s6 += v[6]
		s7 += v[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}
