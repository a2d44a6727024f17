package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/quant"
)

func randFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func bitsOf(v []float32) []uint32 {
	b := make([]uint32, len(v))
	for i, f := range v {
		b[i] = math.Float32bits(f)
	}
	return b
}

// testMatrix returns a random rows x cols matrix of dtype dt (FP8 with
// blockRows x blockCols scale blocks) and its values, dequantized here with
// the quant package's decoders. FP8 data covers every finite code,
// subnormals included, and no NaN; scales span several exponents.
func testMatrix(rng *rand.Rand, dt compute.DType, rows, cols, blockRows, blockCols int) (*compute.Matrix, []float32) {
	m := &compute.Matrix{DType: dt, Rows: rows, Cols: cols}
	n := rows * cols
	dense := make([]float32, n)
	switch dt {
	case compute.F32:
		m.Data = make([]byte, 4*n)
		for i := range dense {
			dense[i] = float32(rng.NormFloat64())
			binary.LittleEndian.PutUint32(m.Data[4*i:], math.Float32bits(dense[i]))
		}
	case compute.BF16, compute.F16:
		m.Data = make([]byte, 2*n)
		for i := range dense {
			f := float32(rng.NormFloat64())
			var h uint16
			if dt == compute.BF16 {
				h = quant.Float32ToBF16(f)
				dense[i] = quant.BF16ToFloat32(h)
			} else {
				if i%97 == 5 {
					f *= 1e-5 // subnormal halves
				}
				h = quant.Float32ToF16(f)
				dense[i] = quant.F16ToFloat32(h)
			}
			binary.LittleEndian.PutUint16(m.Data[2*i:], h)
		}
	case compute.FP8:
		m.BlockRows, m.BlockCols = blockRows, blockCols
		m.Data = make([]byte, n)
		for i := range m.Data {
			b := byte(rng.IntN(256))
			if b&0x7F == 0x7F {
				b ^= 1
			}
			m.Data[i] = b
		}
		sr, sc := (rows+blockRows-1)/blockRows, (cols+blockCols-1)/blockCols
		m.Scale = make([]byte, sr*sc)
		for i := range m.Scale {
			m.Scale[i] = byte(112 + rng.IntN(16))
		}
		for r := range rows {
			for c := range cols {
				s := quant.UE8M0ToFloat32(m.Scale[(r/blockRows)*sc+c/blockCols])
				dense[r*cols+c] = quant.E4M3ToFloat32(m.Data[r*cols+c]) * s
			}
		}
	case compute.FP4:
		m.Data = make([]byte, n/2)
		for i := range m.Data {
			m.Data[i] = byte(rng.IntN(256))
		}
		m.Scale = make([]byte, n/32)
		for i := range m.Scale {
			m.Scale[i] = byte(118 + rng.IntN(12))
		}
		for i := range dense {
			code := m.Data[i/2]
			if i%2 == 1 {
				code >>= 4
			}
			dense[i] = quant.E2M1ToFloat32(code) * quant.UE8M0ToFloat32(m.Scale[i/32])
		}
	}
	if err := m.Validate(); err != nil {
		panic(err)
	}
	return m, dense
}

// gamma is the classic bound n·u/(1-n·u) on the relative error of a float32
// sum of n terms in any order (u = 2^-24, rounding to nearest).
func gamma(n int) float64 {
	nu := float64(n) * 0x1p-24
	return nu / (1 - nu)
}

// exactProducts returns, in float64, y[t][r] = Σ w[r][k]·xr[k] and the
// sums of magnitudes |w||x| the error bounds scale with; xr is x after
// round (nil: unrounded), w after wround.
func exactProducts(w []float32, x []float32, rows, K, T int, round func(float32) float32) (y, mag []float64) {
	y = make([]float64, T*rows)
	mag = make([]float64, T*rows)
	xr := make([]float64, K)
	wr := make([]float64, len(w))
	for i, v := range w {
		if round != nil {
			v = round(v)
		}
		wr[i] = float64(v)
	}
	for t := range T {
		for k := range K {
			v := x[t*K+k]
			if round != nil {
				v = round(v)
			}
			xr[k] = float64(v)
		}
		for r := range rows {
			var s, a float64
			for k, wv := range wr[r*K : (r+1)*K] {
				s += wv * xr[k]
				a += math.Abs(wv * xr[k])
			}
			y[t*rows+r], mag[t*rows+r] = s, a
		}
	}
	return y, mag
}

