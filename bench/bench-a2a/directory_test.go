package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/directory/etcd/etcdtest"
	"github.com/ferryrdma/ferry/fabric/fabrictest"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// TestDirectoryWorld: two rank processes started with nothing but
// --directory and --world-size 2 find each other in a real etcd, take
// their ranks from their names, and run the host backend's checked cases.
func TestDirectoryWorld(t *testing.T) {
	fabrictest.RequireTransport(t, "shm", "127.0.0.1")
	srv := etcdtest.Start(t)
	url := "etcd://" + strings.TrimPrefix(srv.Client, "http://") + etcdtest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type result struct {
		out, errOut bytes.Buffer
		err         error
	}
	res := make([]*result, 2)
	done := make(chan int, 2)
	// Started in reverse name order: ranks follow names, not start order.
	for i, name := range []string{"rank-b", "rank-a"} {
		r := &result{}
		res[i] = r
		cmd := exec.CommandContext(ctx, os.Args[0], "--directory", url, "--name", name, "--world-size", "2",
			"--provider", "shm", "--check-iters=1", "--tokens=5", "--hidden=96", "--scales=3", "--experts=8",
			"--topk=2", "--iters=3", "--warmup=1", "--timeout=20s", "--peers=false")
		cmd.Env = append(os.Environ(), testutil.RoleEnv+"="+asMain, "FERRY_JOB_TOKEN=directory-test")
		cmd.Stdout, cmd.Stderr = &r.out, &r.errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { r.err = cmd.Wait(); done <- i }()
		if i == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	<-done
	<-done
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("process %d: %v\nstdout:\n%s\nstderr:\n%s", i, r.err, r.out.String(), r.errOut.String())
		}
	}
	// rank-a is rank 0 and prints the table.
	for i, want := range []string{"rank-b is rank 1 of 2", "rank-a is rank 0 of 2"} {
		if !strings.Contains(res[i].errOut.String(), want) {
			t.Errorf("process %d: no %q in:\n%s", i, want, res[i].errOut.String())
		}
	}
	out := res[1].out.String()
	t.Logf("%s", out)
	for _, want := range []string{"2 ranks", "# done: 2 cases, 2 verified, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("rank 0's table lacks %q:\n%s", want, out)
		}
	}
}

// TestDirectoryFlagsRejected: --directory with flags that place ranks
// some other way, or without a world size, is a usage error.
func TestDirectoryFlagsRejected(t *testing.T) {
	for name, args := range map[string][]string{
		"spawn":      {"--directory=etcd://127.0.0.1:2379/x", "--world-size=2", "--spawn"},
		"rank":       {"--directory=etcd://127.0.0.1:2379/x", "--world-size=2", "--rank=1"},
		"master":     {"--directory=etcd://127.0.0.1:2379/x", "--world-size=2", "--master=127.0.0.1:5"},
		"no world":   {"--directory=etcd://127.0.0.1:2379/x"},
		"bad url":    {"--directory=redis://x", "--world-size=2"},
		"mode local": {"--directory=etcd://127.0.0.1:2379/x", "--world-size=2", "--mode=lockstep", "--backend=cuda-emu"},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr strings.Builder
			_, err := parseFlags(args, noEnv, &stderr)
			if !errors.Is(err, errUsage) {
				t.Fatalf("%q: %v", args, err)
			}
		})
	}
}
