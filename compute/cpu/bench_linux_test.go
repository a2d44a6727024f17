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
		{compute.FP8, 8192, 1024}, // short rows, as DeepSeek-V4's wq_b and wo_a
		{compute.FP4, 2048, 1024},
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for _, sh := range shapes {
		m := benchMatrix(rng, sh.dt, sh.rows, sh.cols)
		m.NaNFree = sh.dt == compute.FP8 // as the binder promises for checkpoints
		// hot: the first 512 KiB of rows, which stay in the L2 cache: the
		// kernel's own speed at T=1.
		hot := *m
		hot.Rows = int((512 << 10) / (m.Bytes() / int64(m.Rows)))
		hot.Data = m.Data[:len(m.Data)/m.Rows*hot.Rows]
		hot.Scale = m.Scale[:len(m.Scale)*hot.Rows/m.Rows]
		if sh.dt == compute.FP8 {
			hot.Rows = hot.Rows / 128 * 128
			hot.Data = m.Data[:hot.Rows*m.Cols]
			hot.Scale = m.Scale[:hot.Rows/128*((m.Cols+127)/128)]
		}
		for _, T := range []int{0, 1, 128} { // 0: T=1 on the hot rows
			ks := families()
			if KernelsAMX.Available() && amxTakes(sh.dt) {
				ks = append(ks, KernelsAMX)
			}
			for _, k := range ks {
				be := newWith(b, 1, k)
				name := fmt.Sprintf("%v/%dx%d/T=%d/%v", sh.dt, sh.rows, sh.cols, T, k)
				if T == 0 {
					name = fmt.Sprintf("%v/%dx%d/T=1-hot/%v", sh.dt, hot.Rows, hot.Cols, k)
				}
				b.Run(name, func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					ms, T := []*compute.Matrix{m}, T
					switch T {
					case 0:
						ms, T = []*compute.Matrix{&hot}, 1
					case 1:
						ms = coldCopies(m)
					}
					m := ms[0]
					x := randVec(rng, T*sh.cols)
					y := make([]float32, T*m.Rows)
					be.MatMulF32(y, x, T, m)
					b.SetBytes(m.Bytes())
					c0 := threadCPU(b)
					for i := 0; b.Loop(); i++ {
						be.MatMulF32(y, x, T, ms[i%len(ms)])
					}
					sec := (threadCPU(b) - c0).Seconds()
					b.ReportMetric(float64(b.N)*float64(m.Bytes())/sec/1e9, "GB/cpu-s")
					if T > 1 {
						b.ReportMetric(float64(b.N)*2*float64(m.Rows*m.Cols*T)/sec/1e9, "GFLOP/cpu-s")
					}
				})
			}
		}
	}
}
