// Package rendezvoustest runs a test binary's role as the ranks of one
// job: W processes started and bootstrapped by fabric/rendezvous, each
// playing the role that the package's TestMain (internal/testutil.Main)
// dispatches, their output in the test log. It sits beside rendezvous, as
// fabric/fabrictest sits beside the engine, because internal/testutil lies
// below the engine's packages.
package rendezvoustest