func bf16Round(f float32) float32 { return quant.BF16ToFloat32(quant.Float32ToBF16(f)) }

type mmCase struct {
	dt                 compute.DType
	rows, cols, br, bc int
}

func (c mmCase) String() string {
	s := fmt.Sprintf("%v-%dx%d", c.dt, c.rows, c.cols)
	if c.dt == compute.FP8 {
		s += fmt.Sprintf("-b%dx%d", c.br, c.bc)
	}
	return s
}

var mmCases = []mmCase{
	{compute.F32, 37, 100, 0, 0}, // vector loads
	{compute.F32, 33, 101, 0, 0}, // scalar: rows not 16-byte aligned
	{compute.BF16, 65, 264, 0, 0},
	{compute.BF16, 17, 77, 0, 0},
	{compute.F16, 19, 96, 0, 0},
	{compute.F16, 5, 45, 0, 0},
	{compute.FP8, 300, 520, 128, 128}, // K not a multiple of 128
	{compute.FP8, 129, 200, 128, 128}, // K not a multiple of 16: scalar
	{compute.FP8, 70, 96, 32, 48},
	{compute.FP8, 11, 64, 7, 24}, // blocks of 24 columns: scalar
	{compute.FP4, 3, 96, 0, 0},
	{compute.FP4, 131, 800, 0, 0},
	{compute.BF16, 40, 2048, 0, 0},     // gemv2 split 4
	{compute.F32, 10, 4096, 0, 0},      // gemv2 split 8
	{compute.FP8, 33, 2048, 128, 128},  // gemv2 split 2
	{compute.FP8, 512, 4096, 128, 128}, // Flash widths
	{compute.FP4, 256, 4096, 0, 0},
}

// runMatMul uploads w and x, runs fn (a product on the device) into a
// poisoned y and returns y.
func runMatMul(t *testing.T, m *compute.Matrix, x []float32, T int,
	fn func(th *Thread, y, x Ptr, w *Matrix) error) []float32 {
	t.Helper()
	y := make([]float32, T*m.Rows)
	do(t, func(th *Thread) error {
		w, err := th.UploadMatrix(m, th.Stream())
		if err != nil {
			return err
		}
		defer th.FreeMatrix(w)
		xs, err := upload(th, x[:T*m.Cols])
		if err != nil {
			return err
		}
		defer th.Free(xs)
		ys, err := allocPoisoned(th, len(y))
		if err != nil {
			return err
		}
		defer th.Free(ys)
		if err := fn(th, ys, xs, w); err != nil {
			return err
		}
		return download(th, y, ys)
	})
	return y
}

// checkProduct compares got with the CPU backend's want and the exact
// product ref: |got - ref| <= tight·mag and |got - want| <= loose·mag,
// every element written, NaN nowhere.
func checkProduct(t *testing.T, got, want []float32, ref, mag []float64, tight, loose float64) {
	t.Helper()
	bad := 0
	for i, g := range got {
		switch {
		case math.Float32bits(g) == poison:
			t.Errorf("y[%d] not written", i)
		case math.IsNaN(float64(g)) || math.Abs(float64(g)-ref[i]) > tight*mag[i]+1e-30:
			t.Errorf("y[%d] = %v, exact %v (error %.3g, bound %.3g)", i, g, ref[i], math.Abs(float64(g)-ref[i]), tight*mag[i])
		case math.Abs(float64(g)-float64(want[i])) > loose*mag[i]+1e-30:
			t.Errorf("y[%d] = %v, CPU %v (difference %.3g, bound %.3g)", i, g, want[i], math.Abs(float64(g-want[i])), loose*mag[i])
		default:
			continue
		}
		if bad++; bad == 5 {
			t.Fatal("too many errors")
		}
	}
}

