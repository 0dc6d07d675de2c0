package ipc_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rdma"
	_ "github.com/ferryrdma/ferry/memfabric"
)

// TestMapPeer: the engine lends ipc's mapping of a target region once a
// write mapped it; bytes stored there and a zero-byte write's immediate
// reach the target in that order; after the target unregisters the region
// the mapping can no longer be held; a transport that lends none says so.
func TestMapPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func(transport string) *fabric.Engine {
		e, err := fabric.Open(ctx, fabric.Config{Transport: transport, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close(context.Background()) })
		return e
	}
	writer, target := open("ipc"), open("ipc")
	src, err := fabric.AllocHost(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Free()
	dst, err := fabric.AllocHost(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Free()
	srcReg, err := writer.RegisterHost(src, rdma.AccessLocal)
	if err != nil {
		t.Fatal(err)
	}
	dstReg, err := target.RegisterHost(dst, rdma.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := dstReg.Descriptor()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := writer.MapPeer(fabric.HostDevice, desc); ok || err != nil {
		t.Fatalf("before any write: lent %v, err %v; want nothing lent yet", ok, err)
	}
	write := func(n uint64) {
		t.Helper()
		done := fabric.NewTransfer()
		if err := writer.SubmitSingle(fabric.SingleWrite{Src: srcReg, Length: n, Dst: desc, Imm: fabric.Immediate(7)}, fabric.Notify(done)); err != nil {
			t.Fatal(err)
		}
		if err := done.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	arrived, err := target.ImmCounter(7)
	if err != nil {
		t.Fatal(err)
	}
	write(4096)
	if err := arrived.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	m, ok, err := writer.MapPeer(fabric.HostDevice, desc)
	if !ok || err != nil {
		t.Fatalf("after a write: lent %v, err %v; want the mapping", ok, err)
	}
	b, ok := m.Acquire()
	if !ok || uint64(len(b)) < desc.Length {
		t.Fatalf("acquire: %v, %d bytes; want the region's %d", ok, len(b), desc.Length)
	}
	copy(b[60000:], "stored directly")
	m.Release()
	write(0) // the immediate only
	if err := arrived.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := string(dst.Bytes()[60000 : 60000+15]); got != "stored directly" {
		t.Fatalf("target reads %q", got)
	}
	if err := target.Unregister(dstReg); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Acquire(); ok {
		m.Release()
		t.Fatal("the mapping of an unregistered region can still be held")
	}
	if _, ok, err := writer.MapPeer(fabric.HostDevice, desc); ok || err != nil {
		t.Fatalf("after unregister: lent %v, err %v; want nothing", ok, err)
	}

	mem := open("mem")
	if _, _, err := mem.MapPeer(fabric.HostDevice, desc); !errors.Is(err, fabric.ErrNotSupported) {
		t.Fatalf("mem: %v, want ErrNotSupported", err)
	}
}
