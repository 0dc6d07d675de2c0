// Package rankjob runs a test binary's role as the ranks of one job: W
// processes bootstrapped by fabric/rendezvous, each playing the role that
// the package's TestMain (testutil.Main) dispatches. It lives apart from
// testutil so that testutil itself imports nothing of ferry's.
package rankjob
