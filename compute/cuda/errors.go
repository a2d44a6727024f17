package cuda

import (
	"errors"
	"fmt"
)

// Error is a failed CUDA driver or NVRTC call.
type Error struct {
	Call string // the function and, where useful, its arguments
	Code int    // CUresult or nvrtcResult
	Name string // e.g. CUDA_ERROR_OUT_OF_MEMORY
	Msg  string // the library's description
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d): %s", e.Call, e.Name, e.Code, e.Msg)
}

// ErrNoDriver is wrapped by the error of [Open] when libcuda.so.1 cannot be
// loaded or initialized, or no device is present.
var ErrNoDriver = errors.New("cuda: no NVIDIA driver")

// ErrClosed is returned by calls on a closed [Device].
var ErrClosed = errors.New("cuda: device closed")

// errNotOnThread is returned by [Thread] methods called outside the Do
// call that passed the Thread.
var errNotOnThread = errors.New("cuda: Thread used outside Device.Do")

// CUresult codes the package tests for.
const (
	cudaSuccess         = 0
	cudaErrorNoDevice   = 100
	cudaErrorNotReady   = 600
	cudaErrorStubLibary = 34
)
