package fabrictest

import (
	"errors"
	"testing"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// FeatureOf names the FERRY_TEST_REQUIRE feature a transport needs:
// "verbs" and "ipc" for ferry's providers of those names, "libfabric" for
// every libfabric name, "" for the in-process transports, which are always
// there.
func FeatureOf(transport string) string {
	switch transport {
	case Mem, Null:
		return ""
	case "verbs", "ipc":
		return transport
	}
	return "libfabric"
}

// RequireTransport returns when transport can open a domain here (node as
// in fabric.Config.Node), skips the test saying why when it cannot, and
// fails it instead when FERRY_TEST_REQUIRE lists the transport's feature
// (FeatureOf). An unknown transport name, or any other error, fails.
func RequireTransport(tb testing.TB, transport, node string) {
	tb.Helper()
	_, err := fabric.ChooseTransport(transport, fabric.DomainOptions{Node: node})
	if err == nil {
		return
	}
	if !errors.Is(err, fabric.ErrNotSupported) {
		tb.Fatalf("transport %s: %v", transport, err)
		return
	}
	testutil.Skip(tb, FeatureOf(transport), "transport %s cannot run here: %v", transport, err)
}
