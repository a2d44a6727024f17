package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/comm"
	"github.com/strata-inference/strata/compute/comm/nccl"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/compute/cuda"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv4"
)

// addParallelFlags registers -gpus and -ranks: a model served by several
// ranks (docs/multigpu.md).
func addParallelFlags(fs *flag.FlagSet, cfg *serveConfig) {
	fs.IntVar(&cfg.gpus, "gpus", 1, "with -device cuda or cuda-fast: serve on GPUs 0..N-1 of this machine, the routed experts sharded across them (expert parallelism over NCCL, NVLink multicast off) and the requests spread over them (data-parallel attention; -cache-memory is per GPU); DeepSeek-V4 only. Not yet run on GPUs: the CUDA backend lacks two interfaces (see docs/multigpu.md)")
	fs.IntVar(&cfg.ranks, "ranks", 1, "with -device cpu: serve as this many in-process ranks, the multi-GPU path on the CPU (experts sharded, requests spread, -threads split between ranks, -cache-memory per rank); DeepSeek-V4 only")
}

// openServedModel loads cfg.dir on the backend -device names, or, with
// -gpus or -ranks above 1, on that many ranks.
func openServedModel(cfg serveConfig, o model.Options) (model.Model, error) {
	n, gpus, err := parallelRanks(cfg)
	if err != nil {
		return nil, err
	}
	if n == 1 {
		be, _, err := openBackend(cfg.device, cfg.threads) // lives as long as the process
		if err != nil {
			return nil, err
		}
		return loadModel(cfg.dir, be, o)
	}
	if _, err := deepseekv4.LoadConfig(filepath.Join(cfg.dir, "config.json")); err != nil {
		return nil, fmt.Errorf("%s: only DeepSeek-V4 checkpoints run on several ranks: %w", rankFlag(gpus, n), err)
	}
	var bes []compute.Backend
	var comms []comm.Comm
	if gpus {
		bes, comms, err = openGPUs(machineGPUs(), n, cfg.device)
	} else {
		bes, comms, err = cpuRanks(n, cfg.threads)
	}
	if err != nil {
		return nil, err
	}
	m, err := deepseekv4.LoadParallel(cfg.dir, bes, comms, deepseekv4.ParallelOptions{Options: o})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rankFlag(gpus, n), err)
	}
	return m, nil
}

func rankFlag(gpus bool, n int) string {
	if gpus {
		return fmt.Sprintf("-gpus %d", n)
	}
	return fmt.Sprintf("-ranks %d", n)
}

// parallelRanks reads -gpus and -ranks against -device: how many ranks,
// and whether they are GPUs.
func parallelRanks(cfg serveConfig) (n int, gpus bool, err error) {
	kind, ord, _ := strings.Cut(cfg.device, ":")
	cpuDev := cfg.device == "" || cfg.device == "cpu"
	switch {
	case cfg.gpus < 1:
		return 0, false, fmt.Errorf("-gpus %d: want 1 or more", cfg.gpus)
	case cfg.ranks < 1:
		return 0, false, fmt.Errorf("-ranks %d: want 1 or more", cfg.ranks)
	case cfg.gpus > 1 && cfg.ranks > 1:
		return 0, false, fmt.Errorf("-gpus and -ranks do not go together (-gpus for -device cuda, -ranks for -device cpu)")
	case cfg.gpus > 1 && cpuDev:
		return 0, false, fmt.Errorf("-gpus %d needs -device cuda or cuda-fast (-ranks %d runs the same path on the CPU)", cfg.gpus, cfg.gpus)
	case cfg.gpus > 1 && ord != "":
		return 0, false, fmt.Errorf("-gpus %d uses GPUs 0..%d; -device %s names one GPU (give -device %s)", cfg.gpus, cfg.gpus-1, cfg.device, kind)
	case cfg.ranks > 1 && !cpuDev:
		return 0, false, fmt.Errorf("-ranks %d is for -device cpu; on GPUs give -gpus %d", cfg.ranks, cfg.ranks)
	case cfg.gpus > 1:
		return cfg.gpus, true, nil
	}
	return cfg.ranks, false, nil
}

