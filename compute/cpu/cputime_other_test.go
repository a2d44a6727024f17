//go:build !unix

package cpu

// processCPU is not measured here; benchmarks report 0 CPU time.
func processCPU() float64 { return 0 }
