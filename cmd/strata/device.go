package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/compute/cuda"
)

// deviceUsage is the -device flag's help.
const deviceUsage = "where the model computes: cpu, cuda (GPU 0, strict float32 kernels: batch-invariant, the golden tolerance), " +
	"cuda-fast (bf16 tensor cores for products of 2 tokens or more), or cuda:N / cuda-fast:N for GPU N"

// addDeviceFlag registers -device on fs.
func addDeviceFlag(fs *flag.FlagSet, dst *string) { fs.StringVar(dst, "device", "cpu", deviceUsage) }

// deviceFlag registers -device on fs and returns its value.
func deviceFlag(fs *flag.FlagSet) *string {
	s := new(string)
	addDeviceFlag(fs, s)
	return s
}

// noClose is the closer of the CPU backend, which holds nothing to release.
type noClose struct{}

func (noClose) Close() error { return nil }

// openBackend returns the backend a -device value names (threads: the CPU
// backend's goroutines) and what releases it. Without a GPU driver or NVRTC
// the error says which library was missing.
func openBackend(name string, threads int) (compute.Backend, io.Closer, error) {
	if name == "" || name == "cpu" {
		return cpu.New(threads), noClose{}, nil
	}
	kind, ord, _ := strings.Cut(name, ":")
	var mode cuda.Mode
	switch kind {
	case "cuda":
		mode = cuda.Strict
	case "cuda-fast":
		mode = cuda.Fast
	default:
		return nil, nil, fmt.Errorf("-device %q: want cpu, cuda, cuda-fast, cuda:N or cuda-fast:N", name)
	}
	opts := cuda.Options{}
	if ord != "" {
		if _, err := fmt.Sscan(ord, &opts.Ordinal); err != nil || opts.Ordinal < 0 {
			return nil, nil, fmt.Errorf("-device %q: %q is not a GPU index", name, ord)
		}
	}
	b, err := cuda.NewBackend(context.Background(), opts, mode)
	if err != nil {
		if errors.Is(err, cuda.ErrNoDriver) {
			return nil, nil, fmt.Errorf("-device %s: no usable NVIDIA GPU: %w (run with -device cpu, or install the NVIDIA driver)", name, err)
		}
		return nil, nil, fmt.Errorf("-device %s: %w", name, err)
	}
	return b, b, nil
}
