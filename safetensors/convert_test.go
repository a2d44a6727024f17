package safetensors

import (
	"math"
	"math/rand"
	"sort"
	"strings"
	"testing"
)

func TestF16(t *testing.T) {
	known := map[uint16]float32{
		0x0000: 0, 0x3c00: 1, 0xc000: -2, 0x3555: 0.333251953125, 0x7bff: 65504,
		0x0001: 1.0 / (1 << 24), 0x03ff: 1023.0 / (1 << 24), 0x0400: 1.0 / (1 << 14),
		0x7c00: float32(math.Inf(1)), 0xfc00: float32(math.Inf(-1)),
	}
	for h, want := range known {
		if got := F16ToFloat32(h); got != want {
			t.Errorf("F16ToFloat32(%#04x) = %v, want %v", h, got, want)
		}
	}
	if got := F16ToFloat32(0x8000); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("F16ToFloat32(0x8000) = %v, want -0", got)
	}
	// Every half value converts exactly and back to itself; NaNs stay NaNs.
	var finite []float64 // the non-negative finite halves, ascending
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := F16ToFloat32(h)
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			if !math.IsNaN(float64(f)) || !isF16NaN(Float32ToF16(f)) {
				t.Fatalf("%#04x: NaN not preserved: %v", h, f)
			}
			continue
		}
		if back := Float32ToF16(f); back != h {
			t.Fatalf("Float32ToF16(F16ToFloat32(%#04x) = %v) = %#04x", h, f, back)
		}
		if h < 0x7c00 {
			finite = append(finite, float64(f))
		}
	}
	if !sort.Float64sAreSorted(finite) {
		t.Fatal("halves not ascending")
	}
	// Rounding: compare with the nearest half found by search, ties to even.
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200000; i++ {
		var x float32
		switch i % 3 {
		case 0:
			x = math.Float32frombits(rng.Uint32())
		case 1: // around the half range, including subnormals and overflow
			x = float32(math.Ldexp(rng.Float64(), rng.Intn(46)-28))
		case 2: // exact midpoints, and the overflow threshold
			j := rng.Intn(len(finite))
			if j == len(finite)-1 {
				x = float32(65504 + 16*rng.Float64()*2)
			} else {
				x = float32((finite[j] + finite[j+1]) / 2)
			}
		}
		if rng.Intn(2) == 0 {
			x = -x
		}
		if math.IsNaN(float64(x)) {
			continue
		}
		got := Float32ToF16(x)
		want := nearestF16(finite, x)
		if got != want {
			t.Fatalf("Float32ToF16(%v [%#08x]) = %#04x, want %#04x", x, math.Float32bits(x), got, want)
		}
	}
}

func isF16NaN(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

// nearestF16 rounds x to a half by searching the ascending non-negative
// finite halves: nearest, ties to the even bit pattern, +-Inf beyond 65520.
func nearestF16(finite []float64, x float32) uint16 {
	a := math.Abs(float64(x))
	var sign uint16
	if math.Signbit(float64(x)) {
		sign = 0x8000
	}
	if a >= 65520 {
		return sign | 0x7c00
	}
	j := sort.SearchFloat64s(finite, a) // finite[j] >= a
	if j == len(finite) {
		return sign | 0x7bff // in (65504, 65520)
	}
	if finite[j] == a || j == 0 {
		return sign | uint16(j)
	}
	lo, hi := a-finite[j-1], finite[j]-a
	switch {
	case lo < hi:
		return sign | uint16(j-1)
	case hi < lo:
		return sign | uint16(j)
	case j%2 == 0:
		return sign | uint16(j)
	}
	return sign | uint16(j-1)
}

func TestBF16(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := BF16ToFloat32(h)
		if math.IsNaN(float64(f)) {
			if b := Float32ToBF16(f); b&0x7f80 != 0x7f80 || b&0x7f == 0 {
				t.Fatalf("%#04x: NaN became %#04x", h, b)
			}
			continue
		}
		if back := Float32ToBF16(f); back != h {
			t.Fatalf("Float32ToBF16(BF16ToFloat32(%#04x)) = %#04x", h, back)
		}
	}
	tests := []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // above tie
		{0x3f807fff, 0x3f80}, // below tie
		{0x7f7fffff, 0x7f80}, // max float32 rounds to +Inf
		{0xff800000, 0xff80}, // -Inf
		{0x7f800001, 0x7fc0}, // signalling NaN becomes quiet
	}
	for _, tt := range tests {
		if got := Float32ToBF16(math.Float32frombits(tt.in)); got != tt.want {
			t.Errorf("Float32ToBF16(%#08x) = %#04x, want %#04x", tt.in, got, tt.want)
		}
	}
}

