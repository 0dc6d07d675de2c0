package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/futex"
	"github.com/ferryrdma/ferry/internal/osyield"
)

// Doorbells. Where the transport lends this process its mapping of a
// peer's count table (ipc: fabric.Engine.MapPeer, once a route write
// mapped it), a signal to that peer need not travel through the engine
// workers of both ranks (a submission handed to this rank's worker, a
// ring message polled by the peer's, a counter woken there): the sender
// stores it into the peer's table itself, and the peer finds it there.
//
// The table then ends in a bell area (Options.Doorbells, TableBytes):
// one line of NumTags words per sending rank, then a doorbell word and a
// sleepers word, each on its own cache line. A signal of tag from rank q
// in iteration i is q's word tag in the receiver's area, set to
// stamp(generation, i) << 32 | the immediates it stands for (a write of
// zero rows carries one immediate per NIC it is split over; a barrier or
// a count row, one). The stamp is unique per generation and iteration,
// and a rank writes its word of a tag for iteration i+1 only after the
// receiver took the word of iteration i (a barrier lies between), so a
// word is read once per iteration and never confused with an older one.
// Before the first iteration of a generation (stamp with iteration 0, the
// join phases) nothing is rung: the engine carries every signal.
//
// A rank that rings a peer stores the rows first (its streamed stores
// fenced once after them: rows.Fence), then its word, then adds one to the peer's doorbell
// and, when the peer said it sleeps there, wakes it (a futex on the
// shared word, where the system has one). A wait counts the credits the
// rung words of the current stamp stand for and takes the rest from the
// tag's immediate counter, so a peer that rings and one that writes
// through the engine (its mapping not lent yet, or taken away) are
// waited for alike. It spins briefly, then yields, then sleeps on the
// doorbell for at most bellNap (shorter while an immediate may still come
// through the engine), and between naps checks its context and whether
// the engine declared an active rank lost: a dead peer fails the wait
// with an *a2a.RankError, never a hang.

// bellLine is one cache line; a rank's words of every tag fill one.
const bellLine = 64

func init() {
	if NumTags*8 > bellLine {
		panic("a2a wiring: a bell line holds at most 8 tags")
	}
}

// bellBase is where the bell area starts in a table of l.
func bellBase(l *a2a.Layout) int { return (l.CountTableBytes + bellLine - 1) / bellLine * bellLine }

// Each sending rank has bellLines lines in a receiver's area: its words
// of every tag, then whether its copies hold references (pull.go).
const (
	bellLines = 2
	lineTags  = 0
	lineRefs  = 1
)

// senderLine is where line k of rank q's lines starts in a table.
func senderLine(l *a2a.Layout, q, k int) int { return bellBase(l) + (q*bellLines+k)*bellLine }

// doorbell is where a table's doorbell word lies; its sleepers word is on
// the next line.
func doorbell(l *a2a.Layout) int { return bellBase(l) + l.WorldSize*bellLines*bellLine }

// TableBytes is the size of a count table with its bell area: what a
// backend allocates and registers when it sets Options.Doorbells.
func TableBytes(l *a2a.Layout) int { return doorbell(l) + 2*bellLine }

// bellSpins and bellYields bound the busy part of a wait (a few
// microseconds each way) before it sleeps on the doorbell.
const (
	bellSpins  = 64
	bellYields = 16
	// bellNap is the longest sleep on the doorbell between checks of
	// the context and of lost ranks; bellNapEngine, while some peer may
	// still signal through the engine (whose arrivals ring no bell).
	bellNap       = time.Millisecond
	bellNapEngine = 50 * time.Microsecond
)

// bells is the wiring's doorbell state.
type bells struct {
	on    bool
	own   []byte               // this rank's table, bell area included
	peer  []*fabric.PeerMemory // per rank: its table as this process maps it (nil: not lent yet)
	miss  []uint32             // per rank: the iteration MapPeer last found its table not lent
	iter  uint32               // iteration of the current generation (0: before the first)
	rung  atomic.Uint64        // signals rung in place of engine writes, since New
	yield osyield.Yielder
	// crowded: the members outnumber the CPUs of the one that has
	// fewest, so ranks must take turns on cores: waiting ranks then
	// better sleep on the engine's counters (measured: W=4 on 2 cores
	// ran slower with doorbells) and doorbells stay off.
	crowded bool
}

// BeginIteration starts the next iteration's stamp: the backend calls it
// once per iteration, after the barrier that ended the previous one and
// before its first signal.
func (w *Wiring) BeginIteration() {
	w.bell.iter++
	if w.bell.iter&0xffffff == 0 {
		w.bell.iter++
	}
}

func (w *Wiring) stamp() uint64 {
	return uint64(w.gen&0xff)<<24 | uint64(w.bell.iter&0xffffff)
}

