package cudabackend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/a2a/internal/nodeshare"
	"github.com/ferryrdma/ferry/fabric"
)

// memfdDevice exports sealed memfds (fabric.AllocHost) and imports them
// with fabric.MapHostFile: the emulator's way, here so that the protocol
// is tested with real descriptors without building kernels.
type memfdDevice struct{ Device }

type memfdMemory struct{ b *fabric.HostBuffer }

func (m memfdMemory) Addr() uint64  { return uint64(m.b.Addr()) }
func (m memfdMemory) Bytes() []byte { return m.b.Bytes() }
func (m memfdMemory) Free() error   { return m.b.Free() }
func (m memfdMemory) Size() int     { return m.b.Len() }
func (m memfdMemory) Export() (int, error) {
	f, err := fabric.HostMemoryFile(m.b.Addr(), uint64(m.b.Len()))
	return f.FD, err
}

func (memfdDevice) AllocExportable(n int) (ExportableMemory, error) {
	b, err := fabric.AllocHost(n)
	if err != nil {
		return nil, err
	}
	if !b.Shareable() {
		_ = b.Free()
		return nil, errors.New("no memfd here")
	}
	return memfdMemory{b}, nil
}

func (memfdDevice) Import(fd, size int) (Memory, error) {
	b, err := fabric.MapHostFile(fd, size)
	if err != nil {
		return nil, err
	}
	return memfdMemory{b}, nil
}

// hostView is the memory at a host address (memfd device addresses are).
func hostView(addr uint64, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(addr))), n)
}

// resources counts this process's descriptors and memfd mappings, once
// the network poller (whose descriptors live as long as the process) is
// up.
func resources(t *testing.T) (fds, maps int) {
	t.Helper()
	if ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@ferry-a2a-test-poller-" + strconv.Itoa(os.Getpid()), Net: "unix"}); err == nil {
		ln.Close()
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return len(ents), strings.Count(string(b), "ferry-host")
}

func checkReleased(t *testing.T, fds, maps int) {
	t.Helper()
	if f, m := resources(t); f > fds || m > maps {
		t.Fatalf("%d descriptors and %d memfd mappings after closing, %d and %d before", f, m, fds, maps)
	}
}

var procCfg = a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 4, Hidden: 8, DispatchType: a2a.BF16,
	CombineType: a2a.BF16, Experts: 4, ExpertsPerToken: 2}

