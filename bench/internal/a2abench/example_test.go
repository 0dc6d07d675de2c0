package a2abench_test

import (
	"fmt"
	"slices"
	"time"

	"github.com/ferryrdma/ferry/bench/internal/a2abench"
)

// A case as Run hands it to Options.OnCase: the samples of every rank,
// split into the halves of each phase (the durations here are made up).
func ExampleCase_Halves() {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	c := a2abench.Case{Tokens: 128, DispatchBytes: 7569408, Samples: []a2abench.Sample{
		{DispatchSend: us(100), DispatchRecv: us(200), CombineSend: us(150), CombineRecv: us(350)},
		{DispatchSend: us(120), DispatchRecv: us(180), CombineSend: us(160), CombineRecv: us(330)},
	}}
	send, recv := c.Halves(a2abench.Dispatch)
	fmt.Println("dispatch send:", send, "slowest recv:", slices.Max(recv))
	fmt.Println("nominal dispatch bytes per rank:", c.NominalBytes(a2abench.Dispatch))
	// Output:
	// dispatch send: [100µs 120µs] slowest recv: 200µs
	// nominal dispatch bytes per rank: 7569408
}
