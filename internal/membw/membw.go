// Package membw measures the machine's memory read bandwidth, the
// denominator of the decode speed floor (bytes a step must read / bandwidth).
package membw

import (
	"runtime"
	"sync"
	"time"
)

// Measure returns the read bandwidth in GB/s: every core sums its share of a
// 256 MiB buffer, best of three runs.
func Measure() float64 {
	buf := make([]float32, 64<<20)
	for i := range buf {
		buf[i] = float32(i & 7)
	}
	best := 0.0
	for range 3 {
		start := time.Now()
		var wg sync.WaitGroup
		w := runtime.GOMAXPROCS(0)
		sums := make([]float32, w)
		for i := range w {
			part := buf[i*len(buf)/w : (i+1)*len(buf)/w]
			wg.Go(func() {
				var s0, s1, s2, s3 float32
				for j := 0; j+4 <= len(part); j += 4 {
					s0 += part[j]
					s1 += part[j+1]
					s2 += part[j+2]
					s3 += part[j+3]
				}
				sums[i] = s0 + s1 + s2 + s3
			})
		}
		wg.Wait()
		best = max(best, float64(4*len(buf))/time.Since(start).Seconds()/1e9)
	}
	return best
}