// TestMatMulStrict checks the float32 product against the CPU backend and
// the exact product. Bounds: the kernel's sums have depth at most
// 32 (one chunk) + ceil(K/256) (the chunks of a thread) + 13 (the
// reductions), so |y - exact| <= gamma(that)·Σ|w·x|; the CPU differs by
// at most that plus gamma(K)·Σ|w·x|.
func TestMatMulStrict(t *testing.T) {
	device(t)
	be := cpu.New(2)
	for _, version := range []int{1, 2} {
		for ci, c := range mmCases {
			t.Run(fmt.Sprintf("v%d/%v", version, c), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(ci), 7))
				m, dense := testMatrix(rng, c.dt, c.rows, c.cols, c.br, c.bc)
				for _, T := range []int{1, 2, 3, 64, 300} {
					if c.cols >= 4096 && T > 64 {
						continue // the CPU reference would take long
					}
					x := randFloats(rng, T*c.cols)
					got := runMatMul(t, m, x, T, func(th *Thread, y, x Ptr, w *Matrix) error {
						return device(t).Kernels().matMulGEMVVersion(th, th.Stream(), y, x, T, w, version)
					})
					want := make([]float32, T*c.rows)
					be.MatMulF32(want, x, T, m)
					ref, mag := exactProducts(dense, x, c.rows, c.cols, T, nil)
					tight := gamma(32 + (c.cols+255)/256 + 13)
					checkProduct(t, got, want, ref, mag, tight, tight+gamma(c.cols))
				}
			})
		}
	}
}

// TestMatMulStrictBatchInvariant checks that each token's strict product
// is bit-identical whatever T and the other tokens are.
func TestMatMulStrictBatchInvariant(t *testing.T) {
	device(t)
	for _, version := range []int{1, 2} {
		for ci, c := range mmCases {
			testStrictInvariant(t, version, ci, c)
		}
	}
}

func testStrictInvariant(t *testing.T, version, ci int, c mmCase) {
	t.Run(fmt.Sprintf("v%d/%v", version, c), func(t *testing.T) {
		rng := rand.New(rand.NewPCG(uint64(ci), 8))
		m, _ := testMatrix(rng, c.dt, c.rows, c.cols, c.br, c.bc)
		const T = 300
		x := randFloats(rng, T*c.cols)
		k := device(t).Kernels()
		alone := make([]float32, T*c.rows)
		batches := map[int][]float32{}
		do(t, func(th *Thread) error {
			w, err := th.UploadMatrix(m, th.Stream())
			if err != nil {
				return err
			}
			defer th.FreeMatrix(w)
			xs, err := upload(th, x)
			if err != nil {
				return err
			}
			defer th.Free(xs)
			ys, err := allocPoisoned(th, T*c.rows)
			if err != nil {
				return err
			}
			defer th.Free(ys)
			row := int64(4 * c.cols)
			for tok := range T {
				if err := k.matMulGEMVVersion(th, th.Stream(), ys.Add(int64(4*tok*c.rows)), xs.Add(int64(tok)*row), 1, w, version); err != nil {
					return err
				}
			}
			if err := download(th, alone, ys); err != nil {
				return err
			}
			for _, n := range []int{2, 3, 64, 300} {
				// Tokens [off, off+n): each lands at another position.
				off := (T - n) / 2
				if err := k.matMulGEMVVersion(th, th.Stream(), ys, xs.Add(int64(off)*row), n, w, version); err != nil {
					return err
				}
				b := make([]float32, n*c.rows)
				if err := download(th, b, ys); err != nil {
					return err
				}
				batches[n] = b
			}
			return nil
		})
		for n, b := range batches {
			off := (T - n) / 2
			if !slices.Equal(bitsOf(b), bitsOf(alone[off*c.rows:(off+n)*c.rows])) {
				t.Errorf("T=%d: products differ from the same tokens alone", n)
			}
		}
	})
}

