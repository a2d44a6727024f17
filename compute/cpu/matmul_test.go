package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// testMatrix returns a random rows x cols matrix of dtype dt and its values,
// dequantized by the quant package. FP8 matrices have blockRows x blockCols
// scale blocks; their data covers every finite e4m3 code (subnormals
// included) and their scales a range of exponents.
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
				b ^= 1 // no NaN
			}
			// Every other block holds no subnormals, so that both the
			// fast and the slow paths of the kernels run.
			if r, c := i/cols, i%cols; (r/blockRows+c/blockCols)%2 == 0 && b&0x78 == 0 {
				b |= 0x08
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
		dense = quant.DequantizeFP4(m.Data, m.Scale, rows, cols)
	}
	return m, dense
}

func randVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// refMatMul returns W·x[t] in float64 and the L1 norms Σ|W[r][c]·x[t][c]|.
func refMatMul(dense, x []float32, T, rows, cols int) (y, l1 []float64) {
	y = make([]float64, T*rows)
	l1 = make([]float64, T*rows)
	for t := range T {
		xt := x[t*cols : (t+1)*cols]
		for r := range rows {
			var s, a float64
			for c, w := range dense[r*cols : (r+1)*cols] {
				p := float64(w) * float64(xt[c])
				s += p
				a += math.Abs(p)
			}
			y[t*rows+r], l1[t*rows+r] = s, a
		}
	}
	return y, l1
}

// checkClose reports entries of got farther from want than tol·l1 (plus a
// tiny absolute slack); non-finite references must be matched exactly.
func checkClose(t *testing.T, name string, got []float32, want, l1 []float64, tol float64) {
	t.Helper()
	bad := 0
	for i, w := range want {
		g := float64(got[i])
		ok := false
		switch {
		case math.IsNaN(w) || math.IsNaN(l1[i]):
			ok = math.IsNaN(g)
		case math.IsInf(w, 0):
			ok = g == w
		default:
			ok = math.Abs(g-w) <= tol*l1[i]+1e-30
		}
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("%s: y[%d] = %v, want %v (l1 %g, error %.3g of l1)", name, i, g, w, l1[i], math.Abs(g-w)/l1[i])
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d entries off", name, bad, len(want))
	}
}

const matmulTol = 1e-5

func TestMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type shape struct{ rows, cols int }
	shapes := []shape{{1, 32}, {3, 64}, {5, 7}, {1, 1}, {37, 130}, {130, 257}, {131, 96}, {200, 384}, {7, 1000}, {64, 2048}}
	var backends []*Backend
	for _, k := range families() {
		backends = append(backends, newWith(t, 1, k), newWith(t, 2, k), newWith(t, 3, k))
	}
	for _, dt := range []compute.DType{compute.F32, compute.BF16, compute.F16, compute.FP8, compute.FP4} {
		for _, sh := range shapes {
			if dt == compute.FP4 && sh.cols%32 != 0 {
				continue
			}
			m, dense := testMatrix(rng, dt, sh.rows, sh.cols, 128, 128)
			for _, T := range []int{1, 2, 3, 17, 130} {
				if sh.rows*sh.cols*T > 4<<20 {
					continue
				}
				x := randVec(rng, T*sh.cols)
				want, l1 := refMatMul(dense, x, T, sh.rows, sh.cols)
				for bi, b := range backends {
					if bi%3 > 0 && T > 17 {
						continue
					}
					y := make([]float32, T*sh.rows)
					b.MatMulF32(y, x, T, m)
					checkClose(t, fmt.Sprintf("%v %v %dx%d T=%d threads=%d", b.Kernels(), dt, sh.rows, sh.cols, T, b.Threads()), y, want, l1, matmulTol)
				}
			}
		}
	}
}