// cpuRanks is n CPU backends sharing the compute goroutines (threads: 0
// for one per CPU) and an in-process communicator between them.
func cpuRanks(n, threads int) ([]compute.Backend, []comm.Comm, error) {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	bes := make([]compute.Backend, n)
	for r := range bes {
		bes[r] = cpu.New(max(1, threads/n))
	}
	ends, err := comm.NewLocal(bes)
	if err != nil {
		return nil, nil, err
	}
	cs := make([]comm.Comm, n)
	for r, c := range ends {
		cs[r] = c
	}
	return bes, cs, nil
}

// gpuMachine is what serving on several GPUs needs of the machine, so
// that tests can give another.
type gpuMachine struct {
	count func() (int, error)
	nccl  func() (*nccl.Library, error)
	open  func(ordinal int, device string) (compute.Backend, error)
	comms func(lib *nccl.Library, devs []nccl.Device) ([]*nccl.Comm, error)
}

func machineGPUs() gpuMachine {
	return gpuMachine{
		count: nccl.GPUCount,
		nccl:  nccl.Load,
		open: func(ord int, device string) (compute.Backend, error) {
			mode := cuda.Strict
			if device == "cuda-fast" {
				mode = cuda.Fast
			}
			return cuda.NewBackend(context.Background(), cuda.Options{Ordinal: ord}, mode)
		},
		comms: nccl.New,
	}
}

// openGPUs opens GPUs 0..n-1 as the ranks of one model, with an NCCL
// communicator between them. Each missing piece is a clear error, checked
// cheapest first: the driver and the GPU count, NCCL, then what the ranks'
// backends must offer.
func openGPUs(mc gpuMachine, n int, device string) ([]compute.Backend, []comm.Comm, error) {
	flagName := fmt.Sprintf("-gpus %d", n)
	count, err := mc.count()
	if err != nil {
		if errors.Is(err, nccl.ErrNoDriver) {
			return nil, nil, fmt.Errorf("%s: no usable NVIDIA GPU: %w (-device cpu -ranks %d runs the same path on the CPU)", flagName, err, n)
		}
		return nil, nil, fmt.Errorf("%s: %w", flagName, err)
	}
	if count < n {
		return nil, nil, fmt.Errorf("%s: this machine has %d GPU(s)", flagName, count)
	}
	lib, err := mc.nccl()
	if err != nil {
		return nil, nil, fmt.Errorf("%s needs NCCL 2.7 or later: %w (install it, e.g. pip install nvidia-nccl-cu12, or set %s to its directory)", flagName, err, nccl.LibDirEnv)
	}
	bes := make([]compute.Backend, n)
	devs := make([]nccl.Device, n)
	for r := range n {
		be, err := mc.open(r, device)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: GPU %d: %w", flagName, r, err)
		}
		bes[r] = be
		d, ok := be.(nccl.Device)
		if !ok {
			return nil, nil, fmt.Errorf("%s: the %s backend does not offer nccl.Device yet (its CUDA stream and its tensors' device addresses, for NCCL), so it cannot run on several GPUs in this build (docs/multigpu.md; -device cpu -ranks %d runs the same path on the CPU)", flagName, be.Name(), n)
		}
		if _, ok := be.(compute.RoutedExperts); !ok {
			return nil, nil, fmt.Errorf("%s: the %s backend does not offer compute.RoutedExperts yet (Route, RunExperts, Combine: MoE split for expert parallelism), so it cannot run on several GPUs in this build (docs/multigpu.md)", flagName, be.Name())
		}
		devs[r] = d
	}
	ncs, err := mc.comms(lib, devs)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", flagName, err)
	}
	cs := make([]comm.Comm, n)
	for r, c := range ncs {
		cs[r] = c
	}
	return bes, cs, nil
}
