package qwen35

import (
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// hostOps are the float-slice kernels this package's forward pass runs on
// for now: the CPU backend's. Until the forward pass is composed of backend
// ops on backend-owned tensors (as DeepSeek-V4's is), Qwen3.5 runs on the
// CPU backend only.
type hostOps interface {
	MatMulF32(y, x []float32, T int, w *compute.Matrix)
	RMSNormF32(y, x, w []float32, T, n int, eps float32)
	RoPEF32(x []float32, T, n int, pos []int32, invFreq []float32, inverse bool)
	SoftmaxF32(x []float32, T, n int)
	TopK(idx []int32, x []float32, k int)
}

func hostOpsOf(be compute.Backend) (hostOps, error) {
	h, ok := be.(hostOps)
	if !ok {
		return nil, fmt.Errorf("qwen35: runs on the CPU backend only for now, not on %s", be.Name())
	}
	return h, nil
}
