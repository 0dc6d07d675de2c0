package tests

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// runStaleTarget opens an engine (FERRY_TEST_TRANSPORT, FERRY_TEST_NODE,
// FERRY_TEST_PORT pinning the listening port), prints a descriptor of a
// remote-writable buffer and waits to be killed.
func runStaleTarget() error {
	port, _ := strconv.Atoi(os.Getenv("FERRY_TEST_PORT"))
	return runKilledTarget(fabric.Config{Transport: os.Getenv("FERRY_TEST_TRANSPORT"),
		Node: os.Getenv("FERRY_TEST_NODE"), ListenPort: port}, 1<<20)
}

// startStaleTarget starts a target process and returns its descriptor.
func startStaleTarget(t *testing.T, transport, node string, port int) (*testutil.Child, fabric.Descriptor) {
	t.Helper()
	child := testutil.Spawn(t, "stale-target", testutil.SpawnOptions{
		Env:   []string{"FERRY_TEST_TRANSPORT=" + transport, "FERRY_TEST_NODE=" + node, "FERRY_TEST_PORT=" + strconv.Itoa(port)},
		Stdin: true, Lines: true,
	})
	line := child.ReadLine(60 * time.Second)
	desc, err := fabric.ParseDescriptor(strings.TrimPrefix(line, "DESC "))
	require.NoError(t, err, "target said %q", line)
	return child, desc
}

// freePort finds a tcp port nothing listens on (nor binds in udp).
func freePort(t *testing.T) int {
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeUntilStale writes through desc until a write fails, and returns how
// long that took from the first write and the error. Writes that completed
// before it are logged: on tcp a writer that was connected to the old
// process can see some complete before its liveness check answers.
func writeUntilStale(t *testing.T, e *fabric.Engine, src *fabric.MemoryRegion, desc fabric.Descriptor) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	ok := 0
	defer func() {
		if ok > 0 {
			t.Logf("%d writes through the stale descriptor completed before the first failure", ok)
		}
	}()
	for time.Since(start) < 30*time.Second {
		tr := fabric.NewTransfer()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := e.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: desc, Imm: fabric.Immediate(7)}, fabric.Notify(tr))
		if err == nil {
			err = tr.Wait(ctx)
		}
		cancel()
		if err != nil {
			return time.Since(start), err
		}
		ok++
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start), nil
}

// TestStaleDescriptorAfterRestart: a target process is killed and started
// again (on tcp at the same pinned address); a writer still holding the
// first target's descriptor gets ErrStaleDescriptor, and the new target's
// descriptor works.
func TestStaleDescriptorAfterRestart(t *testing.T) {
	cases := []struct{ transport, node string }{
		{"ipc", ""},
		{"shm", ""},
		{"tcp;ofi_rxm", "127.0.0.1"},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.transport, ";", "_"), func(t *testing.T) {
			cfg := fabric.Config{Transport: c.transport, Node: c.node, HandshakeTimeout: 2 * time.Second}
			e, err := fabric.Open(context.Background(), cfg)
			if errors.Is(err, fabric.ErrNotSupported) || errors.Is(err, fabric.ErrUnknownProvider) {
				testutil.Skip(t, c.transport, "%s: %v", c.transport, err)
			}
			require.NoError(t, err)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = e.Close(ctx)
			})
			buf, err := fabric.AllocHost(1 << 20)
			require.NoError(t, err)
			t.Cleanup(func() { _ = buf.Free() })
			src, err := e.RegisterHost(buf, fabric.AccessLocal)
			require.NoError(t, err)

			port := 0
			if strings.HasPrefix(c.transport, "tcp") {
				port = freePort(t)
			}
			first, oldDesc := startStaleTarget(t, c.transport, c.node, port)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tr := fabric.NewTransfer()
			require.NoError(t, e.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: oldDesc}, fabric.Notify(tr)))
			require.NoError(t, tr.Wait(ctx), "the first target is alive")

			first.Kill()
			_ = first.Wait()
			_, newDesc := startStaleTarget(t, c.transport, c.node, port)
			if port != 0 {
				require.Equal(t, oldDesc.NICs[0].Addr.Raw(), newDesc.NICs[0].Addr.Raw(), "the restarted target took the old address")
			}
			require.NotEqual(t, oldDesc.NICs[0].Addr, newDesc.NICs[0].Addr)

			took, err := writeUntilStale(t, e, src, oldDesc)
			require.Error(t, err, "a write through the old descriptor failed")
			require.ErrorIs(t, err, fabric.ErrStaleDescriptor)
			t.Logf("%s: stale error after %v: %v", c.transport, took, err)

			tr = fabric.NewTransfer()
			require.NoError(t, e.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: newDesc}, fabric.Notify(tr)))
			require.NoError(t, tr.Wait(ctx), "the new target's descriptor works")

			// A writer that never knew the first target is refused at
			// its first contact (on tcp: the restarted target answers
			// with its own incarnation).
			e2, err := fabric.Open(context.Background(), cfg)
			require.NoError(t, err)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = e2.Close(ctx)
			})
			src2, err := e2.RegisterHost(buf, fabric.AccessLocal)
			require.NoError(t, err)
			took, err = writeUntilStale(t, e2, src2, oldDesc)
			require.ErrorIs(t, err, fabric.ErrStaleDescriptor)
			t.Logf("%s: fresh writer: stale error after %v: %v", c.transport, took, err)
		})
	}
}

