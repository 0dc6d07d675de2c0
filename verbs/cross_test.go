package verbs

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// requireCross returns two devices whose traffic crosses the IP stack
// (FERRY_VERBS_CROSS, set by make test-verbs to rxe devices on the two ends
// of a veth pair with different MTUs).
func requireCross(t *testing.T) [2]rdma.DomainInfo {
	t.Helper()
	names := strings.Split(os.Getenv("FERRY_VERBS_CROSS"), ",")
	msg := "needs FERRY_VERBS_CROSS=devA,devB: two verbs devices on different netdevs of one routed network (make test-verbs sets it up)"
	if len(names) != 2 {
		testutil.Skip(t, "verbs", "%s", msg)
	}
	infos, err := Provider{}.Domains("verbs", rdma.DomainOptions{})
	if err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
	var out [2]rdma.DomainInfo
	for i, n := range names {
		k := slices.IndexFunc(infos, func(d rdma.DomainInfo) bool { return d.Name == n })
		if k < 0 {
			t.Fatalf("device %s of FERRY_VERBS_CROSS not found", n)
		}
		out[i] = infos[k]
	}
	return out
}

// TestCrossDevice writes both ways between two devices whose packets go
// through UDP/IP and a real (virtual) link, as between hosts, and whose
// ports have different active MTUs: messages larger than the smaller MTU
// only arrive if the path MTU was negotiated down to it.
func TestCrossDevice(t *testing.T) {
	devs := requireCross(t)
	const size = 1 << 20
	a := openT(t, devs[0], rdma.DomainOptions{}, 2*size)
	b := openT(t, devs[1], rdma.DomainOptions{}, 2*size)
	if a.path.mtu == b.path.mtu {
		t.Logf("both ports at MTU %d: the path-MTU half of this test is vacuous", a.path.mtu.Bytes())
	}
	pa, pb := a.resolve(b), b.resolve(a)
	fill(a.buf[:size], 1)
	fill(b.buf[:size], 2)
	var wa, wb []rdma.WriteOp
	for i, n := range []uint64{1, 4096, 65536, size - 65536 - 4096 - 1} {
		off := uint64(0)
		for _, m := range wa {
			off += m.Length
		}
		wa = append(wa, rdma.WriteOp{Local: uint64(addrOf(a.buf)) + off, Length: n, LocalDesc: a.keys.Local,
			Remote: uint64(addrOf(b.buf)) + size + off, RemoteKey: b.keys.Remote, Peer: pa, Context: uint64(i), Imm: uint32(i), Flags: rdma.WriteHasImm})
		wb = append(wb, rdma.WriteOp{Local: uint64(addrOf(b.buf)) + off, Length: n, LocalDesc: b.keys.Local,
			Remote: uint64(addrOf(a.buf)) + size + off, RemoteKey: a.keys.Remote, Peer: pb, Context: uint64(i), Imm: uint32(i), Flags: rdma.WriteHasImm})
	}
	postAllWrites(t, a, wa, b)
	postAllWrites(t, b, wb, a)
	pump(t, 60*time.Second, func() bool {
		return len(a.byCtx) == len(wa) && len(b.byCtx) == len(wb) && len(a.imms) == len(wb) && len(b.imms) == len(wa)
	}, a, b)
	for i := range wa {
		a.completedOK(uint64(i))
		b.completedOK(uint64(i))
	}
	if !bytes.Equal(a.buf[:size], b.buf[size:]) || !bytes.Equal(b.buf[:size], a.buf[size:]) {
		t.Fatal("data differs across devices")
	}
	t.Logf("%s (mtu %d) <-> %s (mtu %d): path mtu %d", devs[0].Name, a.path.mtu.Bytes(), devs[1].Name,
		b.path.mtu.Bytes(), min(a.path.mtu, b.path.mtu).Bytes())
}
