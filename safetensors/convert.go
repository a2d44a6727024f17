package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Float32s returns the elements of a floating-point tensor converted to a new
// []float32. It accepts F32, F16, BF16, F64 (rounded to nearest) and the
// 8-bit floats F8_E4M3, F8_E5M2 and F8_E8M0; F8 tensors are converted
// element by element, with no block scales applied.
func (t Tensor) Float32s() ([]float32, error) {
	n, err := t.checkLen()
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	b := t.Data
	le := binary.LittleEndian
	switch t.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	case F16:
		for i := range out {
			out[i] = F16ToFloat32(le.Uint16(b[2*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = BF16ToFloat32(le.Uint16(b[2*i:]))
		}
	case F64:
		for i := range out {
			out[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	case F8E4M3:
		for i := range out {
			out[i] = F8E4M3ToFloat32(b[i])
		}
	case F8E5M2:
		for i := range out {
			out[i] = F8E5M2ToFloat32(b[i])
		}
	case F8E8M0:
		for i := range out {
			out[i] = F8E8M0ToFloat32(b[i])
		}
	default:
		return nil, t.errorf("cannot convert %s to float32", t.DType)
	}
	return out, nil
}

// Int64s returns the elements of an integer or BOOL tensor converted to a new
// []int64. It accepts I64, I32, I16, I8, U32, U16, U8, BOOL, and U64 if every
// element fits in an int64.
func (t Tensor) Int64s() ([]int64, error) {
	n, err := t.checkLen()
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	b := t.Data
	le := binary.LittleEndian
	switch t.DType {
	case I64:
		for i := range out {
			out[i] = int64(le.Uint64(b[8*i:]))
		}
	case U64:
		for i := range out {
			v := le.Uint64(b[8*i:])
			if v > math.MaxInt64 {
				return nil, t.errorf("element %d: %d does not fit in an int64", i, v)
			}
			out[i] = int64(v)
		}
	case I32:
		for i := range out {
			out[i] = int64(int32(le.Uint32(b[4*i:])))
		}
	case U32:
		for i := range out {
			out[i] = int64(le.Uint32(b[4*i:]))
		}
	case I16:
		for i := range out {
			out[i] = int64(int16(le.Uint16(b[2*i:])))
		}
	case U16:
		for i := range out {
			out[i] = int64(le.Uint16(b[2*i:]))
		}
	case I8:
		for i := range out {
			out[i] = int64(int8(b[i]))
		}
	case U8, Bool:
		for i := range out {
			out[i] = int64(b[i])
		}
	default:
		return nil, t.errorf("cannot convert %s to int64", t.DType)
	}
	return out, nil
}

// checkLen returns the element count of t after checking that Data has the
// length the dtype and shape imply (tensors built by hand may not).
func (t Tensor) checkLen() (int, error) {
	size := t.DType.Size()
	if size == 0 {
		return 0, t.errorf("unknown dtype %q", string(t.DType))
	}
	for _, d := range t.Shape {
		if d < 0 {
			return 0, t.errorf("negative dimension in shape %v", t.Shape)
		}
	}
	want, ok := byteSize(t.Shape, size)
	if !ok || int64(len(t.Data)) != want {
		return 0, t.errorf("data is %d bytes, shape %v of %s needs %d", len(t.Data), t.Shape, t.DType, want)
	}
	return int(want) / size, nil
}

func (t Tensor) errorf(format string, args ...any) error {
	return fmt.Errorf("%stensor %q: %s", prefix(t.File), t.Name, fmt.Sprintf(format, args...))
}

// F16ToFloat32 converts an IEEE 754 half-precision value to float32, exactly.
// Subnormals, infinities and NaNs (with their payload) are preserved.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch exp {
	case 0:
		// Zero or subnormal: man * 2^-24, exact in float32.
		f := float32(man) * (1.0 / (1 << 24))
		return math.Float32frombits(math.Float32bits(f) | sign)
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// Float32ToF16 converts f to IEEE 754 half precision, rounding to nearest,
// ties to even. Values too large become infinities; NaNs stay NaNs (quiet).
func Float32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(man>>13)
	}
	e := exp - 127 + 15 // biased half exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal half: the value is m * 2^-24 with
		// m = (1.man) * 2^(exp-127+24) = (man|1<<23) >> (14-e).
		if e < -10 {
			return sign // below half the smallest subnormal: zero
		}
		m := man | 1<<23
		shift := uint32(14 - e)
		r := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && r&1 == 1 {
			r++ // may carry into the smallest normal, which is correct
		}
		return sign | uint16(r)
	}
	h := uint16(e)<<10 | uint16(man>>13)
	rem := man & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, up to infinity, which is correct
	}
	return sign | h
}

