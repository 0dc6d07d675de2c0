// Package faults is ferry's fault-injection suite: two engines in two
// processes, each in a network namespace the test creates, joined by a
// user-space TUN relay (internal/netfault) that drops, delays, jitters,
// reorders, duplicates or corrupts packets with a seed, or takes the link
// down; and the same pair over shm without namespaces. Each case runs a
// stream of verified writes (every byte of every chunk checked by the
// receiver, which acknowledges it before the writer reuses the slot) and
// asserts its outcome: all bytes right, or every pending operation failing
// within its deadline (ErrTimeout) or as soon as the peer is known lost
// (ErrPeerLost); and after it no goroutine, descriptor, registration or
// /dev/shm file left behind.
//
// It needs root (network namespaces, TUN devices) and skips with a message
// otherwise; FERRY_TEST_REQUIRE=netns turns that skip into a failure.
// make test runs a fast subset (16 MiB per impairment, a 1 s link bounce);
// make test-faults runs the full suite (FERRY_FAULTS_FULL=1: 1 GiB per
// impairment, a 5 s link bounce) and prints its table: fault, outcome, time
// to error, bytes verified.
package faults
