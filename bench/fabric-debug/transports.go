package main

import (
	"fmt"
	"io"

	"github.com/ferryrdma/ferry/fabric"
)

// transports prints every transport name this program knows and the
// provider that serves it, one "name<TAB>provider" line each: the same
// table bench-a2a --list-transports and libferry's ferry_transports give.
func transports(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "fabric-debug transports: takes no arguments, got %q\n", args)
		return exitUsage
	}
	for _, t := range fabric.Transports() {
		fmt.Fprintf(stdout, "%s\t%s\n", t.Name, t.Provider)
	}
	return exitOK
}
