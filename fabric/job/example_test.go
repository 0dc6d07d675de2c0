package job_test

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
	_ "github.com/ferryrdma/ferry/providers" // the transports the program may run on
)

// A two-rank program: each rank registers a buffer, learns the other's
// descriptor and writes its rank number into it; the receiver counts the
// immediate and checks the byte. main would call this with os.Args[1:] and
// exit with job.ExitCode(...).
func Example() {
	run := func(ctx context.Context, args []string) error {
		var o job.Options
		fs := flag.NewFlagSet("ring", flag.ContinueOnError)
		o.Bind(fs)
		if err := o.Parse(fs, args); err != nil {
			return err
		}
		return job.Run(ctx, o, 2, func(ctx context.Context, r *job.Rank) error {
			buf, err := r.Alloc(4096, fabric.AccessRemoteWrite)
			if err != nil {
				return err
			}
			descs, err := job.Gather(ctx, r, buf.Desc)
			if err != nil {
				return err
			}
			arrived, err := r.Engine.ImmCounter(1)
			if err != nil {
				return err
			}
			buf.Bytes()[0] = byte(r.ID)
			done := fabric.NewTransfer()
			peer := 1 - r.ID
			if err := r.Engine.SubmitSingle(fabric.SingleWrite{Src: buf.Region, Length: 1, Dst: descs[peer], DstOffset: 1,
				Imm: fabric.Immediate(1)}, fabric.Notify(done)); err != nil {
				return err
			}
			if err := done.Wait(ctx); err != nil {
				return err
			}
			if err := arrived.Wait(ctx, 1); err != nil {
				return err
			}
			if got := buf.Bytes()[1]; got != byte(peer) {
				return job.Mismatch("rank %d read %d, want %d", r.ID, got, peer)
			}
			return r.Emit("ring", nil, map[string]int{"bytes": 1})
		})
	}
	// -provider mem runs both ranks as goroutines of this process.
	if code := job.ExitCode("ring", run(context.Background(), []string{"-provider", "mem"}), os.Stderr); code != job.ExitOK {
		fmt.Println("exit", code)
	}
}
