package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute"
)

// dotRowsCase is one matrix of TestDotRows and whether the vector row loops
// must take its rows (some of them, at least, given four in one block row).
type dotRowsCase struct {
	name string
	m    *compute.Matrix
	take bool
}

func dotRowsCases(rng *rand.Rand) []dotRowsCase {
	var cs []dotRowsCase
	for _, rows := range []int{1, 3, 4, 5, 8, 37, 130} {
		for _, cols := range []int{32, 64, 160, 288, 2080} {
			m, _ := testMatrix(rng, compute.FP4, rows, cols, 0, 0)
			cs = append(cs, dotRowsCase{fmt.Sprintf("fp4 %dx%d", rows, cols), m, rows >= 4})
		}
	}
	for _, rows := range []int{3, 4, 5, 13, 37, 130} {
		for _, cols := range []int{32, 160, 1000, 2080} {
			for _, blk := range []struct{ br, bc int }{{128, 128}, {6, 48}, {1, 16}, {4, 40}, {5, 32}} {
				for _, nanFree := range []bool{true, false} {
					m, _ := testMatrix(rng, compute.FP8, rows, cols, blk.br, blk.bc)
					m.NaNFree = nanFree
					name := fmt.Sprintf("fp8 %dx%d blocks %dx%d nanfree=%v", rows, cols, blk.br, blk.bc, nanFree)
					take := nanFree && cols%16 == 0 && blk.bc%16 == 0 && min(rows, blk.br) >= 4
					cs = append(cs, dotRowsCase{name, m, take})
					if take && rows > blk.br {
						// A block row with a scale the routine leaves to the
						// portable decoder: the loop stops there.
						m2 := *m
						m2.Scale = append([]byte(nil), m.Scale...)
						sc := (cols + blk.bc - 1) / blk.bc
						m2.Scale[sc+sc/2] = 250
						cs = append(cs, dotRowsCase{name + " scale 250 in block row 1", &m2, true})
					}
				}
			}
		}
	}
	return cs
}

