package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFP8MLALayout checks the byte layout by hand: 130 latent channels in
// two blocks (128 and 2) and 2 RoPE channels. Block 0's largest magnitude
// 448 gives scale 2^0; block 1's 3.0 gives the power of two above 3/448,
// 2^-7. 1.0 is e4m3 0x38, -2.0 is 0xC0, 448 is 0x7E; block 1's 3.0/2^-7 =
// 384 is 0x7C. The scales follow the latent as float32s (1.0 =
// 0x3F800000, 2^-7 = 0x3C000000), then the RoPE channels 1.0 and -0.5 as
// bf16 0x3F80 and 0xBF00: 130 + 8 + 4 = 142 bytes. The released shapes
// give the handbook's 656 bytes.
func TestFP8MLALayout(t *testing.T) {
	if n := FP8MLABytes(576, 64); n != 656 {
		t.Fatalf("FP8MLABytes(576, 64) = %d, want the handbook's 656", n)
	}
	x := make([]float32, 132)
	x[0], x[1], x[2] = 1, -2, 448
	x[129] = 3
	x[130], x[131] = 1, -0.5
	if n := FP8MLABytes(132, 2); n != 142 {
		t.Fatalf("FP8MLABytes(132, 2) = %d, want 142", n)
	}
	b := make([]byte, 142)
	for i := range b {
		b[i] = 0xAA // poison: every byte must be written
	}
	EncodeFP8MLA(b, x, 2)
	if b[0] != 0x38 || b[1] != 0xC0 || b[2] != 0x7E || b[3] != 0 || b[128] != 0 || b[129] != 0x7C {
		t.Errorf("e4m3 bytes % x ... % x", b[:4], b[128:130])
	}
	if s := binary.LittleEndian.Uint32(b[130:]); s != 0x3F800000 {
		t.Errorf("scale 0: %#x", s)
	}
	if s := binary.LittleEndian.Uint32(b[134:]); s != 0x3C000000 {
		t.Errorf("scale 1: %#x", s)
	}
	if h := binary.LittleEndian.Uint16(b[138:]); h != 0x3F80 {
		t.Errorf("rope channel 0: bf16 %#x", h)
	}
	if h := binary.LittleEndian.Uint16(b[140:]); h != 0xBF00 {
		t.Errorf("rope channel 1: bf16 %#x", h)
	}
	y := make([]float32, 132)
	DecodeFP8MLA(y, b, 2)
	for i, v := range x {
		if y[i] != v {
			t.Errorf("channel %d: %g decoded as %g", i, v, y[i])
		}
	}
}

// TestFP8MLARoundTrip: decoding what was encoded stays within e4m3's
// rounding (half an ulp, 1/16 of the value, plus the subnormal step 2^-9
// of the block's scale) and bf16's for the RoPE channels.
func TestFP8MLARoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{24, 200, 576} {
		x := make([]float32, d)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Pow(10, r.Float64()*4-2))
		}
		rope := min(64, d/4)
		buf := make([]byte, FP8MLABytes(d, rope))
		EncodeFP8MLA(buf, x, rope)
		y := make([]float32, d)
		DecodeFP8MLA(y, buf, rope)
		nope := d - rope
		for c0 := 0; c0 < nope; c0 += MLABlock {
			c1 := min(c0+MLABlock, nope)
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
	}
}
