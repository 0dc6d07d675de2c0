package enginetest

import (
	"fmt"
	"testing"

	_ "github.com/ferryrdma/ferry/internal/memfabric"
)

func TestMem(t *testing.T) {
	for _, nics := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("nics=%d", nics), func(t *testing.T) {
			Run(t, Params{Transport: "mem", NICs: nics})
		})
	}
}