// ringing says whether signals may use the bells now: doorbells on, an
// iteration begun, and a transport that lends mappings (every rank's
// engine runs the same one, so where this one lends none, no peer rings).
func (w *Wiring) ringing() bool {
	return w.bell.on && w.bell.iter != 0 && !w.noLend && !w.bell.crowded
}

// crowded says whether m's members outnumber the CPUs of the member with
// fewest (each member's count rides after its descriptors; one that sent
// none counts as one CPU). Every member computes the same answer, as
// waits must agree with signals: doorbells on one side only would leave
// a wait on the engine's counter while the peer rings.
func (w *Wiring) crowded(m *a2a.Members) bool {
	cpus := -1
	for q, a := range m.Active {
		if !a {
			continue
		}
		d := w.descs[q]
		if q == w.l.Rank {
			d = w.msg
		}
		n := 1
		if len(d) >= 4 {
			n = int(binary.LittleEndian.Uint32(d[len(d)-4:]))
		}
		if cpus < 0 || n < cpus {
			cpus = n
		}
	}
	return m.Count > cpus
}

func word(b []byte, off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[off])) }
func word32(b []byte, off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&b[off]))
}

// peerTable returns rank q's table as this process maps it, held until
// the caller releases m, or nil when the transport lends none (yet).
func (w *Wiring) peerTable(q int) (b []byte, m *fabric.PeerMemory) {
	m = w.bell.peer[q]
	if m == nil {
		// Asking goes through the engine's worker: once per iteration.
		if w.noLend || w.bell.miss[q] == w.bell.iter {
			return nil, nil
		}
		var ok bool
		var err error
		m, ok, err = w.eng.MapPeer(fabric.HostDevice, w.tableDesc[q])
		if errors.Is(err, fabric.ErrNotSupported) {
			w.noLend = true
		}
		if !ok {
			w.bell.miss[q] = w.bell.iter
			return nil, nil
		}
		w.bell.peer[q] = m
	}
	b, ok := m.Acquire()
	if !ok {
		w.bell.peer[q] = nil // being taken away: through the engine, ask later
		return nil, nil
	}
	if len(b) < TableBytes(w.l) {
		m.Release()
		return nil, nil
	}
	return b, m
}

// ring stores tag's word of this iteration, standing for credits
// immediates, into rank q's table and wakes q if it sleeps. It reports
// false when q's table is not lent: the caller writes through the engine.
func (w *Wiring) ring(q int, tag a2a.Tag, credits int) bool {
	if !w.ringing() {
		return false
	}
	b, m := w.peerTable(q)
	if b == nil {
		return false
	}
	w.ringHeld(b, tag, credits)
	m.Release()
	return true
}

// ringHeld rings the peer whose table b is (held by the caller).
func (w *Wiring) ringHeld(b []byte, tag a2a.Tag, credits int) {
	word(b, senderLine(w.l, w.l.Rank, lineTags)+int(tag)*8).Store(w.stamp()<<32 | uint64(uint32(credits)))
	w.wake(b)
	w.bell.rung.Add(1)
}

// wake adds one to the doorbell of the table b and wakes its sleepers.
func (w *Wiring) wake(b []byte) {
	bell := doorbell(w.l)
	word32(b, bell).Add(1)
	if word32(b, bell+bellLine).Load() != 0 {
		futex.WakeAll(word32(b, bell), futex.Shared)
	}
}

// Rung returns how many signals (count rows, rows-written signals,
// barrier and node signals) went to a peer's doorbell instead of through
// the engine, since New. Safe to call from any goroutine.
func (w *Wiring) Rung() uint64 { return w.bell.rung.Load() }

// LostRankOr returns the *a2a.RankError of a rank the engine declared
// lost, else one naming rank q with a2a.ErrPeerLost.
func (w *Wiring) LostRankOr(q int) error {
	if err := w.LostRank(); err != nil {
		return err
	}
	return &a2a.RankError{Rank: q, Err: fmt.Errorf("its count table was unmapped: %w", fabric.ErrPeerLost)}
}

// warmBells writes this rank's (zero) line into every other active
// rank's bell area through the engine and waits for the writes, so that
// a transport that maps a region at its first write (ipc) lends every
// peer's table from the first iteration on, the ranks no route write
// reaches (replicas of one group) included. The line is this rank's own
// in its own table, which no one writes.
func (w *Wiring) warmBells(ctx context.Context, m *a2a.Members) error {
	if len(m.Others) == 0 {
		return nil
	}
	off := uint64(senderLine(w.l, w.l.Rank, lineTags))
	ts := make([]fabric.ScatterTarget, 0, len(m.Others))
	for _, q := range m.Others {
		ts = append(ts, fabric.ScatterTarget{Dst: w.tableDesc[q], Length: bellLine, SrcOffset: off, DstOffset: off})
	}
	var done fabric.TransferCounter
	s := fabric.ScatterWrite{Src: w.tableReg, Targets: ts, Route: fabric.ShardPeers()}
	if err := w.eng.SubmitScatter(s, fabric.Count(&done)); err != nil {
		return fmt.Errorf("a2a wiring: warm the doorbells: %w", err)
	}
	if err := done.Wait(ctx, 1); err != nil {
		return fmt.Errorf("a2a rank %d: warm the doorbells (%s): %w: %w", w.l.Rank, w.suspects(), a2a.ErrTimeout, err)
	}
	if err := done.Err(); err != nil {
		if re := w.rankError(err); re != nil {
			return fmt.Errorf("a2a rank %d: warm the doorbells: %w", w.l.Rank, re)
		}
		return fmt.Errorf("a2a rank %d: warm the doorbells: %w", w.l.Rank, err)
	}
	return nil
}

