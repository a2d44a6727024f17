package quant

import (
	"math"
	"testing"
)

func isNaN32(f float32) bool { return f != f }

// same reports whether a and b are the same float32, NaNs equal to each other
// and -0 distinct from +0.
func same(a, b float32) bool {
	if isNaN32(a) || isNaN32(b) {
		return isNaN32(a) && isNaN32(b)
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

var negZero = float32(math.Copysign(0, -1))

func TestE4M3Decode(t *testing.T) {
	for _, tc := range []struct {
		b    byte
		want float32
	}{
		{0x00, 0},
		{0x80, negZero},
		{0x38, 1},          // e=7, m=0
		{0x39, 1.125},      // e=7, m=1
		{0xB8, -1},         // sign
		{0x40, 2},          // e=8
		{0x30, 0.5},        // e=6
		{0x7E, 448},        // e=15, m=6: 2^8 * 1.75
		{0xFE, -448},       // sign
		{0x7D, 416},        // 2^8 * 1.625
		{0x77, 240},        // e=14, m=7: 2^7 * 1.875
		{0x08, 0x1p-6},     // smallest normal
		{0x01, 0x1p-9},     // smallest subnormal: 2^-6 * 1/8
		{0x07, 7 * 0x1p-9}, // largest subnormal
		{0x04, 0x1p-7},
		{0x81, -0x1p-9},
	} {
		if got := E4M3ToFloat32(tc.b); !same(got, tc.want) {
			t.Errorf("E4M3ToFloat32(%#02x) = %v, want %v", tc.b, got, tc.want)
		}
	}
	for _, b := range []byte{0x7F, 0xFF} {
		if got := E4M3ToFloat32(b); !isNaN32(got) {
			t.Errorf("E4M3ToFloat32(%#02x) = %v, want NaN", b, got)
		}
	}
}

func TestE4M3Encode(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		f    float32
		want byte
	}{
		{0, 0x00},
		{negZero, 0x80},
		{1, 0x38},
		{-1, 0xB8},
		{448, 0x7E},
		{449, 0x7E},
		{463.9, 0x7E},
		{464, 0x7E}, // tie between 448 and (unrepresentable) 480: saturates
		{1000, 0x7E},
		{inf, 0x7E},
		{-inf, 0xFE},
		{-1e9, 0xFE},
		{1.0625, 0x38},  // tie between 1 (m=0, even) and 1.125: to even
		{1.1875, 0x3A},  // tie between 1.125 (m=1) and 1.25 (m=2): to even
		{1.07, 0x39},    // above the tie
		{0x1p-9, 0x01},  // smallest subnormal
		{0x1p-10, 0x00}, // half the smallest subnormal: tie to even 0
		{-0x1p-10, 0x80},
		{0x1.8p-10, 0x01},      // 0.75 step: up
		{0x1.8p-9, 0x02},       // 1.5 steps: tie to even 2
		{0x1.4p-8, 0x02},       // 2.5 steps: tie to even 2
		{15.5 * 0x1p-10, 0x08}, // 7.75 steps rounds to 8: the smallest normal
		{0x1p-6, 0x08},
		{0x1p-20, 0x00},
		{240, 0x77},
		{248, 0x78}, // tie between 240 (m=7) and 256 (m=0 of next exponent): to even
		{0.1, 0x1D}, // 0.1 = 2^-4 * 1.6: m = 4.8 -> 5, e = 3
	} {
		if got := Float32ToE4M3(tc.f); got != tc.want {
			t.Errorf("Float32ToE4M3(%v) = %#02x, want %#02x", tc.f, got, tc.want)
		}
	}
	if got := Float32ToE4M3(float32(math.NaN())); got != 0x7F {
		t.Errorf("Float32ToE4M3(NaN) = %#02x, want 0x7f", got)
	}
}

func TestE4M3RoundTrip(t *testing.T) {
	for i := range 256 {
		b := byte(i)
		f := E4M3ToFloat32(b)
		got := Float32ToE4M3(f)
		if isNaN32(f) {
			if got != 0x7F {
				t.Errorf("Float32ToE4M3(E4M3ToFloat32(%#02x) = NaN) = %#02x, want 0x7f", b, got)
			}
			continue
		}
		if got != b {
			t.Errorf("Float32ToE4M3(E4M3ToFloat32(%#02x) = %v) = %#02x", b, f, got)
		}
	}
}

// TestE4M3Nearest checks the encoder against a brute-force nearest search
// over all finite codes, on a dense sweep of values.
func TestE4M3Nearest(t *testing.T) {
	checkNearest(t, "e4m3", Float32ToE4M3, E4M3ToFloat32, 448, func(f float32) bool { return false })
}

func TestE5M2Nearest(t *testing.T) {
	checkNearest(t, "e5m2", Float32ToE5M2, E5M2ToFloat32, 57344, func(f float32) bool { return f >= 61440 })
}

// checkNearest compares enc(f) with the code minimizing |dec(code) - f|, ties
// to the even code, for positive f up to 1.2*maxFinite; overflow(f) says f
// must encode to infinity (not checked against the search).
func checkNearest(t *testing.T, name string, enc func(float32) byte, dec func(byte) float32, maxFinite float64, overflow func(float32) bool) {
	t.Helper()
	type cv struct {
		code byte
		v    float64
	}
	var codes []cv
	for i := range 128 {
		v := dec(byte(i))
		if !isNaN32(v) && !math.IsInf(float64(v), 0) {
			codes = append(codes, cv{byte(i), float64(v)})
		}
	}
	bad := 0
	for f := float32(1e-7); f < float32(1.2*maxFinite); f *= 1.0009 {
		for _, g := range []float32{f, -f} {
			if overflow(abs32(g)) {
				continue
			}
			a := math.Abs(float64(g))
			best, bestD := codes[0], math.Inf(1)
			for _, c := range codes {
				d := math.Abs(c.v - a)
				if d < bestD || d == bestD && c.code&1 == 0 {
					best, bestD = c, d
				}
			}
			want := best.code
			if g < 0 {
				want |= 0x80
			}
			if got := enc(g); got != want {
				if bad++; bad < 10 {
					t.Errorf("Float32To%s(%v) = %#02x (%v), want %#02x (%v)", name, g, got, dec(got), want, dec(want))
				}
			}
		}
	}
}

func TestE5M2(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		b byte
		f float32
	}{
		{0x00, 0},
		{0x80, negZero},
		{0x3C, 1},    // e=15
		{0x3D, 1.25}, // m=1
		{0xBC, -1},
		{0x7B, 57344}, // e=30, m=3: 2^15 * 1.75
		{0x7C, inf},
		{0xFC, -inf},
		{0x04, 0x1p-14}, // smallest normal
		{0x01, 0x1p-16}, // smallest subnormal
		{0x03, 3 * 0x1p-16},
	} {
		if got := E5M2ToFloat32(tc.b); !same(got, tc.f) {
			t.Errorf("E5M2ToFloat32(%#02x) = %v, want %v", tc.b, got, tc.f)
		}
		if got := Float32ToE5M2(tc.f); got != tc.b {
			t.Errorf("Float32ToE5M2(%v) = %#02x, want %#02x", tc.f, got, tc.b)
		}
	}
	for _, b := range []byte{0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF} {
		if got := E5M2ToFloat32(b); !isNaN32(got) {
			t.Errorf("E5M2ToFloat32(%#02x) = %v, want NaN", b, got)
		}
	}
	for _, tc := range []struct {
		f    float32
		want byte
	}{
		{61439, 0x7B}, // below the midpoint of 57344 and 65536
		{61440, 0x7C}, // the midpoint: to even, which is the overflow to inf
		{1e6, 0x7C},
		{-1e6, 0xFC},
		{1.125, 0x3C}, // tie between 1 and 1.25: to even
		{1.375, 0x3E}, // tie between 1.25 and 1.5: to even
		{0x1p-17, 0x00},
		{0x1.8p-16, 0x02},
	} {
		if got := Float32ToE5M2(tc.f); got != tc.want {
			t.Errorf("Float32ToE5M2(%v) = %#02x, want %#02x", tc.f, got, tc.want)
		}
	}
	if got := Float32ToE5M2(float32(math.NaN())); !isNaN32(E5M2ToFloat32(got)) {
		t.Errorf("Float32ToE5M2(NaN) = %#02x, not a NaN", got)
	}
	for i := range 256 {
		b := byte(i)
		f := E5M2ToFloat32(b)
		if isNaN32(f) {
			continue
		}
		if got := Float32ToE5M2(f); got != b {
			t.Errorf("Float32ToE5M2(E5M2ToFloat32(%#02x) = %v) = %#02x", b, f, got)
		}
	}
}

