package fabricbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// Child processes: the test binary re-executes itself as a server or as a
// rank (testutil roles), with the spec in FABRICBENCH_SPEC.
const envSpec = "FABRICBENCH_SPEC"

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Roles{
		"serve": func() error { return testutil.Exit(childServe()) },
		"rank":  func() error { return testutil.Exit(childRank()) },
	})
}

func childSpec() (Spec, error) {
	var s Spec
	if err := json.Unmarshal([]byte(os.Getenv(envSpec)), &s); err != nil {
		return s, fmt.Errorf("child spec: %w", err)
	}
	return s, nil
}

// childServe serves until SIGTERM, then closes its engine (shm leaves
// files behind when a process exits without closing).
func childServe() int {
	s, err := childSpec()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err = ServeSpec(ctx, s, io.Discard, func(a fabric.Address, _ PeerInfo) {
		fmt.Printf("Main Address: %s\n", a)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

func childRank() int {
	s, err := childSpec()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg, err := rendezvous.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var sink Sink
	var p *Printer
	if cfg.Rank == 0 {
		if p, err = NewPrinter(Output{}, nil, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		sink = p
	}
	rep, err := Ranks(ctx, s, cfg, sink)
	if p != nil {
		_ = p.Finish(rep, err)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", cfg.Rank, err)
		if errors.Is(err, ErrVerify) {
			return 3
		}
		return 1
	}
	return 0
}

// smallSpec is a quick run with every workload, every case checked.
func smallSpec(provider string, nics int) Spec {
	return Spec{Provider: provider, NICs: nics, Verify: true, Sizes: []uint64{4096, 64 << 10}, Pages: []int{50},
		Iters: 3, Warmup: 1, Buffer: 8 << 20, Timeout: 60 * time.Second}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// skipIfUnusable skips when the provider cannot run on this machine (a
// wrapped ErrNotSupported), and fails on anything else.
func skipIfUnusable(t *testing.T, err error) {
	t.Helper()
	if err != nil && errors.Is(err, fabric.ErrNotSupported) {
		t.Skipf("provider not usable here: %v", err)
	}
}

// checkReport asserts every case ran, and every verified case verified.
func checkReport(t *testing.T, rep *Report, wantVerified int) {
	t.Helper()
	verified := 0
	for _, c := range rep.Cases {
		if c.Error != "" {
			t.Errorf("%s %d x %d: %s", c.Workload, c.Bytes, c.Pages, c.Error)
		}
		if c.Iters == 0 {
			t.Errorf("%s %d x %d: no iterations", c.Workload, c.Bytes, c.Pages)
		}
		if c.Checked {
			if !c.Verified {
				t.Errorf("%s %d x %d: not verified", c.Workload, c.Bytes, c.Pages)
			}
			verified++
		}
	}
	if verified != wantVerified {
		t.Errorf("%d verified cases, want %d", verified, wantVerified)
	}
}
