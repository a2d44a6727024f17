package deepseekv4

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
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

// coreBandwidth is one thread's memory read bandwidth in GB per second of
// its own CPU time: the best of three sums of a 256 MiB buffer, eight
// independent chains (as internal/membw reads).
func coreBandwidth(b *testing.B) float64 {
	buf := make([]uint64, 32<<20)
	for i := range buf {
		buf[i] = uint64(i & 7)
	}
	best := 0.0
	var sink uint64
	for range 3 {
		c0 := threadCPU(b)
		var s0, s1, s2, s3, s4, s5, s6, s7 uint64
		for i := 0; i+8 <= len(buf); i += 8 {
			v := buf[i : i+8 : i+8]
			s0 += v[0]
			s1 += v[1]
			s2 += v[2]
			s3 += v[3]
			s4 += v[4]
			s5 += v[5]
			s6 += v[6]
			s7 += v[7]
		}
		sink += s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
		best = max(best, float64(8*len(buf))/(threadCPU(b)-c0).Seconds()/1e9)
	}
	runtime.KeepAlive(sink)
	return best
}

// BenchmarkDecodeStepCore is BenchmarkDecodeStep on one thread (a backend
// of one goroutine, locked to its thread), timed by that thread's CPU
// time: on a shared machine it leaves out the time other processes hold
// the core (not their use of the caches and memory). Its floor is the
// bytes a step reads over one thread's bandwidth measured the same way, so
// of-floor compares the decode step with streaming its bytes on one core.
func BenchmarkDecodeStepCore(b *testing.B) {
	if testing.Short() {
		b.Skip("writes a 1.7 GB checkpoint")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dir := syntheticDir(b)
	m, err := Load(dir, cpu.New(1))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.Prefault(context.Background()); err != nil {
		b.Fatal(err)
	}
	const ctxLen = 4096
	pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), ctxLen+b.N+1, 1)
	if err != nil {
		b.Fatal(err)
	}
	seq, err := m.NewSeq(pool)
	if err != nil {
		b.Fatal(err)
	}
	fillContext(b, seq, ctxLen)
	batch := &model.Batch{Tokens: []int32{7}, Spans: []model.Span{{Seq: seq, Len: 1, Logits: model.LastLogits}}}
	if _, err := m.Forward(context.Background(), batch); err != nil {
		b.Fatal(err)
	}
	wb, kvb := m.DecodeReadBytes(ctxLen)
	bw := coreBandwidth(b)
	b.ResetTimer()
	c0 := threadCPU(b)
	for i := range b.N {
		batch.Tokens[0] = int32(i % m.Cfg.VocabSize)
		if _, err := m.Forward(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	perStep := (threadCPU(b) - c0).Seconds() / float64(b.N)
	b.StopTimer()
	floor := float64(wb+kvb) / (bw * 1e9)
	b.ReportMetric(1/perStep, "tokens/cpu-s")
	b.ReportMetric(1/floor, "floor-tokens/cpu-s")
	b.ReportMetric(bw, "mem-GB/cpu-s")
	b.ReportMetric(floor/perStep, "of-floor")
}
