package ipc

import "time"

// SetCtlTimeout shortens the control timeout for a test and returns the
// function that restores it.
func SetCtlTimeout(d time.Duration) (restore func()) {
	old := ctlTimeoutNs.Swap(int64(d))
	return func() { ctlTimeoutNs.Store(old) }
}
