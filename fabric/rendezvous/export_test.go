package rendezvous

import "time"

// SetProgressEvery shortens the progress period for a test.
func SetProgressEvery(d time.Duration) (restore func()) {
	old := progressEvery
	progressEvery = d
	return func() { progressEvery = old }
}
