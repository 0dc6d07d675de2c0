package cudabackend

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/ferryrdma/ferry/a2a"
)

// The worker is the CPU side of the protocol, the same fixed sequence every
// iteration, driven only by flags: the kernels raise theirs in the control
// block and the worker raises its own there, so the caller's calls never
// talk to it and a captured graph of the four launches replays without
// host help. One iteration (epoch it):
//
//	route done   -> post the count row (route scatter)
//	send done    -> post the eager and overflow writes
//	G-1 routes   -> PlanRecv, receive plan into the metadata, arm the
//	                dispatch and combine flag counters, raise plan ready
//	drecv done   -> dispatch barrier, raise combine free
//	csend done   -> post the combine writes
//	crecv done   -> combine barrier, raise dispatch free
//
// Barriers drain every transfer this rank posted, so buffers are reused
// only after the NIC is done with them. A failure stops the worker; the
// kernel waiting for its next flag then times out, and its error carries
// the worker's.
type worker struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error

	eager, overflow []a2a.Transfer
}

func (b *Backend) startWorker() {
	ctx, cancel := context.WithCancel(context.Background())
	b.w = &worker{ctx: ctx, cancel: cancel, done: make(chan struct{}),
		eager: make([]a2a.Transfer, 0, b.l.WorldSize), overflow: make([]a2a.Transfer, 0, b.l.WorldSize)}
	go b.runWorker()
}

func (b *Backend) stopWorker() {
	if b.w == nil {
		return
	}
	b.w.cancel()
	<-b.w.done
}

// workerErr returns the worker's failure, if any.
func (b *Backend) workerErr() error {
	if b.w == nil {
		return nil
	}
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	return b.w.err
}

// failWorker records err as the worker's failure (unless it has one) and
// makes the kernels' waits give up at once.
func (b *Backend) failWorker(err error) {
	if w := b.w; w != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = fmt.Errorf("a2a cuda worker rank %d: %w", b.l.Rank, err)
		}
		w.mu.Unlock()
	}
	b.ctrlWord(slotWorkerFailed, 0).Store(1)
}

