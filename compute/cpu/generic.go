package cpu

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/strata-inference/strata/quant"
)

// Portable kernels. The decode kernels write the K dequantized values of one
// weight row to dst (every stored value times its power-of-two scale, which
// is exact); FP4 kernels here read and write the natural column order. The
// one-token kernels are in dot4.go.

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

// gemm4x1Go is gemm4x2Go for one token: it adds row i's dot product to
// acc[i][0]. Each row's products are summed in one chain in column order,
// exactly as gemm4x2Go sums them, so that a token's result is the same
// whether it is paired with another or not.
func gemm4x1Go(w []float32, ws int, x0 []float32, acc *[4]lanes) {
	n := len(x0)
	w0, w1, w2, w3 := w[:n], w[ws:ws+n], w[2*ws:2*ws+n], w[3*ws:3*ws+n]
	var a0, a1, a2, a3 float32
	for k := range n {
		u := x0[k]
		a0 += w0[k] * u
		a1 += w1[k] * u
		a2 += w2[k] * u
		a3 += w3[k] * u
	}
	acc[0][0] += a0
	acc[1][0] += a1
	acc[2][0] += a2
	acc[3][0] += a3
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
