package fabricbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric"
)

// Loopback runs spec with a server engine and a client engine in this
// process, talking through the same control protocol as two processes.
// sink (nil: none) sees the header and every case as it completes. The
// report is returned even when the error is non-nil (a failed case).
func Loopback(ctx context.Context, spec Spec, sink Sink) (_ *Report, err error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	server, err := openSide(ctx, spec, "server")
	if err != nil {
		return nil, fmt.Errorf("open server engine: %w", err)
	}
	// The server writes and the client receives: the client is the
	// target, of TargetNICs.
	target := spec
	if spec.TargetNICs != 0 {
		target.NICs = spec.TargetNICs
	}
	client, err := openSide(ctx, target, "client")
	if err != nil {
		err = fmt.Errorf("open client engine: %w", err)
		closeSide(server, &err)
		return nil, err
	}
	defer closeBoth(server, client, &err)

	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- Serve(sctx, server, io.Discard) }()
	defer func() { stop(); <-served }()

	c, err := dial(ctx, client, server.Engine.MainAddress(), func() error {
		return server.Engine.PeerStatus(client.Engine.MainAddress())
	})
	if err != nil {
		return nil, fmt.Errorf("loopback hello: %w", err)
	}
	defer c.Close()
	return c.run(ctx, spec, "loopback", sink)
}

// closeBoth closes two sides at once, each the other's peer: one closing
// well before the other would look to the other's liveness checks like a
// lost peer (a warning at every teardown).
func closeBoth(a, b *Side, err *error) {
	var ea, eb error
	var wg sync.WaitGroup
	wg.Go(func() { closeSide(a, &ea) })
	wg.Go(func() { closeSide(b, &eb) })
	wg.Wait()
	*err = errors.Join(*err, ea, eb)
}

// closeSide closes s and adds its error to *err: a close that abandoned
// operations or a stuck worker is a failure, not a quiet exit 0.
func closeSide(s *Side, err *error) {
	if cerr := s.Close(); cerr != nil {
		*err = errors.Join(*err, cerr)
	}
}

// RunClient opens a client engine for spec, runs every case against the
// server at addr and returns the report; sink (nil: none) sees the header
// and every case as it completes.
func RunClient(ctx context.Context, spec Spec, addr fabric.Address, sink Sink) (_ *Report, err error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	side, err := openSide(ctx, spec, "client")
	if err != nil {
		return nil, fmt.Errorf("open client engine: %w", err)
	}
	defer closeSide(side, &err)
	hctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	c, err := Dial(hctx, side, addr)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("hello to %s: %w", addr, err)
	}
	defer c.Close()
	return c.Run(ctx, spec, sink)
}

// ServeSpec opens a server engine for spec, calls ready with its main
// address, and serves until ctx ends.
func ServeSpec(ctx context.Context, spec Spec, log io.Writer, ready func(fabric.Address, PeerInfo)) (err error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return err
	}
	side, err := openSide(ctx, spec, "server")
	if err != nil {
		return fmt.Errorf("open server engine: %w", err)
	}
	defer closeSide(side, &err)
	if ready != nil {
		ready(side.Engine.MainAddress(), side.Info())
	}
	return Serve(ctx, side, log)
}

// Raw runs spec's cases straight on libfabric from one C loop
// (efa.RawBench), with no engine: the provider's ceiling on this machine,
// in the same report format. It needs a libfabric transport and measures
// one endpoint pair (NICs is ignored). Each case's writes sit where the
// engine's run of the case puts them (rawOffsets). RawBench checks every
// byte after the last iteration, so every raw case is verified.
func Raw(ctx context.Context, spec Spec, sink Sink) (*Report, error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := refuseRead(spec, "raw"); err != nil {
		return nil, err
	}
	switch spec.Provider {
	case "null", "mem", "verbs", "ipc", "auto":
		return nil, fmt.Errorf("--raw runs libfabric providers only, not %q: %w", spec.Provider, fabric.ErrInvalidArgument)
	}
	h := newHeader("raw", spec, PeerInfo{Transport: spec.Provider, Provider: "libfabric", Reason: "explicit",
		NICs: 1, Poll: "spin (C loop)"})
	h.Engine = false
	h.Verify = true
	rep := newReport(h, sink)
	var errs []error
	for i, c := range spec.Cases() {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		c.Verify = true // RawBench checks every case
		rs := efa.RawSpec{Transport: spec.Provider, Node: spec.Node, Size: c.Bytes, Pages: c.Pages,
			Iters: c.Iters, Warmup: c.Warmup, Imm: c.Workload == Imm, Timeout: spec.Timeout}
		if c.Workload != Imm {
			// The engine's layout of this case: the same footprint.
			offsets, err := rawOffsets(c, spec.Seed+uint64(caseImm(i)), spec.Buffer)
			if err != nil {
				return rep, err
			}
			rs.Offsets, rs.Span = offsets, spec.Buffer
		}
		r, err := efa.RawBench(rs)
		res := newResult(c)
		if err == nil {
			res = Summarize(c, r.Latency, 1, 0)
			res.Verified = true
		} else {
			if errors.Is(err, fabric.ErrProvider) && c.Verify {
				err = fmt.Errorf("%w: %w", ErrVerify, err)
			}
			res.Error = err.Error()
			errs = append(errs, err)
		}
		rep.add(res)
	}
	return rep, errors.Join(errs...)
}

// rawOffsets returns where the writes of case c sit in buffers of span
// bytes, as the engine's run of c lays them (NewLayout with the case's
// seed): the raw loop then bounds the same memory traffic.
func rawOffsets(c Case, seed, span uint64) ([]uint64, error) {
	l, err := NewLayout(c, seed, span)
	if err != nil {
		return nil, err
	}
	if c.Workload == Single {
		return []uint64{Offset}, nil
	}
	out := make([]uint64, len(l.Indices))
	for i := range out {
		out[i] = l.pageOffset(i)
	}
	return out, nil
}
