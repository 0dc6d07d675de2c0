// Package jobtest runs a program built on fabric/job the way a user does:
// built with go build from the test's package directory, started as a
// command, its exit status and -json report checked. A transport that
// cannot open on this machine skips the test, saying why.
package jobtest
