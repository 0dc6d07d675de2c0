package main

import (
	// The providers the library can open, registered on import.
	_ "github.com/ferryrdma/ferry/efa"
	_ "github.com/ferryrdma/ferry/internal/memfabric"
)

// main is never called: a c-shared build runs only package
// initialization, then serves the exported functions.
func main() {}