func (b *Backend) runWorker() {
	w := b.w
	defer close(w.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for it := uint32(1); ; it++ {
		if err := b.iteration(w.ctx, it); err != nil {
			if w.ctx.Err() == nil {
				w.mu.Lock()
				w.err = fmt.Errorf("a2a cuda worker rank %d iteration %d: %w", b.l.Rank, it, err)
				w.mu.Unlock()
				// The kernels' waits give up at once: a flag this worker
				// raises, or one its transfers raise, will not come.
				b.ctrlWord(slotWorkerFailed, 0).Store(1)
			}
			return
		}
	}
}

func (b *Backend) iteration(ctx context.Context, it uint32) error {
	l := &b.l
	w := b.w
	if err := b.await(ctx, slotRouteDone, it); err != nil {
		return err
	}
	if err := b.wire.Routes(); err != nil {
		return err
	}
	if err := b.await(ctx, slotSendDone, it); err != nil {
		return err
	}
	RW, g := l.RowWords, l.Group(l.Rank)
	tw := words(b.table)
	seg := tw[g*RW+l.Experts : (g+1)*RW]
	if err := checkSegments(l, seg); err != nil {
		return err
	}
	w.eager, w.overflow = b.planner.SendTransfers(seg, w.eager[:0], w.overflow[:0])
	if err := b.wire.Eager(w.eager); err != nil {
		return err
	}
	if err := b.wire.Overflow(w.overflow); err != nil {
		return err
	}
	p := b.planner
	if err := b.wire.Wait(ctx, a2a.TagRoute, p.Members().Live-1); err != nil {
		return err
	}
	if err := p.PlanRecv(tw[:l.Groups*RW]); err != nil {
		return err
	}
	rp := p.Recv()
	if err := b.writePlan(rp); err != nil {
		return err
	}
	if l.Nodes > 1 {
		if err := b.arm(a2a.TagDispatch, slotDispatchRDMA, rp.Imm[a2a.TagDispatch].Expected); err != nil {
			return err
		}
	}
	if l.WorldSize > l.NVLinkSize {
		if err := b.arm(a2a.TagCombine, slotCombineRDMA, rp.Imm[a2a.TagCombine].Expected); err != nil {
			return err
		}
	}
	b.raise(slotPlanReady, it)
	if err := b.await(ctx, slotDrecvDone, it); err != nil {
		return err
	}
	if err := b.wire.Barrier(ctx, a2a.TagDispatchBarrier); err != nil {
		return err
	}
	b.raise(slotCombineFree, it)
	if err := b.await(ctx, slotCsendDone, it); err != nil {
		return err
	}
	if err := b.wire.Combine(rp.Combine); err != nil {
		return err
	}
	if err := b.await(ctx, slotCrecvDone, it); err != nil {
		return err
	}
	if err := b.wire.Barrier(ctx, a2a.TagCombineBarrier); err != nil {
		return err
	}
	b.raise(slotDispatchFree, it)
	return nil
}

// checkSegments refuses segment starts no layout of MaxTokens tokens has:
// they come from a kernel, and the transfers are built from them.
func checkSegments(l *a2a.Layout, seg []uint32) error {
	limit := uint32(l.MaxTokens * l.ExpertsPerToken)
	if seg[0] != 0 {
		return fmt.Errorf("a2a cuda: count row starts at %d: %w", seg[0], ErrKernel)
	}
	for q := 1; q < len(seg); q++ {
		if seg[q] < seg[q-1] || seg[q] > limit {
			return fmt.Errorf("a2a cuda: count row segment %d at %d after %d (limit %d): %w", q, seg[q], seg[q-1], limit, ErrKernel)
		}
	}
	return nil
}

// writePlan puts the receive plan where the kernels read it.
func (b *Backend) writePlan(rp *a2a.RecvPlan) error {
	return encodePlan(words(b.meta), &b.l, &b.ml, rp)
}

// encodePlan lays rp out as the kernels read it (metaLayout); the header,
// written last, says how many runs and copies follow.
func encodePlan(mw []uint32, l *a2a.Layout, ml *metaLayout, rp *a2a.RecvPlan) error {
	if len(rp.Runs) > ml.maxRuns {
		return fmt.Errorf("a2a cuda: %d receive runs, room for %d: %w", len(rp.Runs), ml.maxRuns, ErrKernel)
	}
	L := l.LocalExperts
	for i := 0; i < L; i++ {
		mw[ml.tokens+i] = uint32(rp.TokensPerExpert[i])
	}
	for i := 0; i <= L; i++ {
		mw[ml.offsets+i] = uint32(rp.ExpertOffsets[i])
	}
	base := int32(l.Node(l.Rank) * l.NVLinkSize)
	var start uint32
	for i := range rp.Runs {
		r := &rp.Runs[i]
		o := ml.runs + runWords*i
		mw[o+0] = uint32(r.SrcRow)
		mw[o+1] = uint32(r.Padded)
		mw[o+2] = uint32(r.CombineRow)
		mw[o+3] = uint32(r.Count)
		mw[o+4] = uint32(r.Kind)
		mw[o+5] = uint32(r.Source - base)
		mw[o+6] = uint32(r.Group)
		mw[ml.starts+i] = start
		start += uint32(r.Count)
	}
	mw[ml.starts+len(rp.Runs)] = start
	mw[0] = uint32(len(rp.Runs))
	mw[1] = uint32(rp.RemoteRuns)
	mw[2] = uint32(rp.Copies)
	mw[3] = uint32(rp.RemoteCopies)
	return nil
}

// arm has the flag counter of tag raise the epoch flag in slot s once n
// immediates arrived. With none to wait for (every rank of the other
// domains inactive) the flag goes up at once: the kernels wait for it
// whenever the world has other domains.
func (b *Backend) arm(tag a2a.Tag, s, n int) error {
	if n == 0 {
		b.rdmaFlag(s).Set()
		return nil
	}
	return b.wire.Arm(tag, n)
}

// awaitErr ends a wait for a kernel flag: when ctx ended, or when the
// engine declared an active rank lost (the kernel may wait for it, on a
// node rank's slot, where no counter of this worker sees the loss).
func (b *Backend) awaitErr(ctx context.Context, s int, it uint32) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("a2a cuda worker: waiting for kernel flag %d epoch %d: %w: %w", s, it, a2a.ErrTimeout, err)
	}
	if b.wire == nil {
		return nil
	}
	if err := b.wire.LostRank(); err != nil {
		return fmt.Errorf("a2a cuda worker: waiting for kernel flag %d epoch %d: %w", s, it, err)
	}
	return nil
}

// raise publishes epoch it in slot s for the kernels.
func (b *Backend) raise(s int, it uint32) { b.ctrlWord(s, 0).Store(it) }

// await waits until a kernel raised slot s to epoch it: spinning briefly,
// then yielding, then (unless Options.Spin) sleeping up to half a
// millisecond at a time (the cores may be shared with the kernels
// themselves, on the emulator).
func (b *Backend) await(ctx context.Context, s int, it uint32) error {
	w := b.ctrlWord(s, 0)
	for i := 0; ; i++ {
		if int32(w.Load()-it) >= 0 {
			return nil
		}
		switch {
		case i < 64:
		case i < 256 || b.spin:
			b.yielder.Yield()
			if b.spin && i%4096 == 0 {
				if err := b.awaitErr(ctx, s, it); err != nil {
					return err
				}
			}
		default:
			if err := b.awaitErr(ctx, s, it); err != nil {
				return err
			}
			d := time.Duration(1<<min(i-256, 9)) * time.Microsecond
			time.Sleep(d)
		}
	}
}