func TestF8(t *testing.T) {
	inf := float32(math.Inf(1))
	e4m3 := map[uint8]float32{
		0x00: 0, 0x01: 1.0 / 512, 0x07: 7.0 / 512, 0x08: 1.0 / 64, 0x38: 1, 0xb8: -1,
		0x3c: 1.5, 0x40: 2, 0x7e: 448, 0xfe: -448, 0x77: 240, 0x78: 256,
	}
	e5m2 := map[uint8]float32{
		0x00: 0, 0x01: 1.0 / 65536, 0x04: 1.0 / 16384, 0x3c: 1, 0xbc: -1, 0x3e: 1.5,
		0x7b: 57344, 0x7c: inf, 0xfc: -inf,
	}
	e8m0 := map[uint8]float32{0x7f: 1, 0x80: 2, 0x7e: 0.5, 0x00: float32(math.Ldexp(1, -127)), 0xfe: float32(math.Ldexp(1, 127)), 0x01: float32(math.Ldexp(1, -126))}
	for v, want := range e4m3 {
		if got := F8E4M3ToFloat32(v); got != want {
			t.Errorf("F8E4M3ToFloat32(%#02x) = %v, want %v", v, got, want)
		}
	}
	for v, want := range e5m2 {
		if got := F8E5M2ToFloat32(v); got != want {
			t.Errorf("F8E5M2ToFloat32(%#02x) = %v, want %v", v, got, want)
		}
	}
	for v, want := range e8m0 {
		if got := F8E8M0ToFloat32(v); got != want {
			t.Errorf("F8E8M0ToFloat32(%#02x) = %v, want %v", v, got, want)
		}
	}
	// NaNs, and exhaustive checks against the defining formulas.
	for i := 0; i < 256; i++ {
		v := uint8(i)
		nan4 := v&0x7f == 0x7f
		nan5 := v&0x7f > 0x7c
		if got := math.IsNaN(float64(F8E4M3ToFloat32(v))); got != nan4 {
			t.Errorf("F8E4M3ToFloat32(%#02x) NaN = %v", v, got)
		}
		if got := math.IsNaN(float64(F8E5M2ToFloat32(v))); got != nan5 {
			t.Errorf("F8E5M2ToFloat32(%#02x) NaN = %v", v, got)
		}
		if got := math.IsNaN(float64(F8E8M0ToFloat32(v))); got != (v == 0xff) {
			t.Errorf("F8E8M0ToFloat32(%#02x) NaN = %v", v, got)
		}
		sign := 1.0
		if v&0x80 != 0 {
			sign = -1
		}
		if !nan4 {
			e, m := int(v>>3&0xf), float64(v&7)
			want := sign * math.Ldexp(m/8, -6)
			if e > 0 {
				want = sign * math.Ldexp(1+m/8, e-7)
			}
			if got := float64(F8E4M3ToFloat32(v)); got != want {
				t.Errorf("F8E4M3ToFloat32(%#02x) = %v, want %v", v, got, want)
			}
		}
		if e, m := int(v>>2&0x1f), float64(v&3); e < 31 {
			want := sign * math.Ldexp(m/4, -14)
			if e > 0 {
				want = sign * math.Ldexp(1+m/4, e-15)
			}
			if got := float64(F8E5M2ToFloat32(v)); got != want {
				t.Errorf("F8E5M2ToFloat32(%#02x) = %v, want %v", v, got, want)
			}
		}
		if v != 0xff {
			if got, want := float64(F8E8M0ToFloat32(v)), math.Ldexp(1, int(v)-127); got != want {
				t.Errorf("F8E8M0ToFloat32(%#02x) = %v, want %v", v, got, want)
			}
		}
	}
}

