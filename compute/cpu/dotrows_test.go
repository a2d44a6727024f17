package cpu

import (
	"fmt"
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
				e := ks.vec.dotRows(y, m, r0, r1, xp)
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
