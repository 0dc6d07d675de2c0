package job

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	_ "github.com/ferryrdma/ferry/providers" // the tests run over mem
)

func options(t *testing.T, args ...string) (Options, error) {
	t.Helper()
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.Bind(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, o.Check()
}

func TestOptionsCheck(t *testing.T) {
	for _, args := range [][]string{
		{},                                   // no provider
		{"-provider", "shmm"},                // unknown
		{"-provider", "shm", "-launch", "x"}, // unknown launch
		{"-provider", "shm", "-nics", "9"},
		{"-provider", "shm", "-poll", "busy"},
		{"-provider", "shm", "-timeout", "0s"},
	} {
		if _, err := options(t, args...); !errors.Is(err, ErrUsage) {
			t.Errorf("%v: %v, want ErrUsage", args, err)
		}
	}
	o, err := options(t, "-provider", "tcp", "-nics", "2")
	if err != nil || o.NICs != 2 || providers[o.Provider].name != "tcp;ofi_rxm" || providers[o.Provider].node != "127.0.0.1" {
		t.Errorf("tcp: %+v %v", o, err)
	}
	// mem cannot cross processes and shm must not share one: auto picks
	// goroutines for the first, processes for the second, and the wrong
	// explicit choice is refused before anything starts.
	if o, _ := options(t, "-provider", "mem"); o.launchMode() != "inproc" {
		t.Errorf("mem launches %s", o.launchMode())
	}
	if o, _ := options(t, "-provider", "shm"); o.launchMode() != "spawn" {
		t.Errorf("shm launches %s", o.launchMode())
	}
	for _, args := range [][]string{{"-provider", "mem", "-launch", "spawn"}, {"-provider", "shm", "-launch", "inproc"}} {
		o, _ := options(t, args...)
		if err := Run(context.Background(), o, 2, nil); !errors.Is(err, ErrUsage) {
			t.Errorf("%v: %v, want ErrUsage", args, err)
		}
	}
	// A launcher's world must be the program's.
	o, _ = options(t, "-provider", "mem", "-launch", "env", "-world-size", "3")
	if err := Run(context.Background(), o, 2, nil); !errors.Is(err, ErrUsage) {
		t.Errorf("world 3 for a 2-rank program: %v", err)
	}
}

func TestExitCode(t *testing.T) {
	for err, want := range map[error]int{
		nil:                                  ExitOK,
		fmt.Errorf("x: %w", ErrUsage):        ExitUsage,
		Mismatch("byte %d", 3):               ExitMismatch,
		fmt.Errorf("%w (y)", ErrInterrupted): ExitInterrupted,
		fmt.Errorf("rank 1: %w", fabric.ErrClosed): ExitFail,
	} {
		if got := ExitCode("t", err, io.Discard); got != want {
			t.Errorf("%v: exit %d, want %d", err, got, want)
		}
	}
}

// The flag package reports bad flags and -h itself: the exit status says
// what happened and nothing is printed twice.
func TestParseErrors(t *testing.T) {
	for args, want := range map[string]int{"-h": ExitOK, "-nope": ExitUsage, "-provider=x": ExitUsage} {
		var o Options
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.Bind(fs)
		var printed strings.Builder
		if got := ExitCode("t", o.Parse(fs, []string{args}), &printed); got != want {
			t.Errorf("%s: exit %d, want %d", args, got, want)
		}
		if (printed.Len() > 0) != (args == "-provider=x") {
			t.Errorf("%s: printed %q", args, printed.String())
		}
	}
}

// Three ranks as goroutines over mem: each learns the others' addresses,
// registers a buffer and writes its rank into its successor's, which
// counts the immediate and checks the byte.
func TestRunInproc(t *testing.T) {
	o, err := options(t, "-provider", "mem", "-timeout", "30s")
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), o, 3, func(ctx context.Context, r *Rank) error {
		if len(r.Peers) != 3 || r.Peers[r.ID] != r.Engine.MainAddress() {
			return fmt.Errorf("peers %v", r.Peers)
		}
		buf, err := r.Alloc(4096, fabric.AccessRemoteWrite)
		if err != nil {
			return err
		}
		descs, err := Gather(ctx, r, buf.Desc)
		if err != nil {
			return err
		}
		arrived, err := r.Engine.ImmCounter(7)
		if err != nil {
			return err
		}
		buf.Bytes()[0] = byte(10 + r.ID) // the source byte
		next := (r.ID + 1) % r.World
		done := fabric.NewTransfer()
		if err := r.Engine.SubmitSingle(fabric.SingleWrite{Src: buf.Region, Length: 1, Dst: descs[next], DstOffset: 1, Imm: fabric.Immediate(7)},
			fabric.Notify(done)); err != nil {
			return err
		}
		if err := done.Wait(ctx); err != nil {
			return err
		}
		if err := arrived.Wait(ctx, 1); err != nil {
			return err
		}
		if got, want := buf.Bytes()[1], byte(10+(r.ID+r.World-1)%r.World); got != want {
			return Mismatch("rank %d got %d, want %d", r.ID, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// One rank failing ends the others' waits at once: the run returns that
// rank's error, not a timeout of the ranks left waiting.
func TestRunInprocFailure(t *testing.T) {
	o, err := options(t, "-provider", "mem", "-timeout", "60s")
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	start := time.Now()
	err = Run(context.Background(), o, 3, func(ctx context.Context, r *Rank) error {
		if r.ID == 1 {
			return boom
		}
		c, err := r.Engine.ImmCounter(1)
		if err != nil {
			return err
		}
		return c.Wait(ctx, 1) // never arrives
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want rank 1's error", err)
	}
	t.Logf("the run ended %v after rank 1 failed", time.Since(start))
}
