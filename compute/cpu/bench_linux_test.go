package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/strata-inference/strata/compute"
)

// threadCPU returns the CPU time the calling thread has used.
func threadCPU(b *testing.B) time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMatMulCore runs BenchmarkMatMul's shapes on one thread (a
// backend of one goroutine, locked to its thread) and reports the rates
// per second of that thread's CPU time: on a shared machine they leave out
// the time other processes hold the core (not their use of the caches and
// memory), so they compare kernels more steadily than wall-clock rates.
// Peak for one core is its FMA throughput (GFLOP/cpu-s) and its share of
// the memory bandwidth (GB/cpu-s at T=1).
func BenchmarkMatMulCore(b *testing.B) {
	type shape struct {
		dt         compute.DType
		rows, cols int
	}
	shapes := []shape{
		{compute.F32, 2048, 2048},
		{compute.BF16, 2048, 2048},
		{compute.F16, 2048, 2048},
		{compute.FP8, 4096, 4096},
		{compute.FP4, 2048, 1024},
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for _, sh := range shapes {
		m := benchMatrix(rng, sh.dt, sh.rows, sh.cols)
		for _, T := range []int{1, 128} {
			ks := families()
			if KernelsAMX.Available() && amxTakes(sh.dt) {
				ks = append(ks, KernelsAMX)
			}
			for _, k := range ks {
				be := newWith(b, 1, k)
				b.Run(fmt.Sprintf("%v/%dx%d/T=%d/%v", sh.dt, sh.rows, sh.cols, T, k), func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					ms := []*compute.Matrix{m}
					if T == 1 {
						ms = coldCopies(m)
					}
					x := randVec(rng, T*sh.cols)
					y := make([]float32, T*sh.rows)
					be.MatMul(y, x, T, m)
					b.SetBytes(m.Bytes())
					c0 := threadCPU(b)
					for i := 0; b.Loop(); i++ {
						be.MatMul(y, x, T, ms[i%len(ms)])
					}
					sec := (threadCPU(b) - c0).Seconds()
					b.ReportMetric(float64(b.N)*float64(m.Bytes())/sec/1e9, "GB/cpu-s")
					if T > 1 {
						b.ReportMetric(float64(b.N)*2*float64(sh.rows*sh.cols*T)/sec/1e9, "GFLOP/cpu-s")
					}
				})
			}
		}
	}
}
