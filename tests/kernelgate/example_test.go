package kernelgate_test

import (
	"fmt"

	"github.com/ferryrdma/ferry/tests/kernelgate"
)

// The builds the compile gate checks, with their launched kernels (the
// first two: cuda's and fabric/gpu's; the a2a kernels' come after).
func ExampleAll() {
	for _, b := range kernelgate.All()[:2] {
		fmt.Println(b.Name, len(b.Launches))
	}
	// Output:
	// cuda flags 4
	// fabric/gpu 4
}