// TestMatMulFP8Blocks covers block shapes other than 128x128, partial edge
// blocks, block widths that are not a multiple of the vector width, and
// scales whose multiplier overflows float32 in the fast kernels.
func TestMatMulFP8Blocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, k := range families() {
		b := newWith(t, 2, k)
		for _, tc := range []struct{ rows, cols, br, bc int }{
			{130, 300, 128, 128},
			{129, 129, 128, 128},
			{70, 200, 64, 32},
			{50, 90, 7, 48},
			{33, 100, 16, 50}, // block width not a multiple of 16
			{20, 75, 3, 5},
			{9, 40, 1, 40},
		} {
			m, dense := testMatrix(rng, compute.FP8, tc.rows, tc.cols, tc.br, tc.bc)
			// Large scales take the slow path of the fast kernels.
			m.Scale[0] = 135
			m.Scale[len(m.Scale)-1] = 140
			sc := (tc.cols + tc.bc - 1) / tc.bc
			for r := range tc.rows {
				for c := range tc.cols {
					s := quant.UE8M0ToFloat32(m.Scale[(r/tc.br)*sc+c/tc.bc])
					dense[r*tc.cols+c] = quant.E4M3ToFloat32(m.Data[r*tc.cols+c]) * s
				}
			}
			for _, T := range []int{1, 3, 4} {
				x := randVec(rng, T*tc.cols)
				want, l1 := refMatMul(dense, x, T, tc.rows, tc.cols)
				y := make([]float32, T*tc.rows)
				b.MatMulF32(y, x, T, m)
				checkClose(t, fmt.Sprintf("fp8 %dx%d block %dx%d T=%d", tc.rows, tc.cols, tc.br, tc.bc, T), y, want, l1, matmulTol)
			}
		}
	}
}

// TestMatMulNonFinite checks that NaN weights, NaN scales and f16
// infinities propagate as in the dequantize-then-multiply reference.
func TestMatMulNonFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, k := range families() {
		b := newWith(t, 2, k)
		fp8, fp8Dense := testMatrix(rng, compute.FP8, 40, 256, 128, 128)
		fp8.Data[3*256+200] = 0x7F // row 3: NaN weight
		fp8Dense[3*256+200] = float32(math.NaN())
		fp8.Data[5*256+17] = 0xFF // row 5: NaN weight
		fp8Dense[5*256+17] = float32(math.NaN())
		fp4, fp4Dense := testMatrix(rng, compute.FP4, 8, 64, 0, 0)
		fp4.Scale[2*2+1] = 0xFF // row 2, columns 32-63: NaN scale
		for c := 32; c < 64; c++ {
			fp4Dense[2*64+c] = float32(math.NaN())
		}
		f16, f16Dense := testMatrix(rng, compute.F16, 6, 48, 0, 0)
		binary.LittleEndian.PutUint16(f16.Data[2*(1*48+20):], 0x7C00) // +Inf
		f16Dense[1*48+20] = float32(math.Inf(1))
		binary.LittleEndian.PutUint16(f16.Data[2*(4*48+33):], 0x7E00) // NaN
		f16Dense[4*48+33] = float32(math.NaN())
		for _, tc := range []struct {
			m     *compute.Matrix
			dense []float32
		}{{fp8, fp8Dense}, {fp4, fp4Dense}, {f16, f16Dense}} {
			for _, T := range []int{1, 3} {
				x := randVec(rng, T*tc.m.Cols)
				want, l1 := refMatMul(tc.dense, x, T, tc.m.Rows, tc.m.Cols)
				y := make([]float32, T*tc.m.Rows)
				b.MatMulF32(y, x, T, tc.m)
				checkClose(t, fmt.Sprintf("%v T=%d", tc.m.DType, T), y, want, l1, matmulTol)
			}
		}
	}
}

// TestMatMulQuantized multiplies matrices quantized by the quant package.
func TestMatMulQuantized(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, k := range families() {
		b := newWith(t, 0, k)
		rows, cols := 300, 512
		w := randVec(rng, rows*cols)
		fp8 := &compute.Matrix{DType: compute.FP8, Rows: rows, Cols: cols, BlockRows: 128, BlockCols: 128}
		fp8.Data, fp8.Scale = quant.QuantizeFP8Block(w, rows, cols)
		fp4 := &compute.Matrix{DType: compute.FP4, Rows: rows, Cols: cols}
		fp4.Data, fp4.Scale = quant.QuantizeFP4(w, rows, cols)
		for _, tc := range []struct {
			m     *compute.Matrix
			dense []float32
		}{
			{fp8, quant.DequantizeFP8Block(fp8.Data, fp8.Scale, rows, cols)},
			{fp4, quant.DequantizeFP4(fp4.Data, fp4.Scale, rows, cols)},
		} {
			for _, T := range []int{1, 5} {
				x := randVec(rng, T*cols)
				want, l1 := refMatMul(tc.dense, x, T, rows, cols)
				y := make([]float32, T*rows)
				b.MatMulF32(y, x, T, tc.m)
				checkClose(t, fmt.Sprintf("%v T=%d", tc.m.DType, T), y, want, l1, matmulTol)
			}
		}
	}
}

