// Package quant converts between float32 and the narrow number formats of
// DeepSeek-V4 checkpoints (FP8 e4m3fn and e5m2, UE8M0 scales, FP4 e2m1,
// bfloat16 and IEEE half), and quantizes and dequantizes the block-scaled
// matrices those checkpoints store.
//
// Every encoder rounds to nearest, ties to even, unless its documentation says
// otherwise. Decoders are exact: every value of the narrow formats is a float32.
// The package has no mutable state; its lookup tables are computed once at
// initialization and never written afterwards.
package quant

import "math"

// e4m3Table[b] is the float32 value of the e4m3fn byte b.
var e4m3Table = func() (t [256]float32) {
	for i := range t {
		t[i] = decodeE4M3(byte(i))
	}
	return t
}()

// e5m2Table[b] is the float32 value of the e5m2 byte b.
var e5m2Table = func() (t [256]float32) {
	for i := range t {
		t[i] = decodeE5M2(byte(i))
	}
	return t
}()

// ue8m0Table[b] is 2^(b-127), and NaN for b = 0xFF.
var ue8m0Table = func() (t [256]float32) {
	for i := range t {
		t[i] = decodeUE8M0(byte(i))
	}
	return t
}()

// e2m1Table holds the 16 values of an e2m1 code: magnitudes in codes 0..7,
// the same negated in codes 8..15.
var e2m1Table = [16]float32{
	0, 0.5, 1, 1.5, 2, 3, 4, 6,
	float32(math.Copysign(0, -1)), -0.5, -1, -1.5, -2, -3, -4, -6,
}

// E4M3MaxFinite is the largest finite e4m3fn value.
const E4M3MaxFinite = 448

// E5M2MaxFinite is the largest finite e5m2 value.
const E5M2MaxFinite = 57344

// E2M1MaxFinite is the largest e2m1 value.
const E2M1MaxFinite = 6

// E4M3ToFloat32 returns the value of the FP8 e4m3fn byte b: sign bit, 4
// exponent bits with bias 7, 3 mantissa bits; exponent 0 encodes subnormals
// 2^-6 * m/8. There are no infinities; 0x7F and 0xFF are NaN.
func E4M3ToFloat32(b byte) float32 { return e4m3Table[b] }

func decodeE4M3(b byte) float32 {
	e := int(b>>3) & 0xF
	m := int(b & 7)
	var v float64
	switch {
	case e == 15 && m == 7:
		return float32(math.NaN())
	case e == 0:
		v = math.Ldexp(float64(m), -9) // 2^-6 * m/8
	default:
		v = math.Ldexp(float64(8+m), e-7-3) // 2^(e-7) * (1 + m/8)
	}
	if b&0x80 != 0 {
		v = -v
	}
	return float32(v)
}

// Float32ToE4M3 returns the e4m3fn byte nearest to f, ties to even. Values
// beyond the finite range, infinities included, saturate to ±448 (0x7E, 0xFE);
// NaN becomes 0x7F. The sign of f is kept, so negative values that round to
// zero give 0x80 (-0).
func Float32ToE4M3(f float32) byte {
	if f != f {
		return 0x7F
	}
	var sign byte
	if math.Signbit(float64(f)) {
		sign = 0x80
	}
	code := roundMinifloat(abs32(f), 3, 7)
	if code > 0x7E {
		code = 0x7E
	}
	return sign | byte(code)
}

// E5M2ToFloat32 returns the value of the FP8 e5m2 byte b: sign bit, 5
// exponent bits with bias 15, 2 mantissa bits, IEEE-style subnormals (2^-14 *
// m/4), infinities (0x7C, 0xFC) and NaNs (exponent 31, mantissa nonzero).
func E5M2ToFloat32(b byte) float32 { return e5m2Table[b] }

func decodeE5M2(b byte) float32 {
	e := int(b>>2) & 0x1F
	m := int(b & 3)
	var v float64
	switch {
	case e == 31 && m != 0:
		return float32(math.NaN())
	case e == 31:
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(float64(m), -16) // 2^-14 * m/4
	default:
		v = math.Ldexp(float64(4+m), e-15-2)
	}
	if b&0x80 != 0 {
		v = -v
	}
	return float32(v)
}

// Float32ToE5M2 returns the e5m2 byte nearest to f, ties to even, with IEEE
// overflow: magnitudes that round beyond 57344 become infinity. NaN becomes
// 0x7E (a quiet NaN); the sign of f is kept otherwise.
func Float32ToE5M2(f float32) byte {
	if f != f {
		return 0x7E
	}
	var sign byte
	if math.Signbit(float64(f)) {
		sign = 0x80
	}
	code := roundMinifloat(abs32(f), 2, 15)
	if code > 0x7C {
		code = 0x7C
	}
	return sign | byte(code)
}

