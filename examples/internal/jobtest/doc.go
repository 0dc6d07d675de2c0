// Package jobtest runs an example program the way a user does: built with
// go build, started as a command, its exit status and JSON report checked.
package jobtest
