package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFP4NibbleOrder(t *testing.T) {
	// One row of 32 columns: byte 0x21 holds column 0 in its low nibble (code 1
	// = 0.5) and column 1 in its high nibble (code 2 = 1.0). Scale 127 is 1.
	data := make([]byte, 16)
	data[0] = 0x21
	data[1] = 0xF9       // column 2: code 9 = -0.5; column 3: code 15 = -6
	scale := []byte{128} // 2
	w := DequantizeFP4(data, scale, 1, 32)
	want := []float32{1.0, 2.0, -1.0, -12}
	for i, v := range want {
		if w[i] != v {
			t.Errorf("column %d = %v, want %v", i, w[i], v)
		}
	}
	for i := 4; i < 32; i++ {
		if w[i] != 0 {
			t.Errorf("column %d = %v, want 0", i, w[i])
		}
	}

	data, scale = QuantizeFP4(w, 1, 32)
	if data[0] != 0x21 || data[1] != 0xF9 || scale[0] != 128 {
		t.Errorf("QuantizeFP4: data[0:2] = %#02x %#02x, scale %d; want 0x21 0xf9, 128", data[0], data[1], scale[0])
	}
}

func TestQuantizeFP4Exact(t *testing.T) {
	// Two rows, 64 columns: four groups with amax 6, 3, 0.75 and 0; every
	// value is representable, so dequantization gives them back exactly.
	rows, cols := 2, 64
	w := make([]float32, rows*cols)
	vals := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	for i := range 32 {
		w[i] = vals[i%8] * float32(1-2*(i/8%2)) // amax 6: scale 1
		w[32+i] = vals[i%8] / 2                 // amax 3: scale 0.5
		w[64+i] = -vals[i%8] / 8                // amax 0.75: scale 0.125
	}
	data, scale := QuantizeFP4(w, rows, cols)
	wantScale := []byte{127, 126, 124, 25} // the all-zero group clamps amax to 1e-30: 1e-30/6 <= 2^-102
	for i, s := range wantScale {
		if scale[i] != s {
			t.Errorf("scale[%d] = %d, want %d", i, scale[i], s)
		}
	}
	got := DequantizeFP4(data, scale, rows, cols)
	for i := range w {
		if got[i] != w[i] {
			t.Errorf("w[%d]: dequantized %v, want %v", i, got[i], w[i])
		}
	}
}

func TestQuantizeFP8BlockExact(t *testing.T) {
	// A 130x130 matrix has four blocks, three of them partial.
	rows, cols := 130, 130
	w := make([]float32, rows*cols)
	w[0] = 448            // block (0,0): amax 448, scale 1
	w[1] = 1.125          // representable at scale 1
	w[129] = -3           // block (0,1): amax 3, scale 2^-7 (3/448 = 0.0067 <= 2^-7)
	w[128*cols] = 0.5     // block (1,0): amax 0.5, scale 2^-9 (0.5/448 = 0.00112 <= 2^-9)
	w[128*cols+129] = 1e6 // block (1,1): 1e6/448 = 2232 <= 2^12
	data, scale := QuantizeFP8Block(w, rows, cols)
	wantScale := []byte{127, 120, 118, 139}
	for i, s := range wantScale {
		if scale[i] != s {
			t.Errorf("scale[%d] = %d, want %d", i, scale[i], s)
		}
	}
	if data[0] != 0x7E || data[1] != 0x39 {
		t.Errorf("data[0:2] = %#02x %#02x, want 0x7e 0x39", data[0], data[1])
	}
	// -3 / 2^-7 = -384 = -1.5 * 2^8: e=15, m=4, sign.
	if data[129] != 0xFC {
		t.Errorf("data[129] = %#02x, want 0xfc", data[129])
	}
	got := DequantizeFP8Block(data, scale, rows, cols)
	for _, i := range []int{0, 1, 129, 128 * cols} {
		if got[i] != w[i] {
			t.Errorf("w[%d]: dequantized %v, want %v", i, got[i], w[i])
		}
	}
	// 1e6 / 4096 = 244.14 -> 240 (e=14, m=7); dequantized 240*4096 = 983040.
	if g := got[128*cols+129]; g != 983040 {
		t.Errorf("w[%d]: dequantized %v, want 983040", 128*cols+129, g)
	}
}

func TestQuantizeErrorBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, shape := range [][2]int{{1, 32}, {3, 96}, {130, 257}, {256, 128}, {17, 300}} {
		rows, cols := shape[0], shape[1]
		w := make([]float32, rows*cols)
		for i := range w {
			// Magnitudes over several orders, so blocks have different scales.
			w[i] = float32(rng.NormFloat64() * math.Pow(10, float64(i%7-3)))
		}
		// FP8: relative error <= 2^-4 for normal values (3 mantissa bits,
		// half an ulp), absolute error <= half the smallest subnormal step.
		data, scale := QuantizeFP8Block(w, rows, cols)
		got := DequantizeFP8Block(data, scale, rows, cols)
		sc := (cols + 127) / 128
		for r := range rows {
			for c := range cols {
				i := r*cols + c
				s := float64(UE8M0ToFloat32(scale[(r/128)*sc+c/128]))
				err := math.Abs(float64(got[i]) - float64(w[i]))
				bound := math.Max(math.Abs(float64(w[i]))/16, s*0x1p-10)
				if err > bound*(1+1e-6) {
					t.Fatalf("fp8 %dx%d: w[%d][%d] = %v dequantized to %v, error %g > %g", rows, cols, r, c, w[i], got[i], err, bound)
				}
			}
		}
		if cols%32 != 0 {
			continue
		}
		// FP4: the error is at most half the gap between neighboring e2m1
		// values around w/scale (1 at the top, between 4 and 6), times scale.
		data, scale = QuantizeFP4(w, rows, cols)
		got = DequantizeFP4(data, scale, rows, cols)
		for i := range w {
			s := float64(UE8M0ToFloat32(scale[i/32]))
			a := math.Abs(float64(w[i])) / s
			if a > 6 {
				t.Fatalf("fp4: |w/scale| = %v > 6", a)
			}
			gap := 0.5
			switch {
			case a > 4:
				gap = 2
			case a > 2:
				gap = 1
			}
			err := math.Abs(float64(got[i])-float64(w[i])) / s
			if err > gap/2*(1+1e-6) {
				t.Fatalf("fp4 %dx%d: w[%d] = %v dequantized to %v, error %g scale units > %g", rows, cols, i, w[i], got[i], err, gap/2)
			}
		}
	}
}

func TestQuantizeShapePanics(t *testing.T) {
	for name, f := range map[string]func(){
		"fp8 length": func() { QuantizeFP8Block(make([]float32, 5), 2, 3) },
		"fp4 cols":   func() { QuantizeFP4(make([]float32, 48), 1, 48) },
		"fp4 scale":  func() { DequantizeFP4(make([]byte, 16), make([]byte, 2), 1, 32) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
