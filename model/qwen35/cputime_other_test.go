//go:build !unix

package qwen35

// processCPU is not measured here; benchmarks report 0 CPU time.
func processCPU() float64 { return 0 }
