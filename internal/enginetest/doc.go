// Package enginetest is the engine conformance suite: every request type,
// the immediate-count contract, counters, the side channel, bad input and
// close behaviour, run through a real fabric.Engine over any provider.
// Each provider's tests call Run with its transports; the in-process "mem"
// provider runs it in the fabric package's own tests.
package enginetest
