package a2a_test

import "golang.org/x/sys/unix"

// threadCPU returns the calling thread's CPU time in ns. Benchmarks report
// it beside wall time because the machines they run on are shared: time a
// thread spends descheduled inflates ns/op but not this.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
