package safetensors

// DType is the element type of a tensor, spelled as in the safetensors header
// ("F32", "BF16", "F8_E4M3", ...).
type DType string

// The element types this package reads and writes. Sub-byte types of the
// reference implementation (F4, F6_E2M3, F6_E3M2) and complex types are not
// supported: a header that uses them is rejected as having an unknown dtype.
const (
	Bool   DType = "BOOL"    // one byte per element, 0 or 1
	U8     DType = "U8"      // unsigned 8-bit integer
	I8     DType = "I8"      // signed 8-bit integer
	F8E4M3 DType = "F8_E4M3" // 8-bit float e4m3fn: bias 7, no infinities, NaN = S.1111.111
	F8E5M2 DType = "F8_E5M2" // 8-bit float e5m2: bias 15, IEEE-style infinities and NaNs
	F8E8M0 DType = "F8_E8M0" // 8-bit power of two (UE8M0 scale): 2^(b-127), 0xFF = NaN
	I16    DType = "I16"     // signed 16-bit integer, little endian
	U16    DType = "U16"     // unsigned 16-bit integer, little endian
	F16    DType = "F16"     // IEEE 754 half precision, little endian
	BF16   DType = "BF16"    // bfloat16 (upper half of a float32), little endian
	I32    DType = "I32"     // signed 32-bit integer, little endian
	U32    DType = "U32"     // unsigned 32-bit integer, little endian
	F32    DType = "F32"     // IEEE 754 single precision, little endian
	I64    DType = "I64"     // signed 64-bit integer, little endian
	U64    DType = "U64"     // unsigned 64-bit integer, little endian
	F64    DType = "F64"     // IEEE 754 double precision, little endian
)

// Size returns the number of bytes per element of d, or 0 if d is not a
// dtype this package knows.
func (d DType) Size() int {
	switch d {
	case Bool, U8, I8, F8E4M3, F8E5M2, F8E8M0:
		return 1
	case I16, U16, F16, BF16:
		return 2
	case I32, U32, F32:
		return 4
	case I64, U64, F64:
		return 8
	}
	return 0
}

// String returns the header spelling of d.
func (d DType) String() string { return string(d) }
