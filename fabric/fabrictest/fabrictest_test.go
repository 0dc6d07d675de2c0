package fabrictest_test

import (
	"testing"

	"github.com/ferryrdma/ferry/fabric/fabrictest"
)

// The suite over the in-process transport, through the public entry
// point, as a user's module runs it.
func TestConformanceMem(t *testing.T) {
	fabrictest.Run(t, fabrictest.Params{Transport: fabrictest.Mem, NICs: 2})
}
