package ipc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/ipc"
)

// Two engines over ipc. They are in one process here; in two processes of
// one host the code is the same, with the descriptor carried between them
// as text. The target's memory comes from fabric.AllocHost: a memfd the
// writer maps on first use.
func Example() {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	writer, err := fabric.Open(ctx, fabric.Config{Transport: "ipc", Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer writer.Close(ctx)
	target, err := fabric.Open(ctx, fabric.Config{Transport: "ipc", Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer target.Close(ctx)

	src, _ := fabric.AllocHost(1 << 20)
	defer src.Free()
	dst, _ := fabric.AllocHost(1 << 20)
	defer dst.Free()
	copy(src.Bytes(), "hello over shared memory")

	srcReg, _ := writer.RegisterHost(src, rdma.AccessLocal)
	dstReg, _ := target.RegisterHost(dst, rdma.AccessRemoteWrite)
	desc, _ := dstReg.Descriptor()
	text, _ := desc.MarshalText()
	remote, _ := fabric.ParseDescriptor(string(text))

	arrived, _ := target.ImmCounter(7)
	done := fabric.NewTransfer()
	err = writer.SubmitSingle(fabric.SingleWrite{Src: srcReg, Length: 1 << 20, Dst: remote, Imm: fabric.Immediate(7)}, fabric.Notify(done))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("writer:", done.Wait(ctx))
	fmt.Println("target:", arrived.Wait(ctx, 1), string(dst.Bytes()[:24]))
	// Output:
	// writer: <nil>
	// target: <nil> hello over shared memory
}

// A write to a peer whose process is gone fails with rdma.ErrPeerLost.
func Example_peerLost() {
	d, _ := ipc.Open()
	defer d.Close()
	gone, _ := ipc.Open()
	addr := gone.Address()
	_ = gone.Close()
	_, err := d.ResolvePeer(addr)
	fmt.Println(errors.Is(err, rdma.ErrPeerLost))
	// Output:
	// true
}
