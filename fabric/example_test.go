package fabric_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/ferryrdma/ferry/fabric"
	_ "github.com/ferryrdma/ferry/memfabric" // the in-process "mem" provider
)

// Two engines in one process: the writer sends 1 MiB sharded over 2 NICs
// with an immediate; the receiver counts 2 immediates (one per shard) before
// it reads the bytes.
func Example() {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	writer, _ := fabric.Open(ctx, fabric.Config{Transport: "mem", NICs: 2, Logger: quiet})
	defer writer.Close(ctx)
	target, _ := fabric.Open(ctx, fabric.Config{Transport: "mem", NICs: 2, Logger: quiet})
	defer target.Close(ctx)

	src, _ := fabric.AllocHost(1 << 20)
	defer src.Free()
	dst, _ := fabric.AllocHost(1 << 20)
	defer dst.Free()
	copy(src.Bytes(), "hello, ferry")

	srcReg, _ := writer.RegisterHost(src, fabric.AccessLocal)
	dstReg, _ := target.RegisterHost(dst, fabric.AccessRemoteWrite)
	desc, _ := dstReg.Descriptor()
	text, _ := desc.MarshalText() // what a real peer receives out of band
	remote, _ := fabric.ParseDescriptor(string(text))

	arrived, _ := target.ImmCounter(42)
	done := fabric.NewTransfer()
	err := writer.SubmitSingle(fabric.SingleWrite{Src: srcReg, Length: 1 << 20, Dst: remote, Imm: fabric.Immediate(42)}, fabric.Notify(done))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("writer:", done.Wait(ctx))
	fmt.Println("target:", arrived.Wait(ctx, 2), string(dst.Bytes()[:12]))
	// Output:
	// writer: <nil>
	// target: <nil> hello, ferry
}

// Bad input is refused before anything is posted, with errors.Is-able
// sentinels.
func ExampleEngine_SubmitPaged() {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, _ := fabric.Open(ctx, fabric.Config{Transport: "mem", Logger: quiet})
	defer e.Close(ctx)
	buf, _ := fabric.AllocHost(4096)
	defer buf.Free()
	r, _ := e.RegisterHost(buf, fabric.AccessRemoteWrite)
	d, _ := r.Descriptor()
	err := e.SubmitPaged(fabric.PagedWrite{Src: r, SrcPages: []uint32{0, 1}, DstPages: []uint32{0}, Dst: d, Length: 8}, fabric.Completion{})
	fmt.Println(err)
	// Output:
	// paged write: 2 source pages but 1 destination pages: invalid argument
}
