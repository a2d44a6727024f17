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

func sameFloat(a, b float32) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

// families returns the kernel families this CPU runs, the portable one first.
func families() []Kernels {
	var ks []Kernels
	for _, k := range []Kernels{KernelsPortable, KernelsAVX2, KernelsAVX512} {
		if k.Available() {
			ks = append(ks, k)
		}
	}
	return ks
}

// newWith returns a backend of threads goroutines forced to the family k.
func newWith(t testing.TB, threads int, k Kernels) *Backend {
	t.Helper()
	b := New(threads)
	if err := b.SetKernels(k); err != nil {
		t.Fatal(err)
	}
	if b.Kernels() != k {
		t.Fatalf("SetKernels(%v): the backend runs %v", k, b.Kernels())
	}
	return b
}

func TestSetKernels(t *testing.T) {
	b := New(1)
	if b.Kernels() == KernelsAuto {
		t.Fatal("a new backend reports KernelsAuto")
	}
	if err := b.SetKernels(KernelsAuto); err != nil {
		t.Fatal(err)
	}
	auto := b.Kernels()
	if err := b.SetKernels(Kernels(99)); err == nil {
		t.Error("SetKernels(Kernels(99)) succeeded")
	}
	if b.Kernels() != auto {
		t.Errorf("a failed SetKernels changed the kernels from %v to %v", auto, b.Kernels())
	}
	if err := b.SetKernels(KernelsPortable); err != nil || b.Kernels() != KernelsPortable {
		t.Errorf("SetKernels(KernelsPortable) = %v, kernels %v", err, b.Kernels())
	}
	// The fastest available family is the default.
	ks := families()
	if want := ks[len(ks)-1]; auto != want {
		t.Errorf("auto picks %v, want %v", auto, want)
	}
	t.Logf("families on this CPU: %v", ks)
}

// decodeWith decodes row r of m with the family k's decoder.
func decodeWith(k Kernels, m *compute.Matrix, r int) []float32 {
	ks := kernelsFor(k)
	var sc []byte
	if m.DType == compute.FP8 {
		nc := (m.Cols + m.BlockCols - 1) / m.BlockCols
		br := r / m.BlockRows
		sc = m.Scale[br*nc : (br+1)*nc]
	}
	dst := make([]float32, m.Cols)
	ks.decode(&workspace{}, dst, m, r, sc)
	return dst
}

// TestDecodeAllCodes checks every family's decoders against the quant
// package on every code of every format.
func TestDecodeAllCodes(t *testing.T) {
	halves := make([]byte, 2<<16)
	for i := range 1 << 16 {
		binary.LittleEndian.PutUint16(halves[2*i:], uint16(i))
	}
	for i := range 1 << 16 {
		if g, w := f16(uint16(i)), quant.F16ToFloat32(uint16(i)); !sameFloat(g, w) {
			t.Errorf("f16(%#04x) = %v, want %v", i, g, w)
		}
	}

	// FP8: all 256 codes, in blocks of 128 and of 48, under scales that take
	// the fast path (0, 120, 127, 134, 246) and the slow one (247, 255 = NaN).
	codes := make([]byte, 256)
	for i := range codes {
		codes[i] = byte(i)
	}
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

	// FP4: all 256 bytes in 16 groups of 32 columns, with varied scales.
	fp4Scales := []byte{0, 1, 100, 126, 127, 128, 140, 254, 255, 127, 127, 127, 127, 127, 127, 127}
	fp4Want := quant.DequantizeFP4(codes, fp4Scales, 1, 512)

	for _, k := range families() {
		for _, tc := range []struct {
			dt   compute.DType
			want func(uint16) float32
		}{{compute.BF16, quant.BF16ToFloat32}, {compute.F16, quant.F16ToFloat32}} {
			m := &compute.Matrix{DType: tc.dt, Rows: 1, Cols: 1 << 16, Data: halves}
			for i, g := range decodeWith(k, m, 0) {
				if w := tc.want(uint16(i)); !sameFloat(g, w) {
					t.Errorf("%v %v: %#04x decodes to %v, want %v", k, tc.dt, i, g, w)
				}
			}
		}
		for qi, q := range [][]byte{codes, noNaN} {
			for _, bc := range []int{128, 48, 5} {
				for _, s := range []byte{0, 120, 127, 134, 246, 247, 255} {
					nb := (256 + bc - 1) / bc
					scales := make([]byte, nb)
					for i := range scales {
						scales[i] = s
					}
					m := &compute.Matrix{DType: compute.FP8, Rows: 1, Cols: 256, Data: q, Scale: scales, BlockRows: 1, BlockCols: bc, NaNFree: qi == 1}
					for i, g := range decodeWith(k, m, 0) {
						if w := quant.E4M3ToFloat32(q[i]) * quant.UE8M0ToFloat32(s); !sameFloat(g, w) {
							t.Errorf("%v fp8 block %d scale %d: %#02x decodes to %v, want %v", k, bc, s, q[i], g, w)
						}
					}
				}
			}
		}
		m := &compute.Matrix{DType: compute.FP4, Rows: 1, Cols: 512, Data: codes, Scale: fp4Scales}
		want := make([]float32, 512)
		packX(want, fp4Want, kernelsFor(k).fp4Perm)
		for i, g := range decodeWith(k, m, 0) {
			if !sameFloat(g, want[i]) {
				t.Errorf("%v fp4: value %d = %v, want %v", k, i, g, want[i])
			}
		}
	}
}