// BF16ToFloat32 converts a bfloat16 value to float32, exactly.
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBF16 converts f to bfloat16, rounding to nearest, ties to even.
// NaNs stay NaNs (quiet).
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// F8E4M3ToFloat32 converts an e4m3fn value (bias 7, no infinities, NaN for
// exponent and mantissa all ones, largest finite 448) to float32.
func F8E4M3ToFloat32(v uint8) float32 {
	sign := uint32(v&0x80) << 24
	exp := uint32(v>>3) & 0xf
	man := uint32(v) & 7
	if exp == 0xf && man == 7 {
		return math.Float32frombits(sign | 0x7fc00000)
	}
	if exp == 0 {
		f := float32(man) * (1.0 / (1 << 9)) // man/8 * 2^-6
		return math.Float32frombits(math.Float32bits(f) | sign)
	}
	return math.Float32frombits(sign | (exp+127-7)<<23 | man<<20)
}

// F8E5M2ToFloat32 converts an e5m2 value (bias 15, IEEE-style infinities and
// NaNs, largest finite 57344) to float32.
func F8E5M2ToFloat32(v uint8) float32 { return F16ToFloat32(uint16(v) << 8) }

// F8E8M0ToFloat32 converts an unsigned e8m0 scale, 2^(v-127), to float32;
// 0xFF is NaN. v = 0 gives 2^-127, a float32 subnormal.
func F8E8M0ToFloat32(v uint8) float32 {
	switch v {
	case 0xff:
		return math.Float32frombits(0x7fc00000)
	case 0:
		return math.Float32frombits(1 << 22)
	}
	return math.Float32frombits(uint32(v) << 23)
}

// EncodeFloat32s encodes values as the little-endian bytes of a tensor of
// dtype F32, F16, BF16 or F64, rounding to nearest, ties to even.
func EncodeFloat32s(dtype DType, values []float32) ([]byte, error) {
	le := binary.LittleEndian
	switch dtype {
	case F32:
		b := make([]byte, 4*len(values))
		for i, v := range values {
			le.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b, nil
	case F16:
		b := make([]byte, 2*len(values))
		for i, v := range values {
			le.PutUint16(b[2*i:], Float32ToF16(v))
		}
		return b, nil
	case BF16:
		b := make([]byte, 2*len(values))
		for i, v := range values {
			le.PutUint16(b[2*i:], Float32ToBF16(v))
		}
		return b, nil
	case F64:
		b := make([]byte, 8*len(values))
		for i, v := range values {
			le.PutUint64(b[8*i:], math.Float64bits(float64(v)))
		}
		return b, nil
	}
	return nil, fmt.Errorf("safetensors: cannot encode float32 values as %s", dtype)
}

// EncodeInt64s encodes values as the little-endian bytes of a tensor of an
// integer dtype or BOOL, failing if a value is out of the dtype's range.
func EncodeInt64s(dtype DType, values []int64) ([]byte, error) {
	var lo, hi int64
	switch dtype {
	case Bool:
		lo, hi = 0, 1
	case U8:
		lo, hi = 0, math.MaxUint8
	case I8:
		lo, hi = math.MinInt8, math.MaxInt8
	case U16:
		lo, hi = 0, math.MaxUint16
	case I16:
		lo, hi = math.MinInt16, math.MaxInt16
	case U32:
		lo, hi = 0, math.MaxUint32
	case I32:
		lo, hi = math.MinInt32, math.MaxInt32
	case U64:
		lo, hi = 0, math.MaxInt64
	case I64:
		lo, hi = math.MinInt64, math.MaxInt64
	default:
		return nil, fmt.Errorf("safetensors: cannot encode int64 values as %s", dtype)
	}
	size := dtype.Size()
	b := make([]byte, size*len(values))
	for i, v := range values {
		if v < lo || v > hi {
			return nil, fmt.Errorf("safetensors: element %d: %d is out of the range of %s", i, v, dtype)
		}
		var x [8]byte
		binary.LittleEndian.PutUint64(x[:], uint64(v))
		copy(b[size*i:], x[:size])
	}
	return b, nil
}
