package verbs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rdma"
)

// TestProbeOp: the heartbeat is a zero-length write with no key and no
// address. Posted before the peer is connected, it is held and goes out
// once the handshake ends; it completes without the target seeing
// anything; to a peer whose queue pairs are gone it fails, after the
// retries, with an error that blames the peer.
func TestProbeOp(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{}, 0)
	b := openT(t, infos[0], rdma.DomainOptions{}, 0)
	if _, ok := a.ProbeOp(7); ok {
		t.Fatal("heartbeat offered to a peer the domain does not know")
	}
	p := a.resolve(b)
	op, ok := a.ProbeOp(p)
	if !ok {
		t.Fatal("no heartbeat for a resolved peer")
	}
	if op.Length != 0 || op.Flags&rdma.WriteHasImm != 0 || op.RemoteKey != 0 || op.Remote != 0 || op.Peer != p {
		t.Fatalf("heartbeat %+v: want zero bytes, no immediate, no key", op)
	}
	op.Context = 1
	postAllWrites(t, a, []rdma.WriteOp{op}, b) // held: the handshake has only begun
	pump(t, 20*time.Second, func() bool { return len(a.byCtx) == 1 }, a, b)
	a.completedOK(1)
	for range 20 {
		b.poll()
		time.Sleep(time.Millisecond)
	}
	if len(b.events) != 0 {
		t.Fatalf("the target saw the heartbeat: %+v", b.events)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	op.Context = 2
	t0 := time.Now()
	postAllWrites(t, a, []rdma.WriteOp{op})
	pump(t, 20*time.Second, func() bool { return len(a.byCtx) == 2 }, a)
	ev := a.byCtx[2]
	err := a.DescribeError(ev)
	if ev.Errno == 0 || !errors.Is(err, rdma.ErrPeerLost) {
		t.Fatalf("heartbeat to a closed peer: errno %d, %v; want an error wrapping ErrPeerLost", ev.Errno, err)
	}
	t.Logf("heartbeat to a closed peer failed after %v: %v", time.Since(t0).Round(time.Millisecond), err)
}

// openEngineOn opens an engine on the one verbs domain info, with
// heartbeats every interval.
func openEngineOn(t testing.TB, info rdma.DomainInfo, interval time.Duration) *fabric.Engine {
	t.Helper()
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: provName, LivenessInterval: interval,
		Groups: []fabric.GroupSpec{{Device: rdma.HostDevice, Domains: []rdma.DomainInfo{info}}}})
	if err != nil {
		t.Fatalf("open engine on %s: %v", info.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("close engine: %v", err)
		}
	})
	return e
}

// lostPeers collects OnPeerLost callbacks.
func lostPeers(e *fabric.Engine) <-chan *fabric.PeerError {
	ch := make(chan *fabric.PeerError, 16)
	e.OnPeerLost(func(pe *fabric.PeerError) {
		select {
		case ch <- pe:
		default:
		}
	})
	return ch
}

// TestWatchPeerAlive: a watched peer that nothing else is sent to gets a
// heartbeat every LivenessInterval (the first one connects the two), each
// completes, the peer is never declared lost, and the target sees none of
// them. Once the watch stops, so do the heartbeats.
func TestWatchPeerAlive(t *testing.T) {
	infos := requireDevices(t, 1)
	const interval = 50 * time.Millisecond
	a := openEngineOn(t, infos[0], interval)
	b := openEngineOn(t, infos[0], interval)
	lost := lostPeers(a)
	stop, err := a.WatchPeer(b.MainAddress())
	if err != nil {
		t.Fatal(err)
	}
	// The first heartbeat waits for the handshake; count from its end.
	deadline := time.Now().Add(20 * time.Second)
	for a.Stats().Domains[0].Completions == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat completed within 20 s: %+v", a.Stats())
		}
		time.Sleep(interval / 5)
	}
	const watch = 40 * interval
	first := a.Stats().Domains[0].Completions
	for end := time.Now().Add(watch); time.Now().Before(end); time.Sleep(interval / 2) {
		if err := a.PeerStatus(b.MainAddress()); err != nil {
			t.Fatalf("live peer declared lost: %v", err)
		}
	}
	st := a.Stats()
	done := st.Domains[0].Completions - first
	t.Logf("%d heartbeats completed in %v at a %v interval", done, watch, interval)
	// 40 intervals; a loaded machine stretches the worker's liveness pass,
	// so a quarter of them is the bound.
	if done < 10 {
		t.Fatalf("%d heartbeats completed in %v at a %v interval, want at least 10", done, watch, interval)
	}
	if st.Domains[0].Errors != 0 || st.PeersLost != 0 || st.Unmatched != 0 {
		t.Fatalf("heartbeats to a live peer: %+v", st)
	}
	select {
	case pe := <-lost:
		t.Fatalf("OnPeerLost for a live peer: %v", pe)
	default:
	}
	if bs := b.Stats(); bs.Domains[0].Completions != 0 || bs.Domains[0].Imms != 0 {
		t.Fatalf("the target saw heartbeats: %+v", bs.Domains[0])
	}

	stop()
	time.Sleep(4 * interval) // one may still be in flight
	n := a.Stats().Domains[0].Completions
	time.Sleep(10 * interval)
	if m := a.Stats().Domains[0].Completions; m != n {
		t.Fatalf("%d heartbeats after the watch stopped", m-n)
	}
}

