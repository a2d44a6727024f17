//go:build unix

package cpu

import "syscall"

// processCPU is the CPU time the process has used, user and system, in
// seconds: on a machine shared with other work it measures a benchmark's
// own cost where wall time also counts the waits.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
