package nccl

import (
	"errors"
	"fmt"
	"path/filepath"
	"unsafe"
)

// ErrNoDriver is wrapped by GPUCount's error when libcuda.so.1 cannot be
// loaded or initialized.
var ErrNoDriver = errors.New("nccl: no NVIDIA driver")

// GPUCount is the number of GPUs the CUDA driver reports (cuInit and
// cuDeviceGetCount of libcuda.so.1), found before anything heavier is
// opened. Without a driver the error wraps ErrNoDriver.
func GPUCount() (int, error) {
	return gpuCount(driverCandidates())
}

func driverCandidates() []string {
	const name = "libcuda.so.1"
	c := []string{name}
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
		"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib"} {
		c = append(c, filepath.Join(d, name))
	}
	return c
}

func gpuCount(paths []string) (int, error) {
	if !dynamicLoading {
		_, err := dlopen("libcuda.so.1")
		return 0, fmt.Errorf("%w (libcuda.so.1): %v", ErrNoDriver, err)
	}
	var first error
	for _, p := range paths {
		h, err := dlopen(p)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		cuInit, err1 := dlsym(h, "cuInit")
		cuCount, err2 := dlsym(h, "cuDeviceGetCount")
		if err := errors.Join(err1, err2); err != nil || cuInit == 0 || cuCount == 0 {
			return 0, fmt.Errorf("%w (libcuda.so.1 at %s): no cuInit or cuDeviceGetCount", ErrNoDriver, p)
		}
		if r := int32(uint32(ccall(cuInit, 0))); r != 0 {
			return 0, fmt.Errorf("%w (libcuda.so.1 at %s): cuInit failed with CUresult %d", ErrNoDriver, p, r)
		}
		var n int32
		if r := int32(uint32(ccall(cuCount, uintptr(unsafe.Pointer(&n))))); r != 0 {
			return 0, fmt.Errorf("nccl: cuDeviceGetCount (libcuda.so.1 at %s) failed with CUresult %d", p, r)
		}
		return int(n), nil
	}
	return 0, fmt.Errorf("%w (libcuda.so.1): %v", ErrNoDriver, first)
}
