package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
)

func amxBackend(t *testing.T, threads int) *Backend {
	t.Helper()
	if !KernelsAMX.Available() {
		t.Skipf("no AMX-BF16 on this CPU (%s)", cpuName())
	}
	return newWith(t, threads, KernelsAMX)
}

// TestAMXBatchInvariance: the AMX family, like every family, gives a token
// the same bits whatever T is (one or two groups of 16 tokens per tile
// call, partial groups, several tiles of tokens).
func TestAMXBatchInvariance(t *testing.T) {
	be := amxBackend(t, 2)
	rng := rand.New(rand.NewPCG(41, 42))
	for _, dt := range []compute.DType{compute.FP8, compute.FP4, compute.BF16, compute.F32} {
		for _, sh := range []struct{ rows, cols int }{{37, 160}, {130, 288}, {8, 2080}, {33, 64}} {
			m, _ := testMatrix(rng, dt, sh.rows, sh.cols, 128, 128)
			for _, T := range []int{2, 3, 16, 17, 33, 40, 300} {
				x := randVec(rng, T*sh.cols)
				yT := make([]float32, T*sh.rows)
				be.MatMulF32(yT, x, T, m)
				y1 := make([]float32, sh.rows)
				for tok := range T {
					be.MatMulF32(y1, x[tok*sh.cols:(tok+1)*sh.cols], 1, m)
					for i := range y1 {
						if math.Float32bits(y1[i]) != math.Float32bits(yT[tok*sh.rows+i]) {
							t.Fatalf("%v %dx%d T=%d token %d row %d: %g alone, %g in the batch", dt, sh.rows, sh.cols, T, tok, i, y1[i], yT[tok*sh.rows+i])
						}
					}
				}
			}
		}
	}
}

// TestAMXNumerics measures the AMX family's error against the float64
// product of the same (dequantized) weights and float32 activations, on
// Gaussian data: rounding the activations to bf16 bounds each product's
// relative error by 2^-9, so the error of a sum is at most about 2^-9 of
// Σ|w·x|; the float32 kernels' is about 1e-7 of it. It also checks F32
// matrices, which the family multiplies exactly (AVX-512).
func TestAMXNumerics(t *testing.T) {
	be := amxBackend(t, 2)
	rng := rand.New(rand.NewPCG(43, 44))
	for _, dt := range []compute.DType{compute.FP8, compute.FP4, compute.BF16, compute.F32} {
		const rows, cols, T = 96, 1024, 20
		m, dense := testMatrix(rng, dt, rows, cols, 128, 128)
		x := randVec(rng, T*cols)
		want, l1 := refMatMul(dense, x, T, rows, cols)
		y := make([]float32, T*rows)
		be.MatMulF32(y, x, T, m)
		if dt == compute.F32 {
			checkClose(t, "amx f32", y, want, l1, matmulTol)
			continue
		}
		var ofL1, rel []float64
		for i := range want {
			e := math.Abs(float64(y[i]) - want[i])
			ofL1 = append(ofL1, e/l1[i])
			rel = append(rel, e/math.Abs(want[i]))
		}
		slices.Sort(ofL1)
		slices.Sort(rel)
		worst := ofL1[len(ofL1)-1]
		t.Logf("%v: error / Σ|w·x|: median %.2e, max %.2e; relative error |Δy|/|y|: median %.2e, 99th percentile %.2e",
			dt, ofL1[len(ofL1)/2], worst, rel[len(rel)/2], rel[len(rel)*99/100])
		if worst > 1.0/256 {
			t.Errorf("%v: error %.3g of Σ|w·x|, want at most 2^-8", dt, worst)
		}
		if ofL1[len(ofL1)/2] < 1e-7 {
			t.Errorf("%v: median error %.3g of Σ|w·x|: the activations do not look rounded to bf16", dt, ofL1[len(ofL1)/2])
		}
	}
}

// TestAMXShapes multiplies awkward shapes (rows and columns not multiples
// of the tiles) within the bf16 bound.
func TestAMXShapes(t *testing.T) {
	be := amxBackend(t, 3)
	rng := rand.New(rand.NewPCG(45, 46))
	for _, dt := range []compute.DType{compute.FP8, compute.FP4, compute.BF16} {
		for _, sh := range []struct{ rows, cols int }{{1, 32}, {5, 64}, {31, 96}, {33, 160}, {65, 2080}} {
			m, dense := testMatrix(rng, dt, sh.rows, sh.cols, 128, 128)
			for _, T := range []int{1, 15, 16, 33} {
				x := randVec(rng, T*sh.cols)
				want, l1 := refMatMul(dense, x, T, sh.rows, sh.cols)
				y := make([]float32, T*sh.rows)
				be.MatMulF32(y, x, T, m)
				checkClose(t, fmt.Sprintf("amx %v %dx%d T=%d", dt, sh.rows, sh.cols, T), y, want, l1, 1.0/256)
			}
		}
	}
}
