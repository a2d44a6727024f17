package cpu

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/internal/membw"
)

// Qwen3.5-0.8B's Gated DeltaNet shapes: 16 key and 16 value heads of 128,
// 18 such layers.
const (
	b08Hk, b08Hv, b08Dk, b08Dv = 16, 16, 128, 128
	b08Layers                  = 18
)

// chunkFlops counts the floating-point operations (multiply and add each
// one) of one chunk of n tokens of one head in DeltaRuleChunked.
func chunkFlops(n, dk, dv int) float64 {
	N, K, V := float64(n), float64(dk), float64(dv)
	tri := N * (N - 1) / 2 // strictly lower pairs
	return N*(2*K+V) +     // βk, βk e^Γ, βv
		tri*2*K + (tri+N)*2*K + // A and M
		tri*2*(K+V) + // forward substitution of U and W
		N*2*K*V + // v' = U − W S
		N*2*K*V + (tri+N)*2*V + // o = (q e^Γ) S + M v'
		N*2*K*V + 2*K*V // S ← e^Γ S + Σ k ⊗ v'
}

// stepFlops counts the operations of one token of one head in DeltaRule:
// decay, Sᵀk, the correction, the update and Sᵀq.
func stepFlops(dk, dv int) float64 { return 7 * float64(dk) * float64(dv) }

// matmulPeak measures the backend's float32 matrix product on a 1024×1024
// weight and 256 tokens, in GFLOP/s (best of three): the attainable
// arithmetic rate the prefill floor divides by.
func matmulPeak(be *Backend) float64 {
	const rows, cols, T = 1024, 1024, 256
	r := rand.New(rand.NewPCG(1, 1))
	w := compute.F32View(randVec(r, rows*cols), rows, cols)
	x := randVec(r, T*cols)
	y := make([]float32, T*rows)
	be.MatMulF32(y, x, T, w)
	best := 0.0
	for range 3 {
		start := time.Now()
		be.MatMulF32(y, x, T, w)
		best = max(best, 2*rows*cols*T/time.Since(start).Seconds()/1e9)
	}
	return best
}

// deltaBench is one layer's delta rule over spans of the given lengths,
// its state in paged slots.
func deltaBench(be *Backend, r *rand.Rand, lens []int) (*compute.DeltaArgs, compute.Spans) {
	c := newDeltaCase(r, b08Hk, b08Hv, b08Dk, b08Dv, lens, make([]int, len(lens)))
	T := sum(lens)
	st := newTestPaged(be, r, len(lens), b08Hv, b08Dk*b08Dv, 1, compute.SlotF32)
	W := 2*b08Hk*b08Dk + b08Hv*b08Dv
	return &compute.DeltaArgs{
		Out: Wrap(make([]float32, T*b08Hv*b08Dv), T, b08Hv*b08Dv), QKV: Wrap(c.qkv, T, W),
		A: Wrap(c.A, T, b08Hv), B: Wrap(c.B, T, b08Hv), NegA: Wrap(c.negA, 1, b08Hv), DtBias: Wrap(c.dtBias, 1, b08Hv),
		State: st.p, Hk: b08Hk, Hv: b08Hv, Dk: b08Dk, Dv: b08Dv,
	}, spansTensor(lens, make([]int, len(lens)))
}

// BenchmarkDeltaRuleChunked times the chunked delta rule over a 1024-token
// prompt of one 0.8B-shaped layer (random inputs) and reports tokens/s of
// one layer next to its floor: its operations divided by the rate the
// backend's float32 matmul attains on this machine. tokens/cpu-s divides
// by the CPU time the process used instead, which a machine shared with
// other work inflates less than wall time.
func BenchmarkDeltaRuleChunked(b *testing.B) {
	const T = 1024
	be := New(0)
	a, sp := deltaBench(be, rand.New(rand.NewPCG(2, 3)), []int{T})
	peak := matmulPeak(be)
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		be.DeltaRuleChunked(a, sp, 64)
	}
	cpuRun := (processCPU() - cpu0) / float64(b.N)
	b.StopTimer()
	flops := float64(T/64) * chunkFlops(64, b08Dk, b08Dv) * b08Hv
	perRun := b.Elapsed().Seconds() / float64(b.N)
	floor := flops / (peak * 1e9)
	b.ReportMetric(T/perRun, "tokens/s")
	b.ReportMetric(T/floor, "floor-tokens/s")
	b.ReportMetric(flops/perRun/1e9, "GFLOP/s")
	b.ReportMetric(peak, "matmul-GFLOP/s")
	b.ReportMetric(floor/perRun, "of-floor")
	b.ReportMetric(T/cpuRun, "tokens/cpu-s")
}

// BenchmarkDeltaRuleRecurrentPrefill runs the same prompt through the
// token-by-token form (the one the model uses on every path), next to the
// chunked form's floor.
func BenchmarkDeltaRuleRecurrentPrefill(b *testing.B) {
	const T = 1024
	be := New(0)
	a, sp := deltaBench(be, rand.New(rand.NewPCG(2, 3)), []int{T})
	peak := matmulPeak(be)
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		be.DeltaRule(a, sp)
	}
	cpuRun := (processCPU() - cpu0) / float64(b.N)
	b.StopTimer()
	perRun := b.Elapsed().Seconds() / float64(b.N)
	floor := float64(T/64) * chunkFlops(64, b08Dk, b08Dv) * b08Hv / (peak * 1e9)
	b.ReportMetric(T/perRun, "tokens/s")
	b.ReportMetric(T/floor, "floor-tokens/s")
	b.ReportMetric(T/cpuRun, "tokens/cpu-s")
	b.ReportMetric(T*stepFlops(b08Dk, b08Dv)*b08Hv/perRun/1e9, "GFLOP/s")
}

// BenchmarkDeltaRuleDecode times one decode step of the delta rule for 8
// sequences × the 0.8B model's 18 DeltaNet layers (144 states of 1 MiB in
// cache pages, more than this machine's last-level cache, so each step
// streams its state from memory as serving many requests does), one
// batched call per layer, reported per (token, layer) next to the floor:
// the state read once and written once (2 MiB) divided by the measured
// memory read bandwidth.
func BenchmarkDeltaRuleDecode(b *testing.B) {
	const seqs = 8
	be := New(0)
	r := rand.New(rand.NewPCG(4, 5))
	lens := make([]int, seqs)
	for i := range lens {
		lens[i] = 1
	}
	type layer struct {
		a  *compute.DeltaArgs
		sp compute.Spans
	}
	var layers []layer
	for range b08Layers {
		a, sp := deltaBench(be, r, lens)
		layers = append(layers, layer{a, sp})
	}
	bw := membw.Measure()
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		for _, l := range layers {
			be.DeltaRule(l.a, l.sp)
		}
	}
	n := float64(b.N * seqs * b08Layers)
	cpuStep := (processCPU() - cpu0) / n
	b.StopTimer()
	perStep := b.Elapsed().Seconds() / n
	stateBytes := float64(4 * b08Hv * b08Dk * b08Dv)
	floor := 2 * stateBytes / (bw * 1e9)
	b.ReportMetric(perStep*1e6, "µs/layer-token")
	b.ReportMetric(floor*1e6, "floor-µs")
	b.ReportMetric(2*stateBytes/perStep/1e9, "state-GB/s")
	b.ReportMetric(bw, "mem-GB/s")
	b.ReportMetric(b08Hv*stepFlops(b08Dk, b08Dv)/perStep/1e9, "GFLOP/s")
	b.ReportMetric(floor/perStep, "of-floor")
	b.ReportMetric(cpuStep*1e6, "cpu-µs/layer-token")
}
