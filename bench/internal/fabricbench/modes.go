package fabricbench

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric"
)

// Loopback runs spec with a server engine and a client engine in this
// process, talking through the same control protocol as two processes.
// The report is returned even when the error is non-nil (a failed case).
func Loopback(ctx context.Context, spec Spec) (*Report, error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	server, err := OpenSide(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("open server engine: %w", err)
	}
	defer server.Close()
	client, err := OpenSide(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("open client engine: %w", err)
	}
	defer client.Close()

	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- Serve(sctx, server, io.Discard) }()
	defer func() { stop(); <-served }()

	c, err := Dial(ctx, client, server.Engine.MainAddress())
	if err != nil {
		return nil, fmt.Errorf("loopback hello: %w", err)
	}
	defer c.Close()
	rep, err := c.Run(ctx, spec)
	rep.Header.Mode = "loopback"
	return rep, err
}

// RunClient opens a client engine for spec, runs every case against the
// server at addr and returns the report.
func RunClient(ctx context.Context, spec Spec, addr fabric.Address) (*Report, error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	side, err := OpenSide(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("open client engine: %w", err)
	}
	defer side.Close()
	hctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	c, err := Dial(hctx, side, addr)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("hello to %s: %w", addr, err)
	}
	defer c.Close()
	return c.Run(ctx, spec)
}

// ServeSpec opens a server engine for spec, calls ready with its main
// address, and serves until ctx ends.
func ServeSpec(ctx context.Context, spec Spec, log io.Writer, ready func(fabric.Address, PeerInfo)) error {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return err
	}
	side, err := OpenSide(ctx, spec)
	if err != nil {
		return fmt.Errorf("open server engine: %w", err)
	}
	defer side.Close()
	if ready != nil {
		ready(side.Engine.MainAddress(), side.Info())
	}
	return Serve(ctx, side, log)
}

// Raw runs spec's cases straight on libfabric from one C loop
// (efa.RawBench), with no engine: the provider's ceiling on this machine,
// in the same report format. It needs a libfabric transport and measures
// one endpoint pair (NICs is ignored). RawBench checks every byte after
// the last iteration, so every raw case is verified.
func Raw(ctx context.Context, spec Spec) (*Report, error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	switch spec.Provider {
	case "null", "mem", "verbs", "auto":
		return nil, fmt.Errorf("--raw runs libfabric providers only, not %q: %w", spec.Provider, fabric.ErrInvalidArgument)
	}
	h := newHeader("raw", spec, PeerInfo{Transport: spec.Provider, Provider: "libfabric", NICs: 1, Poll: "spin (C loop)"})
	h.Engine = false
	rep := &Report{Header: h}
	var errs []error
	for _, c := range spec.Cases() {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		rs := efa.RawSpec{Transport: spec.Provider, Node: spec.Node, Size: c.Bytes, Pages: c.Pages,
			Iters: c.Iters, Warmup: c.Warmup, Imm: c.Workload == Imm, Timeout: spec.Timeout}
		r, err := efa.RawBench(rs)
		res := Result{Workload: c.Workload, Bytes: c.Bytes, Pages: c.Pages, Verify: c.Verify}
		if err == nil {
			res = Summarize(c, r.Latency, 1, 0)
			res.Verify, res.Verified = true, true
			rep.Header.Provider = "libfabric " + r.Provider
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