// TestDotKernels checks every family's one-token kernels on rows whose
// lengths are not multiples of the vector width, against float64 sums.
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
		for _, k := range families() {
			ks := kernelsFor(k)
			ws := &workspace{}
			for _, tc := range []struct {
				name string
				dt   compute.DType
				r    *row4
				i    int
				want float64
			}{
				{"f32", compute.F32, four(f32), 3, want},
				{"f32 unaligned", compute.F32, &row4{w: [4][]byte{un, f32, un, f32}}, 2, want},
				{"bf16", compute.BF16, four(bf), 3, wantBF},
				{"f16", compute.F16, four(f16b), 3, wantF16},
			} {
				m := &compute.Matrix{DType: tc.dt, Rows: 1, Cols: K}
				got := ks.dot4(ws, tc.r, m, x)[tc.i]
				if math.Abs(float64(got)-tc.want) > 1e-5*l1*1.01 {
					t.Errorf("%v K=%d %s: %v, want %v", k, K, tc.name, got, tc.want)
				}
			}
		}
	}
}

// TestFamiliesAgree multiplies every dtype and awkward shape with every
// family and checks the vector families against the portable reference
// (within the float32 rounding of the sums, as TestMatMul does against
// float64) and against one another: AVX2 and AVX-512 compute the same bits.
func TestFamiliesAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	ks := families()
	for _, dt := range []compute.DType{compute.F32, compute.BF16, compute.F16, compute.FP8, compute.FP4} {
		for _, sh := range []struct{ rows, cols int }{{5, 32}, {37, 160}, {9, 1000}, {130, 288}, {8, 2080}} {
			if dt == compute.FP4 && sh.cols%32 != 0 {
				continue
			}
			m, dense := testMatrix(rng, dt, sh.rows, sh.cols, 128, 128)
			for _, T := range []int{1, 2, 5, 9} {
				x := randVec(rng, T*sh.cols)
				want, l1 := refMatMul(dense, x, T, sh.rows, sh.cols)
				ys := make([][]float32, len(ks))
				for i, k := range ks {
					ys[i] = make([]float32, T*sh.rows)
					newWith(t, 2, k).MatMulF32(ys[i], x, T, m)
					name := fmt.Sprintf("%v %v %dx%d T=%d", k, dt, sh.rows, sh.cols, T)
					checkClose(t, name, ys[i], want, l1, matmulTol)
				}
				for i := 2; i < len(ks); i++ {
					for j := range ys[i] {
						if !sameFloat(ys[i][j], ys[1][j]) {
							t.Fatalf("%v %dx%d T=%d y[%d]: %v %v, %v %v", dt, sh.rows, sh.cols, T, j, ks[i], ys[i][j], ks[1], ys[1][j])
						}
					}
				}
			}
		}
	}
}
