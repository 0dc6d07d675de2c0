package cudabackend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/a2a"
)

// The a2a.Backend methods: each launches its phase's kernel on the
// backend's stream and waits for it, so that the caller's slices are
// consumed (inputs) or filled (outputs) when the call returns, as with
// the host backend. A device-side caller (CUDA graphs, device tensors)
// would launch the same kernels without waiting; the worker never needs
// the caller.

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// kernelTimeout is how long a kernel may wait in total: Options.Timeout,
// or, when ctx's deadline comes sooner, until shortly before it, so the
// kernel gives up (and reports what it waited for) while the caller still
// waits for it.
func (b *Backend) kernelTimeout(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return b.timeout
	}
	left := time.Until(d)
	return min(b.timeout, max(left-left/8-10*time.Millisecond, time.Millisecond))
}

// launch runs one phase's kernel and turns its status into an error.
func (b *Backend) launch(ctx context.Context, phase int, args ...any) error {
	status := b.ctrlWord(slotStatus+phase, 0)
	status.Store(0)
	tmo := b.kernelTimeout(ctx)
	args = append(args, uint64(tmo.Nanoseconds()))
	if err := b.st.Launch(b.k[phase], b.grid, b.block, args...); err != nil {
		_ = b.io.done()
		return fmt.Errorf("a2a cuda rank %d %s: launch: %w", b.l.Rank, phaseNames[phase], err)
	}
	if err := b.st.Sync(ctx); err != nil {
		if ctx.Err() == nil {
			// The launch failed rather than outlived ctx (a fault, a
			// trap, a failed emulator check): the kernel has ended and
			// its status word says nothing.
			return errors.Join(fmt.Errorf("a2a cuda rank %d %s: kernel failed: %w: %w", b.l.Rank, phaseNames[phase],
				ErrKernel, err), b.io.done())
		}
		// The kernel gives up on its own shortly after ctx's deadline:
		// wait for that before the caller's memory is released.
		wctx, cancel := context.WithTimeout(context.Background(), tmo+closeWait)
		serr := b.st.Sync(wctx)
		cancel()
		if serr != nil {
			// Still running: keep the caller's memory pinned for good
			// rather than let the kernel write into freed memory.
			return fmt.Errorf("a2a cuda rank %d %s: kernel still running after its timeout: %w: %w", b.l.Rank,
				phaseNames[phase], a2a.ErrTimeout, serr)
		}
	}
	if err := b.io.done(); err != nil {
		return err
	}
	epoch, err := b.Status(Phase(phase))
	if err == nil && epoch != b.epoch+1 {
		err = &KernelError{Phase: phaseNames[phase], Rank: b.l.Rank, Worker: b.workerErr()}
	}
	return err
}

func (b *Backend) DispatchSend(ctx context.Context, p *a2a.Planner, in *a2a.DispatchInput) error {
	l := &b.l
	m := in.Tokens
	x, err := b.io.in(in.X)
	if err != nil {
		return err
	}
	sc, err := b.io.in(f32Bytes(in.Scales))
	if err != nil {
		return err
	}
	idx, err := b.io.in(u32Bytes(in.Indices[:m*l.ExpertsPerToken]))
	if err != nil {
		return err
	}
	err = b.launch(ctx, phaseDispatchSend, b.params.Addr(), x, uint64(orDefault(in.XStride, l.TokenBytes)), sc,
		uint64(orDefault(in.ScaleTokenStride, l.Scales)), uint64(orDefault(in.ScaleElemStride, 1)), idx, uint32(m), uint64(0))
	if err != nil {
		return err
	}
	// The kernel laid the copies out itself; its count row must be the
	// planner's, word for word.
	RW, g := l.RowWords, l.Group(l.Rank)
	got := words(b.table)[g*RW : (g+1)*RW]
	for i, v := range p.Send().Row {
		if got[i] != v {
			return fmt.Errorf("a2a cuda rank %d dispatch send: count row word %d is %d, the planner's %d: %w",
				l.Rank, i, got[i], v, ErrKernel)
		}
	}
	return nil
}

func (b *Backend) DispatchRecv(ctx context.Context, p *a2a.Planner, out *a2a.DispatchOutput) error {
	l := &b.l
	x, err := b.io.inout(out.X)
	if err != nil {
		return err
	}
	sc, err := b.io.inout(f32Bytes(out.Scales))
	if err != nil {
		return err
	}
	tok, err := b.io.inout(i32Bytes(out.ExpertTokens[:l.LocalExperts]))
	if err != nil {
		return err
	}
	var off uint64
	if out.ExpertOffsets != nil {
		if off, err = b.io.inout(i32Bytes(out.ExpertOffsets[:l.LocalExperts+1])); err != nil {
			return err
		}
	}
	return b.launch(ctx, phaseDispatchRecv, b.params.Addr(), x, uint64(orDefault(out.XStride, l.TokenBytes)), sc,
		uint64(orDefault(out.ScaleTokenStride, l.Scales)), uint64(orDefault(out.ScaleElemStride, 1)), tok, off)
}

func (b *Backend) CombineSend(ctx context.Context, p *a2a.Planner, in *a2a.CombineInput) error {
	y, err := b.io.in(in.Y)
	if err != nil {
		return err
	}
	return b.launch(ctx, phaseCombineSend, b.params.Addr(), y, uint64(orDefault(in.YStride, b.l.CombineBytes)))
}

func (b *Backend) CombineRecv(ctx context.Context, p *a2a.Planner, out *a2a.CombineOutput) error {
	o, err := b.io.inout(out.Out)
	if err != nil {
		return err
	}
	w, err := b.io.in(f32Bytes(out.Weights))
	if err != nil {
		return err
	}
	acc := uint32(0)
	if out.Accumulate {
		acc = 1
	}
	err = b.launch(ctx, phaseCombineRecv, b.params.Addr(), o, uint64(orDefault(out.OutStride, b.l.CombineBytes)), w, acc)
	// The kernels advanced their epoch whatever the outcome.
	b.epoch++
	return err
}