func TestFloat32s(t *testing.T) {
	values := []float32{0, 1, -2.5, 0.099975586, 65504, float32(math.Inf(-1))}
	for _, dt := range []DType{F32, F16, BF16, F64} {
		data, err := EncodeFloat32s(dt, values)
		if err != nil {
			t.Fatal(err)
		}
		tn := Tensor{Name: "x", DType: dt, Shape: []int{2, 3}, Data: data}
		got, err := tn.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range values {
			want := v
			switch dt {
			case F16:
				want = F16ToFloat32(Float32ToF16(v))
			case BF16:
				want = BF16ToFloat32(Float32ToBF16(v))
			}
			if got[i] != want {
				t.Errorf("%s: element %d = %v, want %v", dt, i, got[i], want)
			}
		}
	}
	f8 := Tensor{Name: "s", DType: F8E8M0, Shape: []int{3}, Data: []byte{0x7f, 0x80, 0x7d}}
	if got, err := f8.Float32s(); err != nil || got[0] != 1 || got[1] != 2 || got[2] != 0.25 {
		t.Errorf("F8_E8M0 Float32s = %v, %v", got, err)
	}
	for _, tn := range []Tensor{
		{Name: "i", DType: I32, Shape: []int{1}, Data: make([]byte, 4), File: "f.safetensors"},
		{Name: "short", DType: F32, Shape: []int{2}, Data: make([]byte, 4)},
		{Name: "unknown", DType: "X", Shape: []int{1}, Data: make([]byte, 4)},
	} {
		if _, err := tn.Float32s(); err == nil || !strings.Contains(err.Error(), `tensor "`+tn.Name+`"`) || !strings.Contains(err.Error(), tn.File) {
			t.Errorf("Float32s of %s: error %v, want one naming the tensor", tn.Name, err)
		}
	}
	if _, err := EncodeFloat32s(I8, values); err == nil {
		t.Error("EncodeFloat32s(I8) succeeded")
	}
}

func TestInt64s(t *testing.T) {
	tests := []struct {
		dt     DType
		values []int64
	}{
		{I64, []int64{0, -1, math.MaxInt64, math.MinInt64}},
		{U64, []int64{0, 1, math.MaxInt64}},
		{I32, []int64{0, -1, math.MaxInt32, math.MinInt32}},
		{U32, []int64{0, 1, math.MaxUint32}},
		{I16, []int64{0, -1, math.MaxInt16, math.MinInt16}},
		{U16, []int64{0, 1, math.MaxUint16}},
		{I8, []int64{0, -1, math.MaxInt8, math.MinInt8}},
		{U8, []int64{0, 1, math.MaxUint8}},
		{Bool, []int64{0, 1, 1}},
	}
	for _, tt := range tests {
		data, err := EncodeInt64s(tt.dt, tt.values)
		if err != nil {
			t.Fatal(err)
		}
		tn := Tensor{Name: "x", DType: tt.dt, Shape: []int{len(tt.values)}, Data: data}
		got, err := tn.Int64s()
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != tt.values[i] {
				t.Errorf("%s: element %d = %d, want %d", tt.dt, i, got[i], tt.values[i])
			}
		}
	}
	if _, err := EncodeInt64s(U8, []int64{256}); err == nil {
		t.Error("EncodeInt64s(U8, 256) succeeded")
	}
	if _, err := EncodeInt64s(Bool, []int64{2}); err == nil {
		t.Error("EncodeInt64s(Bool, 2) succeeded")
	}
	big := Tensor{Name: "u", DType: U64, Shape: []int{1}, Data: []byte{0, 0, 0, 0, 0, 0, 0, 0x80}}
	if _, err := big.Int64s(); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("U64 2^63: error %v", err)
	}
	if _, err := (Tensor{Name: "f", DType: F32, Shape: []int{}, Data: make([]byte, 4)}).Int64s(); err == nil {
		t.Error("Int64s of F32 succeeded")
	}
}