// TestProcessNodeShares: four ranks in two domains of two (goroutines, real
// sockets and descriptors): every rank sees its node peer's buffers through
// its own mappings, not its other domain's; closing leaves nothing open.
func TestProcessNodeShares(t *testing.T) {
	fds, maps := resources(t)
	const sendBytes, recvBytes = 3 << 12, 5000
	W, S := procCfg.WorldSize, procCfg.NVLinkSize
	x := a2atest.NewExchange(W)
	nodes := make([]*ProcessNode, W)
	send, recv := make([][]uint64, W), make([][]uint64, W)
	errs := make([]error, W)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range W {
		cfg := procCfg
		cfg.Rank = r
		n, err := NewProcessNode(cfg, x.Member(r), memfdDevice{})
		if err != nil {
			t.Fatal(err)
		}
		nodes[r] = n
		wg.Go(func() { send[r], recv[r], errs[r] = n.Share(ctx, sendBytes, recvBytes) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for r := range W {
		me, base := r%S, r-r%S
		if len(send[r]) != S || len(recv[r]) != S {
			t.Fatalf("rank %d: %d and %d buffers for a node of %d", r, len(send[r]), len(recv[r]), S)
		}
		s, rv := nodes[r].Buffers()
		if send[r][me] != s.Addr() || recv[r][me] != rv.Addr() {
			t.Fatalf("rank %d: own buffers not at their own addresses", r)
		}
		// Rank r writes into every node peer's receive buffer through its
		// mapping and reads the peer's send buffer.
		for i := range S {
			if i == me {
				continue
			}
			if send[r][i] == send[base+i][i] {
				t.Fatalf("rank %d maps node rank %d's send buffer at the owner's address", r, i)
			}
			ps, _ := nodes[base+i].Buffers()
			ps.Bytes()[sendBytes-1] = byte(base + i)
			if got := hostView(send[r][i], sendBytes)[sendBytes-1]; got != byte(base+i) {
				t.Fatalf("rank %d sees %d in node rank %d's send buffer", r, got, i)
			}
			hostView(recv[r][i], recvBytes)[recvBytes-1-me] = byte(0x40 + r)
		}
	}
	for r := range W {
		me, base := r%S, r-r%S
		_, rv := nodes[r].Buffers()
		for i := range S {
			if want := byte(0x40 + base + i); i != me && rv.Bytes()[recvBytes-1-i] != want {
				t.Fatalf("rank %d's receive buffer holds %#x from node rank %d, want %#x", r, rv.Bytes()[recvBytes-1-i], i, want)
			}
		}
	}
	if _, _, err := nodes[0].Share(ctx, sendBytes, recvBytes); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("second share: %v", err)
	}
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		if err := n.Close(); err != nil {
			t.Fatalf("second close: %v", err)
		}
	}
	checkReleased(t, fds, maps)
}

// fakePeer plays node rank 1 of a two-rank world against a real rank 0:
// it listens and joins the name exchange, accepts rank 0's offer and
// holds it unanswered (until the test ends), and returns rank 0's name.
func fakePeer(t *testing.T, x *a2atest.Exchange, ctx context.Context) (rank0 string) {
	t.Helper()
	// The pid keeps concurrent runs of this test (two checkouts, -count
	// in parallel packages) off each other's abstract socket name.
	name := fmt.Sprintf("@ferry-a2a-node-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: name, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	var held []*net.UnixConn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	names, err := x.Member(1).AllGather(ctx, []byte(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(names[0])
}

// sendRaw connects to name, sends msg with fds, and returns the answer
// byte (-1 when the connection closed without one).
func sendRaw(t *testing.T, name string, msg []byte, fds ...int) int {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: name, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.WriteMsgUnix(msg, oob, nil); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 1)
	if n, err := c.Read(b); err != nil || n != 1 {
		return -1
	}
	return int(b[0])
}

// TestProcessNodeRefusesBadOffers: rank 0 refuses (answers so, fails with
// ErrInvalidArgument, closes what it received) an offer that is malformed,
// carries the wrong number of descriptors, comes from itself, or is for
// buffers of other sizes; and it times out, naming the node rank, when a
// peer never offers.
func TestProcessNodeRefusesBadOffers(t *testing.T) {
	cfg := procCfg
	cfg.WorldSize = 2
	const sendBytes, recvBytes = 8192, 4096
	peer := nodeshare.Offer{Index: 1, Size: 2, Rank: 1, Asked: [2]uint64{sendBytes, recvBytes},
		Exported: [2]uint64{sendBytes, recvBytes}}
	fds, maps := resources(t)
	// Real memfds for the fake peer to pass.
	dev := memfdDevice{}
	a, err := dev.AllocExportable(sendBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	fa, err := a.Export()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fa)
	mod := func(f func(o *nodeshare.Offer)) []byte { o := peer; f(&o); return o.Encode() }
	cases := []struct {
		name string
		msg  []byte
		fds  []int
	}{
		{"malformed", []byte("hello"), []int{fa, fa}},
		{"one descriptor", peer.Encode(), []int{fa}},
		{"three descriptors", peer.Encode(), []int{fa, fa, fa}},
		{"no descriptors", peer.Encode(), nil},
		{"from itself", mod(func(o *nodeshare.Offer) { o.Index, o.Rank = 0, 0 }), []int{fa, fa}},
		{"other world rank", mod(func(o *nodeshare.Offer) { o.Rank = 3 }), []int{fa, fa}},
		{"other config", mod(func(o *nodeshare.Offer) { o.Asked[1] = 2 * recvBytes }), []int{fa, fa}},
		{"short export", mod(func(o *nodeshare.Offer) { o.Exported[0] = sendBytes - 1 }), []int{fa, fa}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			x := a2atest.NewExchange(2)
			c := cfg
			n, err := NewProcessNode(c, x.Member(0), dev)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { _, _, err := n.Share(ctx, sendBytes, recvBytes); done <- err }()
			name := fakePeer(t, x, ctx)
			if ans := sendRaw(t, name, tc.msg, tc.fds...); ans != nodeshare.AckRefused {
				t.Fatalf("answer %d, want %d (refused)", ans, nodeshare.AckRefused)
			}
			if err := <-done; !errors.Is(err, a2a.ErrInvalidArgument) {
				t.Fatalf("share: %v, want ErrInvalidArgument", err)
			}
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("peer never offers", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		x := a2atest.NewExchange(2)
		n, err := NewProcessNode(cfg, x.Member(0), dev)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, _, err := n.Share(ctx, sendBytes, recvBytes); done <- err }()
		fakePeer(t, x, ctx)
		err = <-done
		if !errors.Is(err, a2a.ErrTimeout) || !strings.Contains(err.Error(), "node rank 1") {
			t.Fatalf("share: %v, want ErrTimeout naming node rank 1", err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	})
	_ = a.Free()
	_ = unix.Close(fa)
	checkReleased(t, fds, maps)
}
