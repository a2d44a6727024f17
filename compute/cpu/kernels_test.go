package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/quant"
)

func sameFloat(a, b float32) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

// TestDecodeAllCodes checks the decode kernels, fast and portable, against
// the quant package on every code of every format.
func TestDecodeAllCodes(t *testing.T) {
	halves := make([]byte, 2<<16)
	for i := range 1 << 16 {
		binary.LittleEndian.PutUint16(halves[2*i:], uint16(i))
	}
	for _, tc := range []struct {
		name   string
		decode func([]float32, []byte)
		want   func(uint16) float32
	}{
		{"bf16", decodeBF16, quant.BF16ToFloat32},
		{"bf16 portable", decodeBF16Go, quant.BF16ToFloat32},
		{"f16", decodeF16, quant.F16ToFloat32},
		{"f16 portable", decodeF16Go, quant.F16ToFloat32},
	} {
		got := make([]float32, 1<<16)
		tc.decode(got, halves)
		for i, g := range got {
			if w := tc.want(uint16(i)); !sameFloat(g, w) {
				t.Errorf("%s: %#04x decodes to %v, want %v", tc.name, i, g, w)
			}
		}
	}
	for i := range 1 << 16 {
		if g, w := f16(uint16(i)), quant.F16ToFloat32(uint16(i)); !sameFloat(g, w) {
			t.Errorf("f16(%#04x) = %v, want %v", i, g, w)
		}
	}

	// FP8: all 256 codes, in blocks of 128 and of 48, under scales that take
	// the fast path (120, 127, 134) and the slow one (135, 200, 255 = NaN).
	codes := make([]byte, 256)
	for i := range codes {
		codes[i] = byte(i)
	}
	// plain has the zero and normal codes only.
	var plain []byte
	for len(plain) < 256 {
		for _, b := range codes {
			if t := b & 0x7F; t == 0 || t >= 8 && t != 0x7F {
				plain = append(plain, b)
			}
		}
	}
	plain = plain[:256]
	// noNaN has every code but the NaNs, subnormals included.
	var noNaN []byte
	for len(noNaN) < 256 {
		for _, b := range codes {
			if b&0x7F != 0x7F {
				noNaN = append(noNaN, b)
			}
		}
	}
	noNaN = noNaN[:256]
	for _, q := range [][]byte{codes, plain, noNaN} {
		for _, bc := range []int{128, 48, 5} {
			for _, s := range []byte{0, 120, 127, 134, 135, 200, 255} {
				nb := (256 + bc - 1) / bc
				scales := make([]byte, nb)
				for i := range scales {
					scales[i] = s
				}
				for _, decode := range []func([]float32, []byte, []byte, int){decodeFP8, decodeFP8Go} {
					got := make([]float32, 256)
					decode(got, q, scales, bc)
					for i, g := range got {
						if w := quant.E4M3ToFloat32(q[i]) * quant.UE8M0ToFloat32(s); !sameFloat(g, w) {
							t.Errorf("fp8 block %d scale %d: %#02x decodes to %v, want %v", bc, s, q[i], g, w)
						}
					}
				}
			}
		}
	}

	// FP4: all 256 bytes in 16 groups of 32 columns, with varied scales, in
	// the kernel layout (de-interleaved or not).
	scales := []byte{0, 1, 100, 126, 127, 128, 140, 254, 255, 127, 127, 127, 127, 127, 127, 127}
	want := quant.DequantizeFP4(codes, scales, 1, 512)
	for _, tc := range []struct {
		name   string
		decode func([]float32, []byte, []byte)
		perm   bool
	}{{"fp4", decodeFP4, fp4Deinterleaved()}, {"fp4 portable", decodeFP4Go, false}} {
		got := make([]float32, 512)
		tc.decode(got, codes, scales)
		wantL := make([]float32, 512)
		packX(wantL, want, tc.perm)
		for i := range got {
			if !sameFloat(got[i], wantL[i]) {
				t.Errorf("%s: value %d = %v, want %v", tc.name, i, got[i], wantL[i])
			}
		}
	}
}

// TestDotKernels checks the one-token kernels on rows whose lengths are not
// multiples of the vector width, against float64 sums.
func TestDotKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, K := range []int{1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000} {
		x := randVec(rng, roundUp(K, 32)+32)
		w := randVec(rng, K)
		f32 := make([]byte, 4*K)
		bf := make([]byte, 2*K)
		f16b := make([]byte, 2*K)
		var want, wantBF, wantF16, l1 float64
		for i, v := range w {
			binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(v))
			h := quant.Float32ToBF16(v)
			binary.LittleEndian.PutUint16(bf[2*i:], h)
			g := quant.Float32ToF16(v)
			binary.LittleEndian.PutUint16(f16b[2*i:], g)
			want += float64(v) * float64(x[i])
			wantBF += float64(quant.BF16ToFloat32(h)) * float64(x[i])
			wantF16 += float64(quant.F16ToFloat32(g)) * float64(x[i])
			l1 += math.Abs(float64(v) * float64(x[i]))
		}
		four := func(b []byte) *row4 { return &row4{w: [4][]byte{b, b, b, b}} }
		un := append([]byte{0}, f32...)[1:]
		for _, tc := range []struct {
			name string
			got  float32
			want float64
		}{
			{"f32", dot4F32(four(f32), K, x)[3], want},
			{"f32 portable", dot4F32Go(four(f32), K, x)[3], want},
			{"f32 unaligned", dot4F32Go(&row4{w: [4][]byte{un, f32, un, f32}}, K, x)[2], want},
			{"bf16", dot4BF16(four(bf), K, x)[3], wantBF},
			{"bf16 portable", dot4BF16Go(four(bf), K, x)[3], wantBF},
			{"f16", dot4F16(four(f16b), K, x)[3], wantF16},
			{"f16 portable", dot4F16Go(four(f16b), K, x)[3], wantF16},
		} {
			if math.Abs(float64(tc.got)-tc.want) > 1e-5*l1*1.01 {
				t.Errorf("K=%d %s: %v, want %v", K, tc.name, tc.got, tc.want)
			}
		}
	}
}
