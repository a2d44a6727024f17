//go:build !(linux && amd64)

package cpu

import (
	"runtime"

	"github.com/strata-inference/strata/compute"
)

// The AMX kernels need Linux on amd64 (the tile permission is a Linux
// system call); elsewhere KernelsAMX is never available.

const amxOK = false

var amxSet = portableSet // never selected

func amxTakes(compute.DType) bool { return false }

type amxJob struct{}

func (*amxJob) run(*state, int) {}

func (s *state) amxMatMul(y, x []float32, T, kp int, w *compute.Matrix) {
	panic("cpu: no AMX kernels on " + runtime.GOOS + "/" + runtime.GOARCH)
}