func TestUE8M0(t *testing.T) {
	for _, tc := range []struct {
		b byte
		f float32
	}{
		{127, 1},
		{128, 2},
		{126, 0.5},
		{0, 0x1p-127}, // a float32 subnormal
		{1, 0x1p-126},
		{117, 0x1p-10},
		{254, 0x1p127},
	} {
		if got := UE8M0ToFloat32(tc.b); got != tc.f {
			t.Errorf("UE8M0ToFloat32(%d) = %v, want %v", tc.b, got, tc.f)
		}
		if got := Float32ToUE8M0(tc.f); got != tc.b {
			t.Errorf("Float32ToUE8M0(%v) = %d, want %d", tc.f, got, tc.b)
		}
	}
	if got := UE8M0ToFloat32(0xFF); !isNaN32(got) {
		t.Errorf("UE8M0ToFloat32(0xff) = %v, want NaN", got)
	}
	for _, tc := range []struct {
		f    float32
		want byte
	}{
		{1.0000001, 128}, // just above 1: the next power, 2
		{0.75, 127},      // 1
		{0.5000001, 127}, // 1
		{3, 129},         // 4
		{448.0 / 448, 127},
		{0.1 / 448, 115},  // 2.2e-4 <= 2^-12
		{1e-30 / 448, 19}, // 2.2e-33 <= 2^-108
		{0x1.8p-127, 1},   // between 2^-127 and 2^-126 (subnormal)
		{0x1p-149, 0},
		{0, 0},
		{-5, 0},
		{0x1.8p127, 254},            // saturates
		{float32(math.Inf(1)), 254}, // saturates
		{float32(math.NaN()), 0xFF}, // NaN
	} {
		if got := Float32ToUE8M0(tc.f); got != tc.want {
			t.Errorf("Float32ToUE8M0(%v) = %d, want %d", tc.f, got, tc.want)
		}
	}
	// The result is the smallest power of two >= f.
	for f := float32(1e-37); f < 1e37; f *= 1.37 {
		b := Float32ToUE8M0(f)
		p := UE8M0ToFloat32(b)
		if p < f || (b > 0 && UE8M0ToFloat32(b-1) >= f) {
			t.Errorf("Float32ToUE8M0(%v) = %d (%v), not the smallest power of two >= f", f, b, p)
		}
	}
}

func TestE2M1(t *testing.T) {
	want := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, negZero, -0.5, -1, -1.5, -2, -3, -4, -6}
	for code, w := range want {
		if got := E2M1ToFloat32(byte(code)); !same(got, w) {
			t.Errorf("E2M1ToFloat32(%d) = %v, want %v", code, got, w)
		}
		if code == 8 {
			continue // -0 encodes as 0
		}
		if got := Float32ToE2M1(w); got != byte(code) {
			t.Errorf("Float32ToE2M1(%v) = %d, want %d", w, got, code)
		}
	}
	for _, tc := range []struct {
		f    float32
		want byte
	}{
		{0.25, 0}, // tie between 0 and 0.5: the lower magnitude
		{0.26, 1},
		{-0.25, 0}, // no -0
		{-0.1, 0},
		{negZero, 0},
		{0.75, 1}, // tie between 0.5 and 1: lower
		{0.76, 2},
		{1.25, 2},
		{1.75, 3},
		{2.5, 4}, // tie between 2 and 3: lower
		{2.51, 5},
		{3.5, 5},
		{5, 6}, // tie between 4 and 6: lower
		{5.01, 7},
		{6, 7},
		{100, 7}, // clamps to 6
		{-100, 15},
		{-2.6, 13},
		{float32(math.Inf(1)), 7},
		{float32(math.NaN()), 0},
	} {
		if got := Float32ToE2M1(tc.f); got != tc.want {
			t.Errorf("Float32ToE2M1(%v) = %d, want %d", tc.f, got, tc.want)
		}
	}
}

func TestBF16(t *testing.T) {
	for _, tc := range []struct {
		h uint16
		f float32
	}{
		{0x3F80, 1},
		{0xBF80, -1},
		{0x4000, 2},
		{0x0000, 0},
		{0x8000, negZero},
		{0x7F80, float32(math.Inf(1))},
		{0x3F81, 1 + 1.0/128},
		{0x0001, math.Float32frombits(0x00010000)}, // subnormal
	} {
		if got := BF16ToFloat32(tc.h); !same(got, tc.f) {
			t.Errorf("BF16ToFloat32(%#04x) = %v, want %v", tc.h, got, tc.f)
		}
		if got := Float32ToBF16(tc.f); got != tc.h {
			t.Errorf("Float32ToBF16(%v) = %#04x, want %#04x", tc.f, got, tc.h)
		}
	}
	for _, tc := range []struct {
		f    float32
		want uint16
	}{
		{math.Float32frombits(0x3F808000), 0x3F80}, // tie, even stays
		{math.Float32frombits(0x3F818000), 0x3F82}, // tie, odd rounds up to even
		{math.Float32frombits(0x3F808001), 0x3F81}, // above the tie
		{math.Float32frombits(0x7F7FFFFF), 0x7F80}, // max float32 rounds to inf
	} {
		if got := Float32ToBF16(tc.f); got != tc.want {
			t.Errorf("Float32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(tc.f), got, tc.want)
		}
	}
	// A NaN whose payload is only in the low 16 bits must stay NaN.
	if got := Float32ToBF16(math.Float32frombits(0x7F800001)); !isNaN32(BF16ToFloat32(got)) {
		t.Errorf("Float32ToBF16(NaN 0x7f800001) = %#04x, not a NaN", got)
	}
	for i := range 1 << 16 {
		h := uint16(i)
		f := BF16ToFloat32(h)
		got := Float32ToBF16(f)
		if isNaN32(f) {
			if !isNaN32(BF16ToFloat32(got)) {
				t.Errorf("Float32ToBF16(NaN %#04x) = %#04x", h, got)
			}
			continue
		}
		if got != h {
			t.Errorf("Float32ToBF16(BF16ToFloat32(%#04x)) = %#04x", h, got)
		}
	}
}

func TestF16(t *testing.T) {
	for _, tc := range []struct {
		h uint16
		f float32
	}{
		{0x3C00, 1},
		{0xBC00, -1},
		{0x4000, 2},
		{0x3555, 0x1.554p-2},
		{0x7BFF, 65504},
		{0x0400, 0x1p-14},
		{0x0001, 0x1p-24},
		{0x03FF, 1023 * 0x1p-24},
		{0x8001, -0x1p-24},
		{0x0000, 0},
		{0x8000, negZero},
		{0x7C00, float32(math.Inf(1))},
		{0xFC00, float32(math.Inf(-1))},
	} {
		if got := F16ToFloat32(tc.h); !same(got, tc.f) {
			t.Errorf("F16ToFloat32(%#04x) = %v, want %v", tc.h, got, tc.f)
		}
		if got := Float32ToF16(tc.f); got != tc.h {
			t.Errorf("Float32ToF16(%v) = %#04x, want %#04x", tc.f, got, tc.h)
		}
	}
	for _, tc := range []struct {
		f    float32
		want uint16
	}{
		{65519, 0x7BFF},
		{65520, 0x7C00}, // the midpoint to 65536: to even, infinity
		{1e10, 0x7C00},
		{0x1p-25, 0x0000},       // half the smallest subnormal: to even 0
		{0x1.8p-25, 0x0001},     // above
		{0x1.8p-24, 0x0002},     // 1.5 steps: to even
		{1 + 0x1p-11, 0x3C00},   // tie: to even
		{1 + 0x1.8p-10, 0x3C02}, // 1.5 ulp: tie to even 2
	} {
		if got := Float32ToF16(tc.f); got != tc.want {
			t.Errorf("Float32ToF16(%v) = %#04x, want %#04x", tc.f, got, tc.want)
		}
	}
	for i := range 1 << 16 {
		h := uint16(i)
		f := F16ToFloat32(h)
		got := Float32ToF16(f)
		if isNaN32(f) {
			if got&0x7C00 != 0x7C00 || got&0x3FF == 0 {
				t.Errorf("Float32ToF16(F16ToFloat32(NaN %#04x)) = %#04x, not a NaN", h, got)
			}
			continue
		}
		if got != h {
			t.Errorf("Float32ToF16(F16ToFloat32(%#04x) = %v) = %#04x", h, f, got)
		}
	}
}
