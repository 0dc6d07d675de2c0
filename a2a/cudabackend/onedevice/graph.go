package onedevice

import (
	"context"
	"fmt"

	"github.com/ferryrdma/ferry/a2a/cudabackend"
	cu "github.com/ferryrdma/ferry/cuda"
)

// Graph replays a step as one CUDA graph: every rank's four launches, in
// lock-step order, captured once on rank 0's stream and launched per
// replay. It needs the backends on a GPU (cudabackend.DriverDevice); elsewhere
// Record fails with an error wrapping cuda.ErrNotSupported.
type Graph struct {
	st   *cu.Stream
	exec *cu.GraphExec
}

// driverStream is a stream of cudabackend.DriverDevice.
type driverStream interface{ CUDAStream() *cu.Stream }

func (g *Graph) Record(ctx context.Context, w *World, steps [][4]cudabackend.Launch) error {
	st, ok := w.Backends[0].Stream().(driverStream)
	if !ok {
		return fmt.Errorf("onedevice: graph capture needs a GPU (CUDA graphs capture driver streams; %s has none): %w",
			w.dev.Name(), cu.ErrNotSupported)
	}
	g.st = st.CUDAStream()
	graph, err := g.st.Capture(cu.CaptureRelaxed, func(*cu.Stream) error {
		for p := cudabackend.PhaseDispatchSend; p <= cudabackend.PhaseCombineRecv; p++ {
			for r := range steps {
				// Rank 0's stream, capturing: every rank's launch
				// runs its kernel there (the world's ranks load the same).
				if err := steps[r][p].Run(w.Backends[0].Stream()); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("onedevice: capture: %w", err)
	}
	defer graph.Close()
	if g.exec, err = graph.Instantiate(); err != nil {
		return fmt.Errorf("onedevice: instantiate: %w", err)
	}
	return nil
}

// Replay launches the graph, waits (within the watchdog: each of the four
// phases may wait its full timeout) and checks every launch's status.
func (g *Graph) Replay(ctx context.Context, w *World) error {
	epoch := w.Epoch() + 1
	if err := g.exec.Launch(g.st); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 4*w.watchdog+grace)
	defer cancel()
	if err := g.st.SynchronizeContext(ctx); err != nil {
		return &StepError{Mode: LockStep, Rank: 0, Err: fmt.Errorf("graph still running past the watchdog: %w", err)}
	}
	for p := cudabackend.PhaseDispatchSend; p <= cudabackend.PhaseCombineRecv; p++ {
		if err := w.status(LockStep, p, epoch, nil); err != nil {
			return err
		}
	}
	return nil
}

func (g *Graph) Close() error {
	if g.exec == nil {
		return nil
	}
	err := g.exec.Close()
	g.exec = nil
	return err
}