const watchChildEnv = "FERRY_VERBS_WATCH_CHILD"

// TestWatchPeerKilled: a peer process that dies (SIGKILL) while nothing is
// sent to it is declared lost through the heartbeats alone: each is an RC
// write that the dead peer's HCA no longer acknowledges, so it fails with
// retry exceeded, which blames the peer. A round trip first proves the
// connection up.
func TestWatchPeerKilled(t *testing.T) {
	infos := requireDevices(t, 1)
	const interval = 100 * time.Millisecond
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchPeerKilledChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), watchChildEnv+"="+infos[0].Name)
	stdin, err := cmd.StdinPipe() // the child lives until it is killed or this closes
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr, childOut bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	r := bufio.NewReader(io.TeeReader(stdout, &childOut))
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			<-exited
		}
	}()
	e := openEngineOn(t, infos[0], interval)
	lost := lostPeers(e)
	pongs := make(chan string, 4)
	if err := e.BouncingRecvs(4, 256, func(b []byte) { pongs <- string(b) }, func(err error) {
		if !errors.Is(err, rdma.ErrClosed) { // Close fails the receives still posted
			t.Errorf("receive: %v", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	child, err := readAddrLine(r, "WATCHCHILD")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	go func() { io.Copy(io.Discard, r); exited <- cmd.Wait() }()
	stop, err := e.WatchPeer(child)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	sent := make(chan error, 1)
	if err := e.Send(context.Background(), child, []byte("ping "+e.MainAddress().String()),
		fabric.OnDone(func(err error) { sent <- err })); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-pongs:
		if p != "pong" {
			t.Fatalf("child answered %q", p)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no answer from the child within 20 s\n%s%s", childOut.String(), stderr.String())
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	// Idle now: only heartbeats go to the child, and they complete.
	c0 := e.Stats().Domains[0].Completions
	time.Sleep(10 * interval)
	if err := e.PeerStatus(child); err != nil {
		t.Fatalf("live child declared lost: %v", err)
	}
	if e.Stats().Domains[0].Completions == c0 {
		t.Fatalf("no heartbeat completed in %v", 10*interval)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	killed = true
	<-exited
	var pe *fabric.PeerError
	select {
	case pe = <-lost:
	case <-time.After(20 * time.Second):
		t.Fatalf("child killed 20 s ago, not declared lost; stats %+v", e.Stats())
	}
	took := time.Since(t0)
	t.Logf("killed child declared lost after %v: %v", took.Round(time.Millisecond), pe)
	if pe.Peer != child || !errors.Is(pe, rdma.ErrPeerLost) {
		t.Fatalf("lost %v, want %v (ErrPeerLost)", pe, child)
	}
	if err := e.PeerStatus(child); !errors.Is(err, rdma.ErrPeerLost) {
		t.Fatalf("PeerStatus of the killed child: %v", err)
	}
	// The evidence is a heartbeat's error completion (retries exceeded),
	// not the engine's deadline for an unanswered heartbeat.
	var perr *rdma.ProviderError
	if !errors.As(pe, &perr) || perr.Errno != int(syscall.EHOSTUNREACH) {
		t.Fatalf("lost for %v, want a completion with retries exceeded (EHOSTUNREACH)", pe.Cause)
	}
}

// readAddrLine scans r for "<tag> <address>", skipping other output.
func readAddrLine(r *bufio.Reader, tag string) (rdma.Address, error) {
	for {
		s, err := r.ReadString('\n')
		if err != nil {
			return rdma.Address{}, fmt.Errorf("waiting for %s: %w", tag, err)
		}
		if f := strings.Fields(s); len(f) == 2 && f[0] == tag {
			return rdma.ParseAddress(f[1])
		}
	}
}

// TestWatchPeerKilledChild is the child's half of TestWatchPeerKilled: it
// answers "ping <addr>" with "pong" to addr, then waits to be killed.
func TestWatchPeerKilledChild(t *testing.T) {
	dev := os.Getenv(watchChildEnv)
	if dev == "" {
		t.Skip("runs as the child of TestWatchPeerKilled")
	}
	e := openEngineOn(t, rdma.DomainInfo{Name: dev}, 100*time.Millisecond)
	err := e.BouncingRecvs(4, 256, func(b []byte) {
		to, ok := strings.CutPrefix(string(b), "ping ")
		if !ok {
			return
		}
		addr, err := rdma.ParseAddress(to)
		if err == nil {
			err = e.Send(context.Background(), addr, []byte("pong"), fabric.Completion{})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: answer:", err)
		}
	}, func(err error) { fmt.Fprintln(os.Stderr, "child: receive:", err) })
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("WATCHCHILD %s\n", e.MainAddress())
	io.Copy(io.Discard, os.Stdin)
}