// TestDotRows checks the vector families' one-token row loops (vecAsm.dotRows,
// dotFP4Rows and dotFP8Rows in both instruction sets) against dot4 group by
// group: the same bits on every range of rows they are given, the rows they
// leave untouched, and AVX-512 = AVX2. MatMul at T = 1 on every family,
// portable included, against the float64 product is TestDotRowsMatMul.
func TestDotRows(t *testing.T) {
	var vec []Kernels
	for _, k := range families() {
		if kernelsFor(k).vector {
			vec = append(vec, k)
		}
	}
	if len(vec) == 0 {
		t.Skip("no vector kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	for _, c := range dotRowsCases(rng) {
		m := c.m
		K, R := m.Cols, m.Rows
		kp := roundUp(K, 16)
		x := randVec(rng, K)
		ranges := [][2]int{{0, R}, {0, min(R, 4)}, {1, R}, {min(3, R), R}, {R / 2, R}, {0, R / 2}}
		var prev []float32
		var prevK Kernels
		for _, k := range vec {
			ks := kernelsFor(k)
			xp := make([]float32, kp)
			packX(xp, x, m.DType == compute.FP4 && ks.fp4Perm)
			ref := make([]float32, R)
			j := &matmulJob{k: ks, w: m, x: xp, y: ref, T: 1, kp: kp}
			if m.DType == compute.FP8 {
				j.scaleCols = (K + m.BlockCols - 1) / m.BlockCols
			}
			ws := &workspace{}
			j.dotRows4(ws, 0, R)
			took := false
			for _, rg := range ranges {
				r0, r1 := rg[0], rg[1]
				if r0 >= r1 {
					continue
				}
				y := make([]float32, R)
				const sentinel = -12345
				for i := range y {
					y[i] = sentinel
				}
				e := ks.vec.dotRows(y, m, r0, r1, xp, fp8XRange(xp))
				if e < r0 || e > r1 || (e-r0)%4 != 0 {
					t.Fatalf("%v %s rows [%d, %d): dotRows stopped at %d", k, c.name, r0, r1, e)
				}
				took = took || e > r0
				for i := range y {
					if i >= r0 && i < e {
						if !sameFloat(y[i], ref[i]) {
							t.Fatalf("%v %s rows [%d, %d): y[%d] = %v, dot4 %v", k, c.name, r0, r1, i, y[i], ref[i])
						}
					} else if y[i] != sentinel {
						t.Fatalf("%v %s rows [%d, %d), taken up to %d: wrote y[%d]", k, c.name, r0, r1, e, i)
					}
				}
				// The whole of matmulJob.dotRows: the loops, then dot4.
				j.y = y
				j.dotRows(ws, r0, r1)
				for i := r0; i < r1; i++ {
					if !sameFloat(y[i], ref[i]) {
						t.Fatalf("%v %s rows [%d, %d) through matmulJob.dotRows: y[%d] = %v, dot4 %v", k, c.name, r0, r1, i, y[i], ref[i])
					}
				}
				j.y = ref
			}
			if took != c.take {
				t.Errorf("%v %s: the row loops took rows: %v, want %v", k, c.name, took, c.take)
			}
			if prev != nil {
				for i := range ref {
					if !sameFloat(ref[i], prev[i]) {
						t.Fatalf("%s y[%d]: %v %v, %v %v", c.name, i, k, ref[i], prevK, prev[i])
					}
				}
			}
			prev, prevK = ref, k
		}
	}
}

// TestDotRowsMatMul runs the matrices of TestDotRows through MatMul at T = 1
// on every family and several worker counts: each within the float32
// rounding of the float64 product, the vector families the same bits as
// each other whatever the workers.
func TestDotRowsMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	ks := families()
	for _, c := range dotRowsCases(rng) {
		m := c.m
		dense := make([]float32, m.Rows*m.Cols)
		for r := range m.Rows {
			copy(dense[r*m.Cols:], decodeWith(KernelsPortable, m, r))
		}
		x := randVec(rng, m.Cols)
		want, l1 := refMatMul(dense, x, 1, m.Rows, m.Cols)
		var first []float32
		for _, k := range ks {
			for _, threads := range []int{1, 2, 3} {
				y := make([]float32, m.Rows)
				newWith(t, threads, k).MatMulF32(y, x, 1, m)
				checkClose(t, fmt.Sprintf("%v %d workers %s", k, threads, c.name), y, want, l1, matmulTol)
				if k == KernelsPortable {
					continue
				}
				if first == nil {
					first = y
					continue
				}
				for i := range y {
					if !sameFloat(y[i], first[i]) {
						t.Fatalf("%v %d workers %s y[%d] = %v, the first vector family %v", k, threads, c.name, i, y[i], first[i])
					}
				}
			}
		}
	}
}

// TestFP8XRange checks fp8XRange against its definition: for every scale
// in the range every x·2^(s-119) is exact (zero or a normal float32), and
// just outside it one of them is not.
func TestFP8XRange(t *testing.T) {
	exact := func(x []float32, s int) bool {
		m := math.Ldexp(1, s-119)
		for _, v := range x {
			p := float64(v) * m
			f := float32(p)
			if float64(f) != p || math.IsInf(p, 0) || (p != 0 && math.Abs(p) < 0x1p-126) {
				return false
			}
		}
		return true
	}
	cases := []struct {
		name string
		x    []float32
	}{
		{"ordinary", []float32{0.5, -3, 1e-3, 0, 17}},
		{"zeros", []float32{0, float32(math.Copysign(0, -1))}},
		{"tiny", []float32{1, 0x1p-120}},
		{"subnormal", []float32{1, 1e-40}},
		{"huge", []float32{1, 3e38}},
		{"both", []float32{0x1p-100, 0x1p100}},
		{"inf", []float32{1, float32(math.Inf(1))}},
		{"nan", []float32{1, float32(math.NaN())}},
	}
	for _, c := range cases {
		r := fp8XRange(c.x)
		if r.hi > maxFastScale {
			t.Errorf("%s: hi %d above maxFastScale", c.name, r.hi)
		}
		for s := 0; s <= maxFastScale; s++ {
			in := s >= r.lo && s <= r.hi
			if in && !exact(c.x, s) {
				t.Errorf("%s: scale %d in [%d, %d] but some x·2^(s-119) is inexact", c.name, s, r.lo, r.hi)
			}
		}
		if r.lo > 0 && r.lo <= r.hi && exact(c.x, r.lo-1) {
			t.Errorf("%s: scale %d below the range [%d, %d] is exact too", c.name, r.lo-1, r.lo, r.hi)
		}
		if r.hi < maxFastScale && r.lo <= r.hi && exact(c.x, r.hi+1) {
			t.Errorf("%s: scale %d above the range [%d, %d] is exact too", c.name, r.hi+1, r.lo, r.hi)
		}
		if (c.name == "inf" || c.name == "nan") && r.lo <= r.hi {
			t.Errorf("%s: range [%d, %d], want empty", c.name, r.lo, r.hi)
		}
	}
}

