// Package membw measures the machine's memory read bandwidth, the
// denominator of the decode speed floor (bytes a step must read / bandwidth).
package membw

import (
	"runtime"
	"sync"
	"time"
)

// bufBytes is the size of the buffer read, well beyond any last-level cache.
const bufBytes = 256 << 20

// Measure returns the read bandwidth in GB/s with every core reading its
// share of a 256 MiB buffer, best of three runs.
func Measure() float64 { return MeasureThreads(runtime.GOMAXPROCS(0)) }

// MeasureThreads is Measure with threads goroutines reading (at least one).
//
// Each goroutine sums its share as 64-bit integers, with 32-byte loads
// into four accumulators where the CPU has AVX2 (sumFast) and in eight
// independent scalar chains elsewhere, so that the figure is the memory's,
// not the loop's: a float32 loop with four chains is bound by the adds'
// latency to a few GB/s per core, and 8-byte loads leave a Xeon core short
// of the bandwidth a vectorized C loop reads.
func MeasureThreads(threads int) float64 {
	threads = max(1, threads)
	buf := make([]uint64, bufBytes/8)
	for i := range buf {
		buf[i] = uint64(i & 7)
	}
	sums := make([]uint64, threads)
	best := 0.0
	for range 3 {
		start := time.Now()
		var wg sync.WaitGroup
		for i := range threads {
			part := buf[i*len(buf)/threads : (i+1)*len(buf)/threads]
			wg.Go(func() { sums[i] = sumFast(part) })
		}
		wg.Wait()
		best = max(best, float64(bufBytes)/time.Since(start).Seconds()/1e9)
	}
	runtime.KeepAlive(sums)
	return best
}

// sum returns the wrapping sum of a.
func sum(a []uint64) uint64 {
	var s0, s1, s2, s3, s4, s5, s6, s7 uint64
	i := 0
	for ; i+8 <= len(a); i += 8 {
		v := a[i : i+8 : i+8]
		s0 += v[0]
		s1 += v[1]
		s2 += v[2]
		s3 += v[3]
		s4 += v[4]
		s5 += v[5]
		s6 += v[6]
		s7 += v[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}