// TestStaleDescriptorMem: on the in-process provider, an engine closed and
// replaced by another leaves its descriptors stale.
func TestStaleDescriptorMem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func() *fabric.Engine {
		e, err := fabric.Open(ctx, fabric.Config{Transport: "mem"})
		require.NoError(t, err)
		return e
	}
	w := open()
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	buf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	t.Cleanup(func() { _ = buf.Free() })
	src, err := w.RegisterHost(buf, fabric.AccessLocal)
	require.NoError(t, err)

	target := func(e *fabric.Engine) fabric.Descriptor {
		b, err := fabric.AllocHost(1 << 20)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Free() })
		r, err := e.RegisterHost(b, fabric.AccessRemoteWrite)
		require.NoError(t, err)
		d, err := r.Descriptor()
		require.NoError(t, err)
		return d
	}
	t1 := open()
	oldDesc := target(t1)
	tr := fabric.NewTransfer()
	require.NoError(t, w.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: oldDesc}, fabric.Notify(tr)))
	require.NoError(t, tr.Wait(ctx))
	require.NoError(t, t1.Close(ctx))
	t2 := open()
	t.Cleanup(func() { _ = t2.Close(context.Background()) })
	newDesc := target(t2)

	took, err := writeUntilStale(t, w, src, oldDesc)
	require.ErrorIs(t, err, fabric.ErrStaleDescriptor)
	t.Logf("mem: stale error after %v: %v", took, err)

	// A writer that never saw the old engine is refused at connect.
	w2 := open()
	t.Cleanup(func() { _ = w2.Close(context.Background()) })
	src2, err := w2.RegisterHost(buf, fabric.AccessLocal)
	require.NoError(t, err)
	_, err = writeUntilStale(t, w2, src2, oldDesc)
	require.ErrorIs(t, err, fabric.ErrStaleDescriptor)

	tr = fabric.NewTransfer()
	require.NoError(t, w.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: newDesc}, fabric.Notify(tr)))
	require.NoError(t, tr.Wait(ctx))
}

// TestStaleEncodings: addresses carry their incarnation through both
// forms, and addresses and descriptors encoded before incarnations (version
// 1) are refused with a message saying so, not misread.
func TestStaleEncodings(t *testing.T) {
	a, err := rdma.NewAddress([]byte{1, 2, 3, 4}, 0x1122334455667788)
	require.NoError(t, err)
	back, err := fabric.ParseAddress(a.String())
	require.NoError(t, err)
	require.Equal(t, a, back)
	require.Equal(t, uint64(0x1122334455667788), back.Incarnation())
	other, _ := rdma.NewAddress([]byte{1, 2, 3, 4}, 0x1122334455667789)
	require.NotEqual(t, a, other, "another incarnation at the same endpoint is another address")

	_, err = fabric.ParseAddress("010401020304")
	require.ErrorIs(t, err, fabric.ErrBadEncoding)
	require.ErrorContains(t, err, "version 1")

	// A version 1 descriptor: magic, version, base, length, one NIC (mode,
	// key, version 1 address).
	v1 := []byte{0xfd, 1}
	v1 = append(v1, make([]byte, 16)...)
	v1 = append(v1, 1, byte(fabric.AddrVirtual))
	v1 = append(v1, make([]byte, 8)...)
	v1 = append(v1, 1, 4, 1, 2, 3, 4)
	var d fabric.Descriptor
	err = d.UnmarshalBinary(v1)
	require.ErrorIs(t, err, fabric.ErrBadEncoding)
	require.ErrorContains(t, err, "version 1")
}

// TestStaleDirectoryRegion: a region whose descriptor names an earlier
// engine at the endpoints its entry now holds is refused with
// ErrStaleDescriptor when it is read back against that entry.
func TestStaleDirectoryRegion(t *testing.T) {
	addr := func(inc uint64) fabric.Address {
		a, err := rdma.NewAddress([]byte{2, 0, 0x13, 0x88, 127, 0, 0, 1}, inc)
		require.NoError(t, err)
		return a
	}
	oldEntry := directory.Entry{Name: "prefill-0", NICs: 1, Addrs: []fabric.Address{addr(1)}}
	newEntry := directory.Entry{Name: "prefill-0", NICs: 1, Addrs: []fabric.Address{addr(2)}}
	r := directory.Region{Engine: "prefill-0", Name: "kv", Desc: fabric.Descriptor{Base: 0x1000, Length: 4096,
		NICs: []fabric.RemoteKey{{Addr: addr(1), Key: 1, Mode: fabric.AddrOffset}}}}
	b, err := directory.EncodeRegion(r, oldEntry)
	require.NoError(t, err)
	_, err = directory.DecodeRegion("prefill-0/kv", b, &oldEntry)
	require.NoError(t, err)
	_, err = directory.DecodeRegion("prefill-0/kv", b, &newEntry)
	require.ErrorIs(t, err, fabric.ErrStaleDescriptor)
}

// TestListenPortValidated: a ListenPort outside the port range is refused.
func TestListenPortValidated(t *testing.T) {
	for _, p := range []int{-1, 70000} {
		_, err := fabric.Open(context.Background(), fabric.Config{Transport: "mem", ListenPort: p})
		require.ErrorIs(t, err, fabric.ErrInvalidArgument, "ListenPort %d", p)
	}
}
