package rendezvous

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// SpawnOptions control SpawnLocal's children.
type SpawnOptions struct {
	// Stdout and Stderr receive the children's output; nil means the
	// parent's.
	Stdout, Stderr io.Writer
	// GracePeriod is how long a child has to exit after SIGTERM before it
	// is killed; 0 means 5 s.
	GracePeriod time.Duration
	// KeepGoing lets the other children run on when one fails (a job
	// meant to survive the loss of ranks); the result still lists every
	// rank that failed.
	KeepGoing bool
}

// RankExit is how one spawned rank ended.
type RankExit struct {
	Rank     int
	ExitCode int   // -1 when killed by a signal or never started
	Err      error // nil for exit status 0
}

// SpawnError lists the ranks of a spawned job that failed. It wraps
// ErrPeerLost.
type SpawnError struct {
	Ranks []RankExit // every rank, in rank order
}

func (e *SpawnError) Error() string {
	var bad []string
	for _, r := range e.Ranks {
		if r.Err != nil {
			bad = append(bad, fmt.Sprintf("rank %d: %v", r.Rank, r.Err))
		}
	}
	return "rendezvous: spawned job failed: " + strings.Join(bad, "; ")
}

func (e *SpawnError) Unwrap() error { return ErrPeerLost }

// SpawnLocal runs world copies of argv on this machine as ranks 0..world-1
// of one job and waits for all of them. env is the children's base
// environment (nil means the parent's); to it SpawnLocal adds FERRY_RANK,
// FERRY_WORLD_SIZE, FERRY_LOCAL_RANK, FERRY_MASTER, FERRY_JOB_TOKEN (a
// fresh random token unless env has one) and, for rank 0, FERRY_LISTEN_FD:
// the store's socket, opened here on 127.0.0.1 so there is no race for a
// free port. A child calls ConfigFromEnv and Join.
//
// When a child fails, the others get SIGTERM (then SIGKILL after the grace
// period), unless SpawnOptions.KeepGoing; when ctx ends, all of them do. The result is nil or a
// *SpawnError listing every rank's exit.
func SpawnLocal(ctx context.Context, world int, argv, env []string) error {
	return Spawn(ctx, world, argv, env, SpawnOptions{})
}

// Spawn is SpawnLocal with options.
func Spawn(ctx context.Context, world int, argv, env []string, opts SpawnOptions) error {
	if world < 1 || world > 1024 || len(argv) == 0 {
		return &Error{Op: "spawn", Msg: fmt.Sprintf("world %d, argv %q", world, argv), Err: ErrInvalidConfig}
	}
	if env == nil {
		env = os.Environ()
	}
	token := ""
	var base []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "FERRY_JOB_TOKEN":
			token = v
		case "FERRY_RANK", "FERRY_WORLD_SIZE", "FERRY_LOCAL_RANK", "FERRY_MASTER", "FERRY_LISTEN_FD":
		default:
			base = append(base, kv)
		}
	}
	if token == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return &Error{Op: "spawn", Msg: "generate a job token", Err: fmt.Errorf("%v: %w", err, ErrInvalidConfig)}
		}
		token = hex.EncodeToString(b[:])
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return &Error{Op: "spawn", Msg: "open the store's socket", Err: fmt.Errorf("%v: %w", err, ErrInvalidConfig)}
	}
	lnFile, err := ln.(*net.TCPListener).File()
	master := ln.Addr().String()
	ln.Close() // the duplicate in lnFile keeps the socket listening
	if err != nil {
		return &Error{Op: "spawn", Msg: "share the store's socket", Err: fmt.Errorf("%v: %w", err, ErrInvalidConfig)}
	}
	defer lnFile.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	grace := opts.GracePeriod
	if grace <= 0 {
		grace = 5 * time.Second
	}
	stdout, stderr := shareWriters(opts.Stdout, opts.Stderr)
	cmds := make([]*exec.Cmd, world)
	exits := make([]RankExit, world)
	done := make(chan int, world)
	started := 0
	for r := range world {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = grace
		cmd.Stdout, cmd.Stderr = stdout, stderr
		cmd.Env = append(append([]string{}, base...),
			"FERRY_RANK="+strconv.Itoa(r), "FERRY_WORLD_SIZE="+strconv.Itoa(world),
			"FERRY_LOCAL_RANK="+strconv.Itoa(r), "FERRY_MASTER="+master, "FERRY_JOB_TOKEN="+token)
		if r == 0 {
			cmd.ExtraFiles = []*os.File{lnFile} // fd 3 in the child
			cmd.Env = append(cmd.Env, "FERRY_LISTEN_FD=3")
		}
		exits[r] = RankExit{Rank: r, ExitCode: -1}
		if err := cmd.Start(); err != nil {
			exits[r].Err = err
			cancel()
			break
		}
		cmds[r] = cmd
		started++
		go func() {
			err := cmd.Wait()
			exits[r].Err = err
			exits[r].ExitCode = cmd.ProcessState.ExitCode()
			done <- r
		}()
	}
	lnFile.Close() // rank 0 has its copy; the parent must not keep the port
	for range started {
		r := <-done
		if exits[r].Err != nil && !opts.KeepGoing {
			cancel() // one rank failed: the job cannot finish
		}
	}
	for _, e := range exits {
		if e.Err != nil {
			return &SpawnError{Ranks: exits}
		}
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return &Error{Op: "spawn", Err: fmt.Errorf("%v: %w", err, ErrTimeout)}
	}
	return nil
}

// lockedWriter serialises the children's writes: exec copies each child's
// output from its own goroutine, and a bytes.Buffer is not safe for that.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// shareWriters returns the writers the children share. Files are passed
// as they are (the child writes to the descriptor directly); other writers
// are wrapped with one lock, shared when stdout and stderr are the same.
func shareWriters(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	if stdout == nil {
		stdout = os.Stdout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	mu := new(sync.Mutex)
	wrap := func(w io.Writer) io.Writer {
		if _, ok := w.(*os.File); ok {
			return w
		}
		return lockedWriter{mu, w}
	}
	return wrap(stdout), wrap(stderr)
}
