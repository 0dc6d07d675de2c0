package main

import (
	// Every provider ferry ships, so transport names mean here what they
	// mean in the Go tools.
	_ "github.com/ferryrdma/ferry/providers"
)

// main is never called: a c-shared build runs only package
// initialization, then serves the exported functions.
func main() {}
