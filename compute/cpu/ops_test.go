package cpu

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, b := range []*Backend{New(1), New(2)} {
		for _, tc := range []struct{ T, n int }{{1, 1}, {1, 7}, {3, 64}, {5, 7168}, {40, 4096}} {
			x := randVec(rng, tc.T*tc.n)
			for i := range x {
				x[i] *= 3
			}
			w := randVec(rng, tc.n)
			const eps = 1e-6
			for _, weighted := range []bool{false, true} {
				var wt []float32
				if weighted {
					wt = w
				}
				y := make([]float32, len(x))
				b.RMSNormF32(y, x, wt, tc.T, tc.n, eps)
				for r := range tc.T {
					row := x[r*tc.n : (r+1)*tc.n]
					var ss float64
					for _, v := range row {
						ss += float64(v) * float64(v)
					}
					scale := 1 / math.Sqrt(ss/float64(tc.n)+eps)
					for i, v := range row {
						want := float64(v) * scale
						if weighted {
							want *= float64(w[i])
						}
						got := float64(y[r*tc.n+i])
						if math.Abs(got-want) > 1e-6*math.Abs(want)+1e-7*math.Abs(scale*float64(v)) {
							t.Fatalf("T=%d n=%d weighted=%v: y[%d][%d] = %v, want %v", tc.T, tc.n, weighted, r, i, got, want)
						}
					}
				}
				// In place gives the same result.
				z := slices.Clone(x)
				b.RMSNormF32(z, z, wt, tc.T, tc.n, eps)
				if !slices.Equal(z, y) {
					t.Errorf("T=%d n=%d weighted=%v: in-place result differs", tc.T, tc.n, weighted)
				}
			}
		}
	}
}

func TestRMSNormExact(t *testing.T) {
	// x = [3, 4]: mean of squares 12.5; 1/sqrt(12.5) = 0.28284271.
	b := New(1)
	y := make([]float32, 2)
	b.RMSNormF32(y, []float32{3, 4}, []float32{1, 2}, 1, 2, 0)
	r := float32(1 / math.Sqrt(12.5))
	if want := []float32{3 * r, 2 * (4 * r)}; !slices.Equal(y, want) {
		t.Errorf("RMSNorm([3 4], w=[1 2]) = %v, want %v", y, want)
	}
}

func TestRoPE(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, b := range []*Backend{New(1), New(3)} {
		for _, tc := range []struct{ T, n, nf int }{{1, 2, 1}, {3, 64, 32}, {4, 192, 32}, {17, 576, 32}, {300, 128, 16}, {2, 8, 0}} {
			invFreq := make([]float32, tc.nf)
			for i := range invFreq {
				invFreq[i] = float32(math.Pow(10000, -float64(2*i)/float64(2*tc.nf)))
			}
			pos := make([]int32, tc.T)
			for i := range pos {
				pos[i] = int32(rng.IntN(100000))
				if i%3 == 1 {
					pos[i] = pos[i-1] // rows sharing a position, as heads of one token do
				}
			}
			x := randVec(rng, tc.T*tc.n)
			y := slices.Clone(x)
			b.RoPEF32(y, tc.T, tc.n, pos, invFreq, false)
			off := tc.n - 2*tc.nf
			for r := range tc.T {
				xr, yr := x[r*tc.n:(r+1)*tc.n], y[r*tc.n:(r+1)*tc.n]
				if !slices.Equal(xr[:off], yr[:off]) {
					t.Fatalf("n=%d: row %d changed outside the rotated channels", tc.n, r)
				}
				for i, f := range invFreq {
					angle := float64(float32(pos[r]) * f)
					c, s := math.Cos(angle), math.Sin(angle)
					a, bb := float64(xr[off+2*i]), float64(xr[off+2*i+1])
					want0, want1 := a*c-bb*s, bb*c+a*s
					tol := 4e-7 * (math.Abs(a) + math.Abs(bb))
					if math.Abs(float64(yr[off+2*i])-want0) > tol || math.Abs(float64(yr[off+2*i+1])-want1) > tol {
						t.Fatalf("n=%d row %d pair %d (pos %d): got (%v, %v), want (%v, %v)", tc.n, r, i, pos[r], yr[off+2*i], yr[off+2*i+1], want0, want1)
					}
				}
			}
			b.RoPEF32(y, tc.T, tc.n, pos, invFreq, true)
			for i := range x {
				if math.Abs(float64(y[i]-x[i])) > 1e-6*(1+math.Abs(float64(x[i]))) {
					t.Fatalf("n=%d: inverse(RoPE(x))[%d] = %v, want %v", tc.n, i, y[i], x[i])
				}
			}
		}
	}
}

func TestRoPEExact(t *testing.T) {
	// Position 1, frequency 1: angle 1 radian; cos and sin rounded to float32.
	b := New(1)
	x := []float32{7, 1, 2}
	b.RoPEF32(x, 1, 3, []int32{1}, []float32{1}, false)
	c, s := float32(math.Cos(1)), float32(math.Sin(1))
	want := []float32{7, float32(1*c) - float32(2*s), float32(2*c) + float32(1*s)}
	if !slices.Equal(x, want) {
		t.Errorf("RoPE = %v, want %v", x, want)
	}
	// The angle is the float32 product: 3 * 0.1f is 0.3f rounded, not 0.3.
	x = []float32{1, 0}
	b.RoPEF32(x, 1, 2, []int32{3}, []float32{0.1}, false)
	angle := float64(float32(3) * float32(0.1))
	if want := []float32{float32(math.Cos(angle)), float32(math.Sin(angle))}; !slices.Equal(x, want) {
		t.Errorf("RoPE(pos 3, freq 0.1) = %v, want %v", x, want)
	}
}

func TestSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	b := New(2)
	for _, tc := range []struct{ T, n int }{{1, 1}, {1, 5}, {7, 129}, {64, 4096}, {2, 300000}} {
		x := randVec(rng, tc.T*tc.n)
		for i := range x {
			x[i] *= 20
			if i%11 == 3 {
				x[i] = float32(math.Inf(-1)) // masked
			}
		}
		if tc.n > 1 {
			x[1] = 1e30 // no overflow
		}
		y := slices.Clone(x)
		b.SoftmaxF32(y, tc.T, tc.n)
		for r := range tc.T {
			row := x[r*tc.n : (r+1)*tc.n]
			m := math.Inf(-1)
			for _, v := range row {
				m = math.Max(m, float64(v))
			}
			var sum, got float64
			for _, v := range row {
				sum += math.Exp(float64(v) - m)
			}
			for i, v := range row {
				want := math.Exp(float64(v)-m) / sum
				g := float64(y[r*tc.n+i])
				got += g
				if math.Abs(g-want) > 1e-6*want+1e-30 {
					t.Fatalf("T=%d n=%d: softmax[%d][%d] = %v, want %v", tc.T, tc.n, r, i, g, want)
				}
			}
			if math.Abs(got-1) > 1e-5 {
				t.Errorf("T=%d n=%d: row %d sums to %v", tc.T, tc.n, r, got)
			}
		}
	}
	x := []float32{float32(math.Inf(-1)), float32(math.Inf(-1))}
	b.SoftmaxF32(x, 1, 2)
	if x[0] == x[0] || x[1] == x[1] {
		t.Errorf("softmax of all -Inf = %v, want NaN", x)
	}
}

func TestTopK(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	b := New(1)
	for _, tc := range []struct {
		n, k, distinct int
	}{{1, 1, 0}, {10, 3, 0}, {10, 10, 3}, {1000, 1, 5}, {1000, 999, 0}, {5000, 100, 20}, {300000, 2048, 0}, {300000, 4000, 1000}, {257, 128, 2}} {
		x := make([]float32, tc.n)
		for i := range x {
			if tc.distinct > 0 {
				x[i] = float32(rng.IntN(tc.distinct)) // many ties
			} else {
				x[i] = float32(rng.NormFloat64())
			}
		}
		order := make([]int32, tc.n)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(i, j int32) int {
			if c := cmp.Compare(x[j], x[i]); c != 0 {
				return c
			}
			return cmp.Compare(i, j)
		})
		idx := make([]int32, tc.k)
		b.TopK(idx, x, tc.k)
		if !slices.Equal(idx, order[:tc.k]) {
			for i := range idx {
				if idx[i] != order[i] {
					t.Errorf("n=%d k=%d: idx[%d] = %d (%v), want %d (%v)", tc.n, tc.k, i, idx[i], x[idx[i]], order[i], x[order[i]])
					break
				}
			}
		}
	}
	// NaNs rank first, in index order; -Inf last.
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	x := []float32{1, nan, inf, float32(math.Inf(-1)), nan, 2, 2}
	idx := make([]int32, len(x))
	b.TopK(idx, x, len(x))
	if want := []int32{1, 4, 2, 5, 6, 0, 3}; !slices.Equal(idx, want) {
		t.Errorf("TopK(%v) = %v, want %v", x, idx, want)
	}
	b.TopK(idx[:2], x, 2)
	if want := []int32{1, 4}; !slices.Equal(idx[:2], want) {
		t.Errorf("TopK(%v, 2) = %v, want %v", x, idx[:2], want)
	}
}

func TestTopKNoAllocs(t *testing.T) {
	b := New(1)
	x := randVec(rand.New(rand.NewPCG(19, 20)), 100000)
	idx := make([]int32, 1000)
	if n := testing.AllocsPerRun(10, func() { b.TopK(idx, x, 1000) }); n != 0 {
		t.Errorf("%v allocations per TopK", n)
	}
}

func TestOpsNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	b := New(2)
	const T, n = 64, 4096
	x := randVec(rng, T*n)
	w := randVec(rng, n)
	pos := make([]int32, T)
	invFreq := []float32{1, 0.5, 0.25, 0.125}
	b.RoPEF32(x, T, n, pos, invFreq, false)
	for name, f := range map[string]func(){
		"RMSNorm": func() { b.RMSNormF32(x, x, w, T, n, 1e-6) },
		"RoPE":    func() { b.RoPEF32(x, T, n, pos, invFreq, false) },
		"Softmax": func() { b.SoftmaxF32(x, T, n) },
	} {
		if a := testing.AllocsPerRun(10, f); a != 0 {
			t.Errorf("%s: %v allocations per call", name, a)
		}
	}
}
