package cpu

import (
	"runtime"
	"testing"
)

// BenchmarkPeakFMA reports one core's float32 FMA throughput in GFLOP/s
// (2 flops per lane), per second of the thread's CPU time: the peak the
// prefill GFLOP/cpu-s of BenchmarkMatMulCore compares with.
func BenchmarkPeakFMA(b *testing.B) {
	for _, tc := range []struct {
		name  string
		ok    bool
		f     func(int)
		flops int // per iteration
	}{{"avx512", hasAVX512, peakFMAZ, 24 * 32}, {"avx2", hasAVX2, peakFMAY, 12 * 16}} {
		if !tc.ok {
			continue
		}
		b.Run(tc.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			const n = 100000
			c0 := threadCPU(b)
			for b.Loop() {
				tc.f(n)
			}
			sec := (threadCPU(b) - c0).Seconds()
			b.ReportMetric(float64(b.N)*n*float64(tc.flops)/sec/1e9, "GFLOP/cpu-s")
			b.ReportMetric(float64(b.N)*n*float64(tc.flops)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