// TestDotRowsFP8Extremes runs the FP8 row loops on activations whose
// range excludes the matrix's scales: a large value that x·2^(s-119)
// would overflow though every product is finite, activations so small
// that x·2^(s-119) would lose bits, infinities. matmulJob.dotRows must
// still give dot4's bits.
func TestDotRowsFP8Extremes(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	cases := []struct {
		name  string
		scale byte
		x     func([]float32)
	}{
		{"large", 130, func(x []float32) { x[37] = 2e35 }},
		{"small", 100, func(x []float32) {
			for i := range x {
				x[i] *= 1e-37
			}
		}},
		{"inf", 120, func(x []float32) { x[37] = float32(math.Inf(-1)) }},
		{"ordinary", 120, func([]float32) {}},
	}
	for _, c := range cases {
		m, _ := testMatrix(rng, compute.FP8, 16, 256, 128, 128)
		m.NaNFree = true
		for i := range m.Scale {
			m.Scale[i] = c.scale
		}
		x := randVec(rng, m.Cols)
		c.x(x)
		for _, k := range families() {
			ks := kernelsFor(k)
			if !ks.vector {
				continue
			}
			xp := make([]float32, m.Cols)
			packX(xp, x, false)
			ref := make([]float32, m.Rows)
			j := &matmulJob{k: ks, w: m, x: xp, y: ref, T: 1, kp: m.Cols, scaleCols: 2}
			j.dotRows4(&workspace{}, 0, m.Rows)
			y := make([]float32, m.Rows)
			j.y, j.fp8 = y, fp8XRange(xp)
			j.dotRows(&workspace{}, 0, m.Rows)
			for i := range y {
				if !sameFloat(y[i], ref[i]) {
					t.Fatalf("%v %s: y[%d] = %v, dot4 %v", k, c.name, i, y[i], ref[i])
				}
			}
		}
	}
}

// TestAbsRange checks the vector families' absRange against absRangeGo.
func TestAbsRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	for _, n := range []int{0, 1, 15, 16, 17, 64, 100, 4096} {
		for _, fill := range []string{"random", "zeros", "some zeros", "nan", "tiny"} {
			x := randVec(rng, n)
			for i := range x {
				switch {
				case fill == "zeros", fill == "some zeros" && i%3 == 0:
					x[i] = 0
				case fill == "nan" && i == n/2:
					x[i] = float32(math.NaN())
				case fill == "tiny" && i%5 == 1:
					x[i] = float32(i) * 1e-42
				}
			}
			wlo, whi := absRangeGo(x)
			for _, k := range families() {
				ks := kernelsFor(k)
				if !ks.vector {
					continue
				}
				if lo, hi := ks.vec.absRange(x); lo != wlo || hi != whi {
					t.Errorf("%v n=%d %s: absRange %#x %#x, want %#x %#x", k, n, fill, lo, hi, wlo, whi)
				}
			}
		}
	}
}

// TestAxpy checks axpy (the vector routine where there is one) against
// axpyGo bit for bit, at lengths
// around the routines' 8 and 16 values, with values whose product and sum
// round (and an infinity and a NaN). TestAxpyAVX2 forces the AVX2 routine.
func TestAxpy(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 1000} {
		for _, a := range []float32{1, -0.37, 3.1e-5, 1e30} {
			x, y0 := randVec(rng, n), randVec(rng, n)
			if n > 20 {
				x[3], x[19] = float32(math.Inf(1)), float32(math.NaN())
			}
			want := append([]float32(nil), y0...)
			axpyGo(want, a, x)
			got := append([]float32(nil), y0...)
			axpy(got, a, x)
			for i := range got {
				if !sameFloat(got[i], want[i]) {
					t.Fatalf("n=%d a=%g: y[%d] = %v, axpyGo %v", n, a, i, got[i], want[i])
				}
			}
		}
	}
}
