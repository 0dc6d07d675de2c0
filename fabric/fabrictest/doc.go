// Package fabrictest is what tests of programs and providers built on
// package fabric need, the way net/http/httptest and testing/fstest serve
// theirs:
//
//   - in-process transports, registered on import: "mem" moves bytes
//     between engines of one process with real immediate and completion
//     semantics, "null" completes every operation without moving a byte
//     (to measure the engine alone). Open them with
//     fabric.Config{Transport: fabrictest.Mem}.
//   - fault injection into mem domains (Inject): failed or refused
//     writes, a busy provider, a fatal poll error.
//   - the conformance suite (Run): every request type, the
//     immediate-count wire contract, the three counter kinds, the side
//     channel, leases and notifications (each request's bytes all in
//     place when its notification is handed over, scatters with one per
//     target, mailbox queueing and back-pressure, losses reported), bad
//     input, unregistration and Close, run through real
//     engines over any registered transport. A provider author runs it
//     against a new provider; ferry runs it over mem, tcp;ofi_rxm, shm and
//     verbs.
//
// Test helpers fail the test through testing.TB; they never panic into
// the caller's code.
package fabrictest
