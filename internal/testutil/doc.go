// Package testutil is the test support every ferry package shares: skips
// that say why and turn into failures where the hardware is required
// (Skip, SkipIfNotSupported, RequireCUDA), goroutine leak checks, and the
// multi-process harness: a package's TestMain is a call to Main, which
// runs the role a re-executed test binary was started in (Roles), and
// Spawn and Run start this binary in a role as a child of a test, its
// output in the test log, killed at its deadline and at the test's end,
// its exit status checked; RunTest re-runs one test alone under another
// environment. Rank jobs (W processes of a role joined by
// fabric/rendezvous) are in fabric/rendezvous/rendezvoustest and
// transport selection in fabric/fabrictest (RequireTransport), beside the
// engine they need; GPU tests outside package cuda take their device
// context from internal/testutil/cudatest. This package imports nothing of
// ferry's but its error sentinels.
//
// FERRY_TEST_REQUIRE is a comma list of features a machine promises
// (cuda, nvrtc, verbs, libfabric, netns, etcd, ...; "all" promises everything):
// a test that would skip for lack of a listed feature fails instead, so a
// hardware CI job cannot pass by skipping.
package testutil
