package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
)

// rowsOnDevice uploads x (and the extra inputs), runs fn on the device and
// returns the T·n outputs written to out (x itself when inPlace).
func rowsOnDevice(t *testing.T, x []float32, inPlace bool, fn func(th *Thread, y, x Ptr) error) []float32 {
	t.Helper()
	got := make([]float32, len(x))
	do(t, func(th *Thread) error {
		xs, err := upload(th, x)
		if err != nil {
			return err
		}
		defer th.Free(xs)
		ys := xs
		if !inPlace {
			if ys, err = allocPoisoned(th, len(x)); err != nil {
				return err
			}
			defer th.Free(ys)
		}
		if err := fn(th, ys, xs); err != nil {
			return err
		}
		return download(th, got, ys)
	})
	return got
}

func TestRMSNorm(t *testing.T) {
	be := cpu.New(2)
	k := device(t).Kernels()
	for _, n := range []int{1, 7, 300, 4096, 7168} {
		for _, weighted := range []bool{false, true} {
			for _, inPlace := range []bool{false, true} {
				rng := rand.New(rand.NewPCG(uint64(n), 1))
				const T = 5
				x := randFloats(rng, T*n)
				x[0] *= 1e3 // one large value
				var w []float32
				if weighted {
					w = randFloats(rng, n)
				}
				got := rowsOnDevice(t, x, inPlace, func(th *Thread, y, xs Ptr) error {
					var ws Ptr
					if w != nil {
						var err error
						if ws, err = upload(th, w); err != nil {
							return err
						}
						defer th.Free(ws)
					}
					if err := k.RMSNorm(th, th.Stream(), y, xs, ws, T, n, 1e-6); err != nil {
						return err
					}
					return th.Sync(th.Stream())
				})
				want := make([]float32, T*n)
				be.RMSNormF32(want, x, w, T, n, 1e-6)
				// Both sums of squares are within gamma(n) of the exact one;
				// the rest is a few roundings: a relative bound per element.
				bound := gamma(n) + 0x1p-20
				for i := range got {
					if d := math.Abs(float64(got[i] - want[i])); !(d <= bound*math.Abs(float64(want[i]))) {
						t.Fatalf("n=%d weighted=%v inPlace=%v: y[%d] = %v, CPU %v", n, weighted, inPlace, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func TestRoPE(t *testing.T) {
	be := cpu.New(2)
	k := device(t).Kernels()
	for _, c := range []struct{ T, n, nf int }{{1, 64, 32}, {7, 72, 16}, {300, 512, 32}, {3, 10, 0}} {
		for _, inverse := range []bool{false, true} {
			rng := rand.New(rand.NewPCG(uint64(c.n), uint64(c.T)))
			x := randFloats(rng, c.T*c.n)
			pos := make([]int32, c.T)
			for i := range pos {
				pos[i] = int32(rng.IntN(1 << 20))
			}
			inv := make([]float32, c.nf)
			for i := range inv {
				inv[i] = float32(math.Pow(10000, -2*float64(i)/float64(2*c.nf)))
			}
			got := rowsOnDevice(t, x, true, func(th *Thread, _, xs Ptr) error {
				ps, err := upload(th, pos)
				if err != nil {
					return err
				}
				defer th.Free(ps)
				fs, err := upload(th, inv)
				if err != nil {
					return err
				}
				defer th.Free(fs)
				if err := k.RoPE(th, th.Stream(), xs, c.T, c.n, ps, fs, c.nf, inverse); err != nil {
					return err
				}
				return th.Sync(th.Stream())
			})
			want := slices.Clone(x)
			be.RoPEF32(want, c.T, c.n, pos, inv, inverse)
			// The same float32 operations; the float64 sine and cosine may
			// round differently once in a while: 8 ulps of |a|+|b|.
			for r := range c.T {
				for j := 0; j < c.n; j += 2 {
					i := r*c.n + j
					scale := math.Abs(float64(x[i])) + math.Abs(float64(x[i+1]))
					for e := range 2 {
						if d := math.Abs(float64(got[i+e] - want[i+e])); !(d <= 0x1p-21*scale) {
							t.Fatalf("T=%d n=%d nf=%d inverse=%v: x[%d] = %v, CPU %v", c.T, c.n, c.nf, inverse, i+e, got[i+e], want[i+e])
						}
					}
				}
			}
		}
	}
}

func TestSoftmax(t *testing.T) {
	be := cpu.New(2)
	k := device(t).Kernels()
	inf := float32(math.Inf(1))
	for _, n := range []int{1, 7, 1000, 129280} {
		rng := rand.New(rand.NewPCG(uint64(n), 3))
		const T = 6
		x := randFloats(rng, T*n)
		for i := range x {
			x[i] *= 8
		}
		x[1*n] = -inf // some -Inf entries
		if n > 1 {
			x[1*n+n-1] = -inf
		}
		x[2*n+n/2] = float32(math.NaN()) // NaN row
		x[3*n] = inf                     // +Inf row
		for i := range n {
			x[4*n+i] = -inf // all -Inf
		}
		got := rowsOnDevice(t, x, true, func(th *Thread, _, xs Ptr) error {
			if err := k.Softmax(th, th.Stream(), xs, T, n); err != nil {
				return err
			}
			return th.Sync(th.Stream())
		})
		want := slices.Clone(x)
		be.SoftmaxF32(want, T, n)
		for i := range got {
			g, w := float64(got[i]), float64(want[i])
			if math.IsNaN(g) != math.IsNaN(w) || !math.IsNaN(w) && math.Abs(g-w) > 0x1p-22*w+1e-44 {
				t.Fatalf("n=%d: row %d, p[%d] = %v, CPU %v", n, i/n, i%n, got[i], want[i])
			}
		}
	}
}

// TestTopK checks topk against the CPU's TopK:
// ties, -0, infinities and NaN among normal values, and the indexer's
// worst cases: every score equal (BenchmarkFlash's cache of zeros) with a
// tail of -Inf (the entries past a token's closed ones).
func TestTopK(t *testing.T) {
	be := cpu.New(1)
	kern := device(t).Kernels()
	if kern.topkReg == 0 || kern.topkReg4 == 0 {
		t.Fatal("topk_reg or topk_reg4 did not load")
	}
	for _, c := range []struct {
		rows, n, k int
		equal      int // > 0: each row's first equal values are 0, the rest -Inf
	}{
		{1, 1, 1, 0}, {3, 100, 7, 0}, {4, 5000, 512, 0}, {2, 16384, 1024, 0}, {5, 1024, 1024, 0}, {2, 700, 600, 0},
		{1, 1500, 512, 1100}, {2, 16640, 512, 16385}, {1, 4096, 512, 4096},
		{3, 18432, 512, 0}, {2, 18433, 1000, 0}, {1, 18432, 512, 9000}, {2, 200, 37, 150}, {1, 300, 280, 290},
	} {
		rng := rand.New(rand.NewPCG(uint64(c.n), uint64(c.k)))
		x := make([]float32, c.rows*c.n)
		for i := range x {
			if c.equal > 0 {
				if i%c.n >= c.equal {
					x[i] = float32(math.Inf(-1))
				}
				continue
			}
			switch rng.IntN(10) {
			case 0:
				x[i] = float32(rng.IntN(5)) // ties, many
			case 1:
				x[i] = float32(math.Copysign(0, -1))
			case 2:
				x[i] = float32(math.Inf(-1))
			default:
				x[i] = float32(rng.NormFloat64())
			}
		}
		if c.n > 10 && c.equal == 0 {
			x[3] = float32(math.NaN())
			x[c.n-2] = float32(math.NaN())
			x[5] = float32(math.Inf(1))
		}
		want := make([]int32, c.rows*c.k)
		for r := range c.rows {
			be.TopK(want[r*c.k:(r+1)*c.k], x[r*c.n:(r+1)*c.n], c.k)
		}
		// Both ways: topk_reg4 (rows up to 2048) or topk_reg (up to
		// topkRegs·topkThreads), and topk.
		for _, reg := range []bool{true, false} {
			got := make([]int32, c.rows*c.k)
			do(t, func(th *Thread) error {
				xs, err := upload(th, x)
				if err != nil {
					return err
				}
				defer th.Free(xs)
				is, err := allocPoisoned(th, len(got))
				if err != nil {
					return err
				}
				defer th.Free(is)
				if err := kern.topK(th, th.Stream(), is, xs, c.rows, c.n, c.k, reg); err != nil {
					return err
				}
				return download(th, got, is)
			})
			if !slices.Equal(got, want) {
				i := 0
				for got[i] == want[i] {
					i++
				}
				t.Fatalf("reg %v rows %d n %d k %d equal %d: row %d differs first at %d: index %d, CPU %d",
					reg, c.rows, c.n, c.k, c.equal, i/c.k, i%c.k, got[i], want[i])
			}
		}
	}
}

func TestGather(t *testing.T) {
	k := device(t).Kernels()
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, n, m = 50, 300, 70
	x := randFloats(rng, rows*n)
	idx := make([]int32, m)
	for i := range idx {
		idx[i] = int32(rng.IntN(rows))
	}
	idx[3], idx[9] = -1, rows
	got := make([]float32, m*n)
	do(t, func(th *Thread) error {
		xs, err := upload(th, x)
		if err != nil {
			return err
		}
		defer th.Free(xs)
		is, err := upload(th, idx)
		if err != nil {
			return err
		}
		defer th.Free(is)
		ys, err := allocPoisoned(th, m*n)
		if err != nil {
			return err
		}
		defer th.Free(ys)
		if err := k.Gather(th, th.Stream(), ys, xs, rows, n, is, m); err != nil {
			return err
		}
		return download(th, got, ys)
	})
	for i, r := range idx {
		g := got[i*n : (i+1)*n]
		switch {
		case r < 0:
			for _, v := range g {
				if v != 0 || math.Signbit(float64(v)) {
					t.Fatalf("row %d (index %d) = %v..., want zeros", i, r, g[:3])
				}
			}
		case r >= rows:
			for _, v := range g {
				if !math.IsNaN(float64(v)) || math.Float32bits(v) == poison {
					t.Fatalf("row %d (index %d) = %v..., want NaN", i, r, g[:3])
				}
			}
		default:
			if !slices.Equal(bitsOf(g), bitsOf(x[int(r)*n:(int(r)+1)*n])) {
				t.Fatalf("row %d differs from x[%d]", i, r)
			}
		}
	}
}
