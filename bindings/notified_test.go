package main

import "testing"

// TestCNotified runs examples/notified.c (ABI 1.6): single, paged and
// scatter writes with notifications attached (ferry_submit_notified),
// each target checking every byte of the request when its notification
// arrives; a mailbox queueing FERRY_MAILBOX_DEPTH notifications; a second
// sender reported as FERRY_E_NOTIFICATIONS_LOST; bad input refused;
// ferry_engine_registration_stats counting a range-cache hit; and
// ferry_host_alloc_with's huge-page policies. shm runs with 2 NICs too:
// its writes followed by a notification ask nothing more of it.
func TestCNotified(t *testing.T) {
	runOverTransports(t, "notified", compileExample(t, "notified"),
		append(oneOfEach, transportCase{"shm", "-", "2"}))
}
