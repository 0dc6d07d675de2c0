package job

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// Rank is one rank of a running job: its engine, its membership in the
// job, and the main address of every rank. Out is where rank 0 prints
// (other ranks print nothing: their failures come back as errors).
type Rank struct {
	ID, World int
	Engine    *fabric.Engine
	Info      fabric.Info
	Group     *rendezvous.Group
	// Peers[i] is rank i's main address: where Engine.Send reaches it.
	Peers []fabric.Address
	Out   io.Writer // rank 0: the human-readable report; others: io.Discard
	Err   io.Writer

	opts    Options
	buffers []*Buffer
}

// Buffer is host memory registered with the rank's engine. Its memory
// comes from fabric.AllocHost, never the Go heap, because a NIC writes
// into it behind the Go runtime's back.
type Buffer struct {
	Host   *fabric.HostBuffer
	Region *fabric.MemoryRegion
	// Desc is what peers need to write into the buffer (zero for a
	// buffer registered with fabric.AccessLocal).
	Desc fabric.Descriptor
}

// Bytes returns the buffer's memory.
func (b *Buffer) Bytes() []byte { return b.Host.Bytes() }

// Alloc maps n bytes of host memory and registers them with the engine.
// With fabric.AccessRemoteWrite peers can write into it through Desc. The
// rank unregisters and frees its buffers when it closes.
func (r *Rank) Alloc(n int, access fabric.Access) (*Buffer, error) {
	host, err := fabric.AllocHost(n)
	if err != nil {
		return nil, fmt.Errorf("alloc %d bytes: %w", n, err)
	}
	reg, err := r.Engine.RegisterHost(host, access)
	if err != nil {
		_ = host.Free()
		return nil, fmt.Errorf("register %d bytes: %w", n, err)
	}
	b := &Buffer{Host: host, Region: reg}
	if access&fabric.AccessRemoteWrite != 0 {
		if b.Desc, err = reg.Descriptor(); err != nil {
			_ = r.Engine.Unregister(reg)
			_ = host.Free()
			return nil, err
		}
	}
	r.buffers = append(r.buffers, b)
	return b, nil
}

// close shuts the engine down (which unregisters every region), then frees
// the buffers' memory: freeing before the engine lets go of a region would
// pull memory out from under the NIC.
func (r *Rank) close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := r.Engine.Close(ctx); err != nil {
		fmt.Fprintf(r.Err, "rank %d: close engine: %v\n", r.ID, err)
	}
	for _, b := range r.buffers {
		_ = b.Host.Free()
	}
}

// Barrier returns once every rank has called it.
func (r *Rank) Barrier(ctx context.Context) error { return r.Group.Barrier(ctx) }

// Gather sends v (as JSON) to every rank and returns every rank's value,
// indexed by rank. Descriptors and addresses travel in their text form,
// which is what their JSON encoding is.
func Gather[T any](ctx context.Context, r *Rank, v T) ([]T, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	all, err := r.Group.AllGather(ctx, b)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(all))
	for i, b := range all {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("value of rank %d: %v: %w", i, err, fabric.ErrBadEncoding)
		}
	}
	return out, nil
}

// Broadcast returns root's v on every rank.
func Broadcast[T any](ctx context.Context, r *Rank, root int, v T) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, err
	}
	if b, err = r.Group.Broadcast(ctx, root, b); err != nil {
		return out, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("value of rank %d: %v: %w", root, err, fabric.ErrBadEncoding)
	}
	return out, nil
}

// Mismatch builds an error wrapping ErrMismatch.
func Mismatch(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMismatch, fmt.Sprintf(format, args...))
}

// Exit statuses of programs built on this package (ExitCode).
const (
	ExitOK       = 0
	ExitFail     = 1
	ExitUsage    = 2
	ExitMismatch = 3
	// ExitInterrupted is the shell's status for a command ended by SIGINT.
	ExitInterrupted = 130
)

// ExitCode maps a program's error to its exit status and prints it.
func ExitCode(program string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if !errors.As(err, new(parseError)) {
		fmt.Fprintf(stderr, "%s: %v\n", program, err)
	}
	switch {
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrMismatch):
		return ExitMismatch
	case errors.Is(err, ErrInterrupted):
		return ExitInterrupted
	default:
		return ExitFail
	}
}
