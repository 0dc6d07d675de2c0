package fabrictest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/fabrictest"
)

// A unit test of code that writes through the engine can run on the
// in-process transport, and inject a failure to check its error path.
func Example() {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	writer, err := fabric.Open(ctx, fabric.Config{Transport: fabrictest.Mem, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer writer.Close(ctx)
	target, err := fabric.Open(ctx, fabric.Config{Transport: fabrictest.Mem, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer target.Close(ctx)
	buf, _ := fabric.AllocHost(4096)
	defer buf.Free()
	src, _ := writer.RegisterHost(buf, fabric.AccessLocal)
	dst, _ := target.RegisterHost(buf, fabric.AccessRemoteWrite)
	desc, _ := dst.Descriptor()

	// The writer's NIC fails its next write completion with EIO.
	_ = fabrictest.Inject(writer.MainAddress(), fabrictest.Faults{FailWrites: 1, Errno: 5})
	t := fabric.NewTransfer()
	if err := writer.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: desc}, fabric.Notify(t)); err != nil {
		fmt.Println(err)
		return
	}
	err = t.Wait(ctx)
	var pe *fabric.ProviderError
	fmt.Println("failed:", err != nil, "provider error:", errors.As(err, &pe))
	// Output:
	// failed: true provider error: true
}
