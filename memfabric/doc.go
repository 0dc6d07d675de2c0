// Package memfabric provides two in-process providers for the fabric
// engine, registered as "mem" and "null".
//
// "mem" moves bytes for real between domains of the same process: writes
// are bounds- and key-checked copies, immediates land in the target's
// completion queue, sends match posted receives. It has fault injection
// (error completions, refused posts, back-pressure) so the engine's error
// paths can be tested without a NIC, and a late-data mode (SetLateData,
// Flush) in which a write's immediate arrives before its payload, as NIC
// writes into GPU memory may look to a kernel until they are flushed.
//
// "null" is the same domain with the payload copy left out: every write
// completes at once, so benchmarks over it measure the engine's own
// overhead. Immediates and two-sided messages are still delivered, so the
// control protocol of fabric-debug works over it.
package memfabric