// rungCredits sums the credits of tag's words of the current stamp.
func (w *Wiring) rungCredits(tag a2a.Tag) int {
	own, s := w.bell.own, w.stamp()
	n := 0
	for q, a := range w.active {
		if !a || q == w.l.Rank {
			continue
		}
		if v := word(own, senderLine(w.l, q, lineTags)+int(tag)*8).Load(); v>>32 == s {
			n += int(uint32(v))
		}
	}
	return n
}

// allLent says whether every other active rank's table is lent here: a
// sign they ring this rank rather than write through the engine.
func (w *Wiring) allLent() bool {
	for q, a := range w.active {
		if a && q != w.l.Rank && w.bell.peer[q] == nil {
			return false
		}
	}
	return true
}

// waitBells takes n signals of tag, rung or arrived as immediates.
func (w *Wiring) waitBells(ctx context.Context, tag a2a.Tag, n int) error {
	c := w.counters[tag]
	if c == nil {
		return fmt.Errorf("a2a wait %v: %w", tag, ErrNoCounter)
	}
	var nw napper
	for {
		d := w.bellValue()
		got := w.rungCredits(tag)
		if rest := n - got; rest <= 0 || c.Count() >= int64(rest) {
			if rest <= 0 {
				return nil
			}
			return w.waitImm(ctx, tag, rest)
		}
		if err := nw.nap(ctx, w, d, !w.allLent()); err != nil {
			return fmt.Errorf("a2a rank %d: waiting for %d %v signals (%d rung, %d arrived): %w", w.l.Rank, n, tag,
				got, c.Count(), err)
		}
	}
}

// bellValue is this rank's doorbell now: a wait reads it before it looks
// at the words, and sleeps only while it has not changed.
func (w *Wiring) bellValue() uint32 { return word32(w.bell.own, doorbell(w.l)).Load() }

// napper paces one wait: a few spins, a few yields, then sleeps on the
// doorbell, checking the deadline and lost ranks at most every bellNap.
type napper struct {
	i         int
	lastCheck time.Time
}

// nap waits a little for the doorbell to move from d. engine says an
// immediate may still come through the engine (it rings no bell): the
// sleeps are shorter then. It fails when ctx ended or a rank was lost.
func (n *napper) nap(ctx context.Context, w *Wiring, d uint32, engine bool) error {
	n.i++
	if n.i < bellSpins {
		return nil
	}
	if n.i < bellSpins+bellYields {
		// The core goes to whoever waits for it (the peer, on a machine
		// with more ranks than cores), not only to this process's
		// goroutines.
		w.bell.yield.Yield()
		return nil
	}
	now := time.Now()
	if now.Sub(n.lastCheck) >= bellNap {
		n.lastCheck = now
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w: %w", w.suspects(), a2a.ErrTimeout, ctx.Err())
		}
		if err := w.LostRank(); err != nil {
			return err
		}
	}
	d0 := bellNap
	if engine {
		d0 = bellNapEngine
	}
	own := w.bell.own
	bell := word32(own, doorbell(w.l))
	sleepers := word32(own, doorbell(w.l)+bellLine)
	sleepers.Store(1)
	if bell.Load() == d {
		futex.Wait(bell, d, d0, futex.Shared)
	}
	sleepers.Store(0)
	return nil
}

// waitImm takes n credits of tag's immediate counter.
func (w *Wiring) waitImm(ctx context.Context, tag a2a.Tag, n int) error {
	if err := w.counters[tag].Wait(ctx, int64(n)); err != nil {
		if re := w.rankError(err); re != nil {
			return fmt.Errorf("a2a rank %d: waiting for %d %v immediates: %w", w.l.Rank, n, tag, re)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("a2a rank %d: waiting for %d %v immediates (%s): %w: %w", w.l.Rank, n, tag, w.suspects(), a2a.ErrTimeout, err)
		}
		return fmt.Errorf("a2a rank %d: waiting for %v immediates: %w", w.l.Rank, tag, err)
	}
	return nil
}
