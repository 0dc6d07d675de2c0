package netfault_test

import (
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/internal/netfault"
)

// Two namespaces joined by a relay that loses 1% of the packets and
// delays them by 5 ms ± 2 ms; programs run in either namespace with
// Namespace.Command. Needs root, so it is compiled, not run.
func ExampleNewLink() {
	l, err := netfault.NewLink("demo-", "fy0", 9000, "10.77.0.1", "10.77.0.2", netfault.Impairments{
		Seed: 1, Loss: 0.01, Delay: 5 * time.Millisecond, Jitter: 2 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	out, _ := l.A.Command("ping", "-c", "3", l.AddrB).CombinedOutput()
	fmt.Printf("%s", out)
	l.Relay.SetDown(true) // nothing passes until SetDown(false)
}