// UE8M0ToFloat32 returns 2^(b-127), the value of the unsigned, exponent-only
// scale byte b; b = 0 gives 2^-127 (a float32 subnormal) and b = 0xFF is NaN.
func UE8M0ToFloat32(b byte) float32 { return ue8m0Table[b] }

func decodeUE8M0(b byte) float32 {
	switch b {
	case 0xFF:
		return float32(math.NaN())
	case 0:
		return math.Float32frombits(1 << 22) // 2^-127
	}
	return math.Float32frombits(uint32(b) << 23)
}

// Float32ToUE8M0 returns the UE8M0 byte of the smallest power of two that is
// >= f: the scale to choose so that f/scale <= 1. It rounds up, not to nearest.
// Values <= 2^-127, zero and negative values included, give 0 (2^-127);
// values above 2^127, +Inf included, saturate to 254 (2^127); NaN gives 0xFF.
func Float32ToUE8M0(f float32) byte {
	switch {
	case f != f:
		return 0xFF
	case f <= 0x1p-127:
		return 0
	case f > 0x1p127:
		return 254
	}
	bits := math.Float32bits(f)
	e := bits >> 23 // biased exponent; f > 0 so there is no sign bit
	if e == 0 {
		// 2^-127 < f < 2^-126: the answer is 2^-126.
		return 1
	}
	if bits&(1<<23-1) != 0 {
		e++
	}
	return byte(e)
}

// E2M1ToFloat32 returns the value of the 4-bit FP4 e2m1 code (the low 4 bits
// of code): codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 and codes 8..15 the same
// negated.
func E2M1ToFloat32(code byte) float32 { return e2m1Table[code&0xF] }

// Float32ToE2M1 returns the e2m1 code whose magnitude is nearest to |f|, ties
// going to the smaller magnitude (as an argmin over the ordered magnitudes
// does), so |f| >= 6 clamps to 6. The sign bit 8 is set only for negative f
// with a nonzero magnitude code, so no -0 is produced. NaN gives 0.
func Float32ToE2M1(f float32) byte {
	a := abs32(f)
	var code byte
	switch {
	case !(a > 0.25): // NaN as well
		return 0
	case a <= 0.75:
		code = 1
	case a <= 1.25:
		code = 2
	case a <= 1.75:
		code = 3
	case a <= 2.5:
		code = 4
	case a <= 3.5:
		code = 5
	case a <= 5:
		code = 6
	default:
		code = 7
	}
	if f < 0 {
		code |= 8
	}
	return code
}

// BF16ToFloat32 returns the value of the bfloat16 bits h (the high half of a float32).
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBF16 returns the bfloat16 nearest to f, ties to even; infinities
// stay infinite and NaNs stay NaN (made quiet).
func Float32ToBF16(f float32) uint16 {
	bits := math.Float32bits(f)
	if f != f {
		return uint16(bits>>16) | 0x40
	}
	bits += 0x7FFF + (bits>>16)&1
	return uint16(bits >> 16)
}

// F16ToFloat32 returns the value of the IEEE 754 binary16 bits h.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1F
	m := uint32(h & 0x3FF)
	switch {
	case e == 31: // inf or NaN
		return math.Float32frombits(sign | 0x7F800000 | m<<13)
	case e == 0: // zero or subnormal: m * 2^-24, exact in float32
		v := float32(m) * 0x1p-24
		return math.Float32frombits(sign | math.Float32bits(v))
	}
	return math.Float32frombits(sign | (e+127-15)<<23 | m<<13)
}

// Float32ToF16 returns the IEEE binary16 nearest to f, ties to even, with IEEE
// overflow to infinity and gradual underflow; NaNs stay NaN (made quiet).
func Float32ToF16(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	if f != f {
		return sign | 0x7E00 | uint16(bits>>13)&0x3FF
	}
	code := roundMinifloat(abs32(f), 10, 15)
	if code > 0x7C00 {
		code = 0x7C00
	}
	return sign | uint16(code)
}

// roundMinifloat returns the magnitude bits (exponent and mantissa fields,
// no sign) of the binary format with manBits mantissa bits and exponent bias
// bias that is nearest to a >= 0 (finite or +Inf), ties to even. The result
// is not clamped: codes past the format's largest finite value mean overflow.
func roundMinifloat(a float32, manBits, bias uint) uint32 {
	minNormal := math.Ldexp(1, 1-int(bias))
	if float64(a) < minNormal {
		// Subnormal range: the code is the multiple of the subnormal step,
		// and the step count 2^manBits is exactly the smallest normal's code.
		q := math.RoundToEven(math.Ldexp(float64(a), int(bias)-1+int(manBits)))
		return uint32(q)
	}
	bits := math.Float32bits(a)
	if bits >= 0x7F800000 {
		bits = 0x7F7FFFFF // +Inf rounds like the largest float32: overflow
	}
	shift := 23 - manBits
	bits += 1<<(shift-1) - 1 + (bits>>shift)&1
	return bits>>shift - uint32(127-bias)<<manBits
}

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }
