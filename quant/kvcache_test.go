package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFP8KVLayout checks the byte layout by hand: 64 non-RoPE channels
// whose largest magnitude is 448 get scale 2^0 (byte 127); 1.0 is e4m3
// 0x38, -2.0 is 0xC0; the two RoPE channels 1.0 and -0.5 are bf16 0x3F80
// and 0xBF00; one scale byte padded to 8. 64 + 4 + 8 = 76 bytes.
func TestFP8KVLayout(t *testing.T) {
	x := make([]float32, 66)
	x[0], x[1], x[2] = 1, -2, 448
	x[64], x[65] = 1, -0.5
	if n := FP8KVBytes(66, 2); n != 76 {
		t.Fatalf("FP8KVBytes(66, 2) = %d, want 76", n)
	}
	if n := FP8KVBytes(512, 64); n != 584 {
		t.Fatalf("FP8KVBytes(512, 64) = %d, want the handbook's 584", n)
	}
	if n := FP8KeyBytes(128); n != 132 {
		t.Fatalf("FP8KeyBytes(128) = %d, want the handbook's 132", n)
	}
	b := make([]byte, 76)
	for i := range b {
		b[i] = 0xAA // poison: every byte must be written
	}
	EncodeFP8KV(b, x, 2)
	if b[0] != 0x38 || b[1] != 0xC0 || b[2] != 0x7E || b[3] != 0 {
		t.Errorf("e4m3 bytes % x", b[:4])
	}
	if h := binary.LittleEndian.Uint16(b[64:]); h != 0x3F80 {
		t.Errorf("rope channel 0: bf16 %#x", h)
	}
	if h := binary.LittleEndian.Uint16(b[66:]); h != 0xBF00 {
		t.Errorf("rope channel 1: bf16 %#x", h)
	}
	if b[68] != 127 {
		t.Errorf("scale byte %d, want 127", b[68])
	}
	for i := 69; i < 76; i++ {
		if b[i] != 0 {
			t.Errorf("padding byte %d = %#x", i, b[i])
		}
	}
}

// TestCacheCodecsRoundTrip: decoding what was encoded stays within the
// format's rounding (e4m3: 3 mantissa bits, so half an ulp is 1/16 of the
// value, plus the subnormal step 2^-9 of the scale; bf16: 2^-9 relative).
func TestCacheCodecsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{64, 130, 512} {
		x := make([]float32, d)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Pow(10, r.Float64()*4-2))
		}
		rope := min(64, d/4)
		buf := make([]byte, FP8KVBytes(d, rope))
		EncodeFP8KV(buf, x, rope)
		y := make([]float32, d)
		DecodeFP8KV(y, buf, rope)
		nope := d - rope
		for c0 := 0; c0 < nope; c0 += KVBlock {
			c1 := min(c0+KVBlock, nope)
			var amax float32
			for _, v := range x[c0:c1] {
				amax = max(amax, abs32(v))
			}
			s := UE8M0ToFloat32(Float32ToUE8M0(amax / E4M3MaxFinite))
			for c := c0; c < c1; c++ {
				if e := abs32(x[c] - y[c]); e > abs32(x[c])/16+s/512 {
					t.Fatalf("d=%d channel %d: %g became %g", d, c, x[c], y[c])
				}
			}
		}
		for c := nope; c < d; c++ {
			if e := abs32(x[c] - y[c]); e > abs32(x[c])/256 {
				t.Fatalf("d=%d rope channel %d: %g became %g", d, c, x[c], y[c])
			}
		}
		kb := make([]byte, FP8KeyBytes(d))
		EncodeFP8Key(kb, x)
		DecodeFP8Key(y, kb)
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		for i := range x {
			if e := abs32(x[i] - y[i]); e > abs32(x[i])/16+amax/448/512*1.01 {
				t.Fatalf("key d=%d %d: %g became %g", d, i, x[i], y[i])
			}
		}
		bb := make([]byte, 2*d)
		EncodeBF16(bb, x)
		DecodeBF16(y, bb)
		for i := range x {
			if e := abs32(x[i] - y[i]); e > abs32(x[i])/256 {
				t.Fatalf("bf16 %d: %g became %g", i, x[i], y[i])
			}
		}
	}
}
