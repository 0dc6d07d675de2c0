package memsim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ferryrdma/ferry/a2a"
)

// One counter per immediate tag.
const numCounters = a2a.NumTags

// Options tune a World.
type Options struct {
	// MaxDelay, when positive, delays every RDMA write by a random time up
	// to it, so writes complete out of order.
	MaxDelay time.Duration
	// Seed seeds the delays.
	Seed uint64
}

// World is W simulated ranks.
type World struct {
	l     a2a.Layout
	opt   Options
	ranks []*rank
	rngMu sync.Mutex
	rng   *rand.Rand
}

type rank struct {
	w     *World
	id    int
	send  []byte
	recv  []byte
	table []uint32

	mu      sync.Mutex
	cond    *sync.Cond
	counter [numCounters]int64
	// Writes this rank posted that may still be in flight; waited for
	// before the send buffer is reused (every posted write is counted).
	inflight sync.WaitGroup
	closed   bool
}

// NewWorld builds the ranks of cfg (its Rank is ignored).
func NewWorld(cfg a2a.Config, opt Options) (*World, error) {
	cfg.Rank = 0
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	w := &World{l: l, opt: opt, rng: rand.New(rand.NewPCG(opt.Seed, 7))}
	for r := 0; r < l.WorldSize; r++ {
		rk := &rank{
			w:     w,
			id:    r,
			send:  make([]byte, l.SendBytes),
			recv:  make([]byte, l.RecvBytes),
			table: make([]uint32, l.Groups*l.RowWords),
		}
		rk.cond = sync.NewCond(&rk.mu)
		w.ranks = append(w.ranks, rk)
	}
	return w, nil
}

// Backend returns rank r's backend. Each may be handed to one a2a.Context.
func (w *World) Backend(r int) a2a.Backend { return &backend{rk: w.ranks[r]} }

// Residue returns an error naming every counter that is not zero: an
// immediate sent but never expected, or expected but never sent.
func (w *World) Residue() error {
	for _, rk := range w.ranks {
		rk.inflight.Wait()
		rk.mu.Lock()
		c := rk.counter
		rk.mu.Unlock()
		for i, v := range c {
			if v != 0 {
				return fmt.Errorf("rank %d: counter %d holds %d", rk.id, i, v)
			}
		}
	}
	return nil
}

// Poison fills every buffer with b, so a read of a row nobody wrote in
// this iteration shows up as wrong data.
func (w *World) Poison(b byte) {
	for _, rk := range w.ranks {
		for i := range rk.send {
			rk.send[i] = b
		}
		for i := range rk.recv {
			rk.recv[i] = b
		}
	}
}

func (rk *rank) credit(c int, n int64) {
	rk.mu.Lock()
	rk.counter[c] += n
	rk.mu.Unlock()
	rk.cond.Broadcast()
}

// wait consumes n credits of counter c, waiting until they arrived. Early
// arrivals are kept, as with the engine's credit counters.
func (rk *rank) wait(ctx context.Context, c int, n int) error {
	stop := context.AfterFunc(ctx, func() {
		rk.mu.Lock()
		rk.cond.Broadcast()
		rk.mu.Unlock()
	})
	defer stop()
	rk.mu.Lock()
	defer rk.mu.Unlock()
	for rk.counter[c] < int64(n) {
		if ctx.Err() != nil {
			return fmt.Errorf("memsim rank %d: counter %d has %d of %d: %w", rk.id, c, rk.counter[c], n, a2a.ErrTimeout)
		}
		if rk.closed {
			return fmt.Errorf("memsim rank %d: %w", rk.id, a2a.ErrClosed)
		}
		rk.cond.Wait()
	}
	rk.counter[c] -= int64(n)
	return nil
}

func (w *World) delay() time.Duration {
	if w.opt.MaxDelay <= 0 {
		return 0
	}
	w.rngMu.Lock()
	defer w.rngMu.Unlock()
	return time.Duration(w.rng.Int64N(int64(w.opt.MaxDelay)))
}

// write copies src into dst asynchronously, then credits one immediate of
// tag to rank to.
func (rk *rank) write(to *rank, tag a2a.Tag, dst, src []byte) {
	rk.inflight.Add(1)
	d := rk.w.delay()
	go func() {
		defer rk.inflight.Done()
		if d > 0 {
			time.Sleep(d)
		}
		copy(dst, src)
		to.credit(int(tag), 1)
	}()
}

// writeRows posts one planned transfer, split by bytes over nics writes
// when sharded, each carrying an immediate (empty slices included).
func (rk *rank) writeRows(t a2a.Transfer, tag a2a.Tag, sharded bool) {
	l := &rk.w.l
	stride := int64(l.PhaseStride(tag))
	to := rk.w.ranks[t.Peer]
	src := rk.send[int64(t.SrcRow)*stride : int64(t.SrcRow+t.Rows)*stride]
	dst := to.recv[int64(t.DstRow)*stride : int64(t.DstRow+t.Rows)*stride]
	if !sharded {
		rk.write(to, tag, dst, src)
		return
	}
	for i := 0; i < l.NICsPerGPU; i++ {
		off, n := a2a.ShardBytes(int64(len(src)), l.NICsPerGPU, i)
		rk.write(to, tag, dst[off:off+n], src[off:off+n])
	}
}

// barrier credits every other member once on tag and waits for all of
// them, after every write this rank posted has completed.
func (rk *rank) barrier(ctx context.Context, tag a2a.Tag, m *a2a.Members) error {
	rk.inflight.Wait()
	rk.signal(int(tag), m.Others)
	return rk.wait(ctx, int(tag), len(m.Others))
}

// signal credits each of ranks on counter c.
func (rk *rank) signal(c int, ranks []int32) {
	for _, q := range ranks {
		rk.w.ranks[q].credit(c, 1)
	}
}
