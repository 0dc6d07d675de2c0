package rendezvous

import "time"

// SetProgressEvery shortens the progress period for a test.
func SetProgressEvery(d time.Duration) (restore func()) {
	old := progressEvery
	progressEvery = d
	return func() { progressEvery = old }
}

// LateReportGrace is how long past its deadline a call waits for rank 0's
// report of the missing ranks.
var LateReportGrace = lateReportGrace