// TestMatMulTensorCores checks the bfloat16 tensor-core product: against
// the exact product of the bfloat16-rounded operands within the float32
// accumulation (one rounding per 16-column step, taken as truncation:
// (ceil(K/16)+16)·2^-22·Σ|w·x|), and against the CPU within the rounding
// of the activations (2^-8, and 2^-8 more for F32 and F16 weights).
func TestMatMulTensorCores(t *testing.T) {
	device(t)
	be := cpu.New(2)
	if !device(t).Kernels().tensorCores {
		t.Skip("cuda: no bfloat16 tensor cores on this device")
	}
	for ci, c := range mmCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 9))
			m, dense := testMatrix(rng, c.dt, c.rows, c.cols, c.br, c.bc)
			for _, T := range []int{3, 64, 300} {
				if c.cols >= 4096 && T > 64 {
					continue
				}
				x := randFloats(rng, T*c.cols)
				got := runMatMul(t, m, x, T, func(th *Thread, y, x Ptr, w *Matrix) error {
					return device(t).Kernels().matMulGEMM(th, th.Stream(), y, x, T, w)
				})
				want := make([]float32, T*c.rows)
				be.MatMulF32(want, x, T, m)
				ref, mag := exactProducts(dense, x, c.rows, c.cols, T, bf16Round)
				tight := float64((c.cols+15)/16+16) * 0x1p-22
				loose := 0x1p-8 + tight + gamma(c.cols)
				if c.dt == compute.F32 || c.dt == compute.F16 {
					loose += 0x1p-8
				}
				checkProduct(t, got, want, ref, mag, tight, loose)
			}
		})
	}
}

// TestMatMulTensorCoresBatchInvariant checks that a token's tensor-core
// product does not depend on its position in the batch or on the others.
func TestMatMulTensorCoresBatchInvariant(t *testing.T) {
	device(t)
	if !device(t).Kernels().tensorCores {
		t.Skip("cuda: no bfloat16 tensor cores on this device")
	}
	for ci, c := range mmCases[:15] {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 10))
			m, _ := testMatrix(rng, c.dt, c.rows, c.cols, c.br, c.bc)
			const T, small, at = 300, 9, 5
			x := randFloats(rng, T*c.cols)
			full := runMatMul(t, m, x, T, func(th *Thread, y, x Ptr, w *Matrix) error {
				return device(t).Kernels().matMulGEMM(th, th.Stream(), y, x, T, w)
			})
			for _, tok := range []int{0, 77, 130, 299} {
				xb := randFloats(rng, small*c.cols)
				copy(xb[at*c.cols:(at+1)*c.cols], x[tok*c.cols:(tok+1)*c.cols])
				b := runMatMul(t, m, xb, small, func(th *Thread, y, x Ptr, w *Matrix) error {
					return device(t).Kernels().matMulGEMM(th, th.Stream(), y, x, small, w)
				})
				if !slices.Equal(bitsOf(b[at*c.rows:(at+1)*c.rows]), bitsOf(full[tok*c.rows:(tok+1)*c.rows])) {
					t.Errorf("token %d: product at position %d of %d differs from position %d of %d", tok, at, small, tok, T)
				}
			}
		})
	}
}

// TestMatMulFP8NaN checks that a NaN code makes its row's outputs NaN, as
// on the CPU, in both products and both paths.
func TestMatMulFP8NaN(t *testing.T) {
	device(t)
	be := cpu.New(1)
	for _, cols := range []int{256, 200} {
		rng := rand.New(rand.NewPCG(11, uint64(cols)))
		m, _ := testMatrix(rng, compute.FP8, 9, cols, 128, 128)
		m.Data[3*cols+17] = 0x7F
		m.Data[7*cols+cols-1] = 0xFF
		const T = 20
		x := randFloats(rng, T*cols)
		want := make([]float32, T*9)
		be.MatMulF32(want, x, T, m)
		paths := map[string]func(th *Thread, y, x Ptr, w *Matrix) error{
			"gemv-v1": func(th *Thread, y, x Ptr, w *Matrix) error {
				return device(t).Kernels().matMulGEMVVersion(th, th.Stream(), y, x, T, w, 1)
			},
			"gemv-v2": func(th *Thread, y, x Ptr, w *Matrix) error {
				return device(t).Kernels().matMulGEMVVersion(th, th.Stream(), y, x, T, w, 2)
			},
			"gemm": func(th *Thread, y, x Ptr, w *Matrix) error {
				return device(t).Kernels().matMulGEMM(th, th.Stream(), y, x, T, w)
			},
		}
		for name, path := range paths {
			got := runMatMul(t, m, x, T, path)
			for i := range got {
				if math.IsNaN(float64(got[i])) != math.IsNaN(float64(want[i])) || math.Float32bits(got[i]) == poison {
					t.Errorf("cols %d %s: y[%d] = %v, CPU %v", cols, name, i, got[i], want[i])
				}
			}
		}
	}
}