func TestMatMulPanics(t *testing.T) {
	b := New(1)
	m := &compute.Matrix{DType: compute.F32, Rows: 2, Cols: 3, Data: make([]byte, 24)}
	for name, f := range map[string]func(){
		"short x": func() { b.MatMulF32(make([]float32, 4), make([]float32, 5), 2, m) },
		"short y": func() { b.MatMulF32(make([]float32, 3), make([]float32, 6), 2, m) },
		"bad data": func() {
			b.MatMulF32(make([]float32, 2), make([]float32, 3), 1, &compute.Matrix{DType: compute.F32, Rows: 2, Cols: 3})
		},
		"fp4 shape": func() {
			b.MatMulF32(make([]float32, 1), make([]float32, 16), 1, &compute.Matrix{DType: compute.FP4, Rows: 1, Cols: 16, Data: make([]byte, 8)})
		},
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

func TestMatMulNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, k := range families() {
		b := newWith(t, 2, k)
		for _, dt := range []compute.DType{compute.F32, compute.FP8, compute.FP4} {
			m, _ := testMatrix(rng, dt, 512, 512, 128, 128)
			for _, T := range []int{1, 4} {
				x := randVec(rng, T*512)
				y := make([]float32, T*512)
				b.MatMulF32(y, x, T, m) // grows the scratch
				if n := testing.AllocsPerRun(20, func() { b.MatMulF32(y, x, T, m) }); n != 0 {
					t.Errorf("%v T=%d: %v allocations per MatMul", dt, T, n)
				}
			}
		}
	}
}

// TestMatMulTokenTiles multiplies activations too large for one tile of
// tokens (see xTileBytes), so that rows are multiplied tile by tile.
func TestMatMulTokenTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, k := range families() {
		b := newWith(t, 2, k)
		const rows, cols, T = 6, 16384 + 32, 131
		if 4*roundUp(cols, 16)*T <= xTileBytes {
			t.Fatal("activations fit one tile")
		}
		for _, dt := range []compute.DType{compute.F32, compute.FP4} {
			m, dense := testMatrix(rng, dt, rows, cols, 128, 128)
			x := randVec(rng, T*cols)
			want, l1 := refMatMul(dense, x, T, rows, cols)
			y := make([]float32, T*rows)
			b.MatMulF32(y, x, T, m)
			checkClose(t, fmt.Sprintf("%v %dx%d T=%d", dt, rows, cols, T), y, want, l1, matmulTol)
		}
	}
}

// TestMatMulUnaligned multiplies weights at odd addresses, as tensors in a
// memory-mapped checkpoint may be. Under -race, -d=checkptr checks that no
// kernel assumes alignment.
func TestMatMulUnaligned(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, k := range families() {
		b := newWith(t, 2, k)
		for _, dt := range []compute.DType{compute.F32, compute.BF16, compute.F16, compute.FP8, compute.FP4} {
			m, dense := testMatrix(rng, dt, 37, 160, 128, 128)
			for _, off := range []int{1, 2, 3} {
				u := *m
				u.Data = append(make([]byte, off), m.Data...)[off:]
				u.Scale = append(make([]byte, off), m.Scale...)[off:]
				for _, T := range []int{1, 3} {
					x := randVec(rng, T*m.Cols)
					want, l1 := refMatMul(dense, x, T, m.Rows, m.Cols)
					y := make([]float32, T*m.Rows)
					b.MatMulF32(y, x, T, &u)
					checkClose(t, fmt.Sprintf("%v offset %d T=%d", dt, off, T), y, want, l1, matmulTol)
				}
			}
		}
	}
}
