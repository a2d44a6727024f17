//go:build !amd64

package cpu

import (
	"runtime"
	"unsafe"

	"github.com/strata-inference/strata/compute"
)

// Off amd64 only the portable kernels exist.

const hasAVX512, hasAVX2 = false, false

var avx512Set, avx2Set = portableSet, portableSet // never selected

// vecAsm has no routines off amd64; the vector sets are never selected.
type vecAsm struct{}

func (vecAsm) decodeRow(dst []float32, w *compute.Matrix, r int, fp8Scales []byte) {
	panic("cpu: no vector kernels on " + runtime.GOARCH)
}

func (vecAsm) dot4(ws *workspace, r *row4, w *compute.Matrix, x []float32) [4]float32 {
	panic("cpu: no vector kernels on " + runtime.GOARCH)
}

func (vecAsm) gemmBlock(acc []lanes, wb []float32, kp int, xs *[4][]float32, n int) {
	panic("cpu: no vector kernels on " + runtime.GOARCH)
}

func (vecAsm) gemmRows() int { return groupRows }
func (vecAsm) gemmToks() int { return 1 }

func cpuName() string { return runtime.GOARCH }

func (vecAsm) accRows4(y *float32, w *[4]float32, rows *[4]unsafe.Pointer, n int) {
	panic("cpu: no vector kernels on " + runtime.GOARCH)
}

func (vecAsm) accRow1(y *float32, w *float32, row unsafe.Pointer, n int) {
	panic("cpu: no vector kernels on " + runtime.GOARCH)
}

func (vecAsm) idxDots(acc *[4]lanes, keys *[4]unsafe.Pointer, qt []float32, qs int, c []float32, dim, blocks int) {
	panic("cpu: no vector kernels on " + runtime.GOARCH)
}

func (vecAsm) dotRows(y []float32, w *compute.Matrix, r0, r1 int, x []float32, fr fp8Range) int {
	panic("cpu: no vector kernels on " + runtime.GOARCH)
}

func (vecAsm) absRange(x []float32) (lo, hi uint32) {
	panic("cpu: no vector kernels on " + runtime.GOARCH)
}

// axpy is axpyGo: no vector routines on this architecture.
func axpy(y []float32, a float32, x []float32) { axpyGo(y, a, x) }

func (vecAsm) dotF32(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int) {
	panic("cpu: no vector kernels on " + runtime.GOARCH)
}
