package qwen35

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/internal/membw"
)

// Qwen3.5-0.8B's Gated DeltaNet shapes: 16 key and 16 value heads of 128,
// 18 such layers.
var bench08B = DeltaShape{Hk: 16, Hv: 16, Dk: 128, Dv: 128}

const bench08BLayers = 18

// chunkFlops counts the floating-point operations (multiply and add each
// one) of one chunk of n tokens of one head in GatedDeltaRuleChunked.
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

// stepFlops counts the operations of one token of one head in
// GatedDeltaRule: decay, Sᵀk, the correction, the update and Sᵀq.
func stepFlops(dk, dv int) float64 { return 7 * float64(dk) * float64(dv) }

// matmulPeak measures the CPU backend's float32 matrix product on a
// 1024×1024 weight and 256 tokens, in GFLOP/s (best of three): the
// attainable arithmetic rate the prefill floor divides by.
func matmulPeak(be hostOps) float64 {
	const rows, cols, T = 1024, 1024, 256
	r := rand.New(rand.NewPCG(1, 1))
	w := compute.F32View(randVec(r, rows*cols, 0.03), rows, cols)
	x := randVec(r, T*cols, 1)
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

// BenchmarkDeltaRuleChunked times the chunked delta rule over a 1024-token
// prompt of one 0.8B-shaped layer (random inputs) and reports tokens/s of
// one layer next to its floor: its operations divided by the rate the CPU
// backend's float32 matmul attains on this machine. tokens/cpu-s divides by
// the CPU time the process used instead, which a machine shared with other
// work inflates less than wall time.
func BenchmarkDeltaRuleChunked(b *testing.B) {
	sh := bench08B
	sh.T = 1024
	r := rand.New(rand.NewPCG(2, 3))
	q, k, v, g, beta := deltaInputs(r, sh)
	o := make([]float32, sh.T*sh.Hv*sh.Dv)
	S := make([]float32, sh.Hv*sh.Dk*sh.Dv)
	peak := matmulPeak(cpu.New(0))
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		clear(S)
		GatedDeltaRuleChunked(o, S, q, k, v, g, beta, sh, DeltaChunk)
	}
	cpuRun := (processCPU() - cpu0) / float64(b.N)
	b.StopTimer()
	flops := float64(sh.T/DeltaChunk) * chunkFlops(DeltaChunk, sh.Dk, sh.Dv) * float64(sh.Hv)
	perRun := b.Elapsed().Seconds() / float64(b.N)
	floor := flops / (peak * 1e9)
	b.ReportMetric(float64(sh.T)/perRun, "tokens/s")
	b.ReportMetric(float64(sh.T)/floor, "floor-tokens/s")
	b.ReportMetric(flops/perRun/1e9, "GFLOP/s")
	b.ReportMetric(peak, "matmul-GFLOP/s")
	b.ReportMetric(floor/perRun, "of-floor")
	b.ReportMetric(float64(sh.T)/cpuRun, "tokens/cpu-s")
}

// BenchmarkDeltaRuleRecurrentPrefill runs the same prompt through the
// token-by-token form, for comparison with the chunked one.
func BenchmarkDeltaRuleRecurrentPrefill(b *testing.B) {
	sh := bench08B
	sh.T = 1024
	r := rand.New(rand.NewPCG(2, 3))
	q, k, v, g, beta := deltaInputs(r, sh)
	o := make([]float32, sh.T*sh.Hv*sh.Dv)
	S := make([]float32, sh.Hv*sh.Dk*sh.Dv)
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		clear(S)
		GatedDeltaRule(o, S, q, k, v, g, beta, sh)
	}
	cpuRun := (processCPU() - cpu0) / float64(b.N)
	b.StopTimer()
	perRun := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(sh.T)/perRun, "tokens/s")
	b.ReportMetric(float64(sh.T)/cpuRun, "tokens/cpu-s")
	b.ReportMetric(float64(sh.T)*stepFlops(sh.Dk, sh.Dv)*float64(sh.Hv)/perRun/1e9, "GFLOP/s")
}

// BenchmarkDeltaRuleDecode times one decode step of the delta rule for 8
// sequences × the 0.8B model's 18 DeltaNet layers (144 states of 1 MiB,
// more than this machine's last-level cache, so each step streams its
// state from memory as serving many requests does), reported per (token,
// layer) next to the floor: the state read once and written once (2 MiB)
// divided by the measured memory read bandwidth.
func BenchmarkDeltaRuleDecode(b *testing.B) {
	const seqs = 8
	sh := bench08B
	sh.T = 1
	r := rand.New(rand.NewPCG(4, 5))
	q, k, v, g, beta := deltaInputs(r, sh)
	o := make([]float32, sh.Hv*sh.Dv)
	states := make([][]float32, seqs*bench08BLayers)
	for i := range states {
		states[i] = randVec(r, sh.Hv*sh.Dk*sh.Dv, 0.1)
	}
	bw := membw.Measure()
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		for _, S := range states {
			GatedDeltaRule(o, S, q, k, v, g, beta, sh)
		}
	}
	cpuStep := (processCPU() - cpu0) / float64(b.N*len(states))
	b.StopTimer()
	perStep := b.Elapsed().Seconds() / float64(b.N*len(states))
	stateBytes := float64(4 * sh.Hv * sh.Dk * sh.Dv)
	floor := 2 * stateBytes / (bw * 1e9)
	b.ReportMetric(perStep*1e6, "µs/layer-token")
	b.ReportMetric(floor*1e6, "floor-µs")
	b.ReportMetric(2*stateBytes/perStep/1e9, "state-GB/s")
	b.ReportMetric(bw, "mem-GB/s")
	b.ReportMetric(float64(sh.Hv)*stepFlops(sh.Dk, sh.Dv)/perStep/1e9, "GFLOP/s")
	b.ReportMetric(floor/perStep, "of-floor")
	b.ReportMetric(cpuStep*1e6, "cpu-µs/layer-token")
}
