package main

import (
	"io"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// parseOptions parses a subcommand's flags the way run does.
func parseOptions(t *testing.T, cmd string, args ...string) *options {
	t.Helper()
	o := &options{provider: "auto", args: args}
	fs := o.flags(cmd, io.Discard)
	_, err := parse(fs, args)
	require.NoError(t, err, "%v", args)
	require.NoError(t, o.finish(io.Discard), "%v", args)
	o.spec.Logger = nil // a fresh handler each time; what it logs is LogLevel
	return o
}

// The spellings bench-a2a shares, and the earlier ones kept as aliases,
// parse to the same configuration.
func TestFlagAliases(t *testing.T) {
	for _, pair := range [][2][]string{
		{{"--transport", "shm"}, {"--provider", "shm"}},
		{{"--transport=tcp;ofi_rxm", "--nics", "2"}, {"--provider=tcp;ofi_rxm", "--nets-per-gpu", "2"}},
		{{"--poll", "spin"}, {"--spin"}},
		{{"--poll", "adaptive"}, {"--spin=false"}},
		{{"-v"}, {"--verbose"}},
		{{"--transport", "mem", "--nics", "3", "--poll", "spin", "-v"}, {"--provider", "mem", "--nets-per-gpu=3", "--spin", "--verbose"}},
	} {
		a, b := parseOptions(t, "loopback", pair[0]...), parseOptions(t, "loopback", pair[1]...)
		if !reflect.DeepEqual(a.spec, b.spec) || a.verbose != b.verbose {
			t.Errorf("%v: %+v (verbose %v)\n%v: %+v (verbose %v)", pair[0], a.spec, a.verbose, pair[1], b.spec, b.verbose)
		}
	}
	o := parseOptions(t, "loopback", "--nets-per-gpu", "2", "--spin", "--provider", "shm")
	require.Equal(t, 2, o.spec.NICs)
	require.Equal(t, "shm", o.spec.Provider)
	require.Equal(t, "spin", o.spec.Poll.String())

	// --list-transports is the transports subcommand.
	want, _, code := runHere("transports")
	require.Equal(t, exitOK, code)
	require.NotEmpty(t, want)
	got, errOut, code := runHere("--list-transports")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, want, got)
}
