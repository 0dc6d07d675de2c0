package devicecode_test

import (
	"fmt"

	"github.com/ferryrdma/ferry/internal/devicecode"
)

// Every build the compile gate checks, with its launched kernels.
func ExampleAll() {
	for _, b := range devicecode.All() {
		fmt.Println(b.Name, len(b.Launches))
	}
	// Output:
	// cuda flags 4
	// fabric/gpu 4
}
