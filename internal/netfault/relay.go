package netfault

import (
	"container/heap"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Impairments describe what a Relay does to each packet, independently
// per packet and per direction.
type Impairments struct {
	// Seed makes the random decisions repeatable (per direction, in
	// packet order).
	Seed uint64
	// Loss is the probability that a packet is dropped.
	Loss float64
	// Delay holds every packet this long; Jitter varies it uniformly
	// within [Delay-Jitter, Delay+Jitter].
	Delay, Jitter time.Duration
	// Reorder is the probability that a packet is held ReorderGap longer
	// than its delay, so later packets overtake it.
	Reorder    float64
	ReorderGap time.Duration
	// Duplicate is the probability that a packet is delivered twice.
	Duplicate float64
	// Corrupt is the probability that one byte past the IP header is
	// flipped.
	Corrupt float64
}

// Stats counts what a Relay did, both directions together.
type Stats struct {
	Forwarded, Dropped, DroppedDown, Duplicated, Corrupted, Reordered, Delayed uint64
}

// Relay forwards packets between two packet devices (each Read returns one
// packet, each Write sends one) with impairments. Its methods are safe for
// concurrent use.
type Relay struct {
	imp   atomic.Pointer[Impairments]
	down  atomic.Bool
	stats struct {
		forwarded, dropped, droppedDown, duplicated, corrupted, reordered, delayed atomic.Uint64
	}
	closers []io.Closer
	wg      sync.WaitGroup
	quit    chan struct{}
	once    sync.Once
}

// MaxPacket bounds the packets a Relay reads (a TUN MTU of at most 65535).
const MaxPacket = 65536

// NewRelay starts forwarding between a and b (closed by Close).
func NewRelay(a, b io.ReadWriteCloser, imp Impairments) *Relay {
	r := &Relay{quit: make(chan struct{}), closers: []io.Closer{a, b}}
	r.imp.Store(&imp)
	for i, d := range [][2]io.ReadWriteCloser{{a, b}, {b, a}} {
		dir := newDirection(r, d[1], imp.Seed+uint64(i)*0x9e3779b97f4a7c15)
		r.wg.Add(2)
		go func() { defer r.wg.Done(); dir.runReader(d[0]) }()
		go func() { defer r.wg.Done(); dir.runScheduler() }()
	}
	return r
}

// SetImpairments replaces the impairments for packets read from now on.
func (r *Relay) SetImpairments(imp Impairments) { r.imp.Store(&imp) }

// SetDown takes the link down (every packet is dropped) or up again.
func (r *Relay) SetDown(down bool) { r.down.Store(down) }

// Stats returns the counters so far.
func (r *Relay) Stats() Stats {
	s := &r.stats
	return Stats{Forwarded: s.forwarded.Load(), Dropped: s.dropped.Load(), DroppedDown: s.droppedDown.Load(),
		Duplicated: s.duplicated.Load(), Corrupted: s.corrupted.Load(), Reordered: s.reordered.Load(),
		Delayed: s.delayed.Load()}
}

// Close stops the relay, closes both devices and waits for its goroutines.
func (r *Relay) Close() error {
	var errs []error
	r.once.Do(func() {
		close(r.quit)
		for _, c := range r.closers {
			errs = append(errs, c.Close())
		}
		r.wg.Wait()
	})
	return errors.Join(errs...)
}

// direction is one way through the relay: a reader deciding each packet's
// fate and a scheduler releasing delayed packets in time order.
type direction struct {
	r    *Relay
	out  io.Writer
	rng  *rand.Rand
	mu   sync.Mutex
	q    packetHeap
	seq  uint64
	wake chan struct{}
}

func newDirection(r *Relay, out io.Writer, seed uint64) *direction {
	return &direction{r: r, out: out, rng: rand.New(rand.NewPCG(seed, seed^0x5bd1e995)), wake: make(chan struct{}, 1)}
}

func (d *direction) runReader(in io.Reader) {
	buf := make([]byte, MaxPacket)
	for {
		n, err := in.Read(buf)
		if err != nil {
			select {
			case <-d.r.quit:
				return
			default:
			}
			if errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) {
				return
			}
			continue // a transient error on one packet
		}
		d.handle(buf[:n])
	}
}

// handle decides one packet's fate.
func (d *direction) handle(p []byte) {
	r := d.r
	if r.down.Load() {
		r.stats.droppedDown.Add(1)
		return
	}
	imp := r.imp.Load()
	if imp.Loss > 0 && d.rng.Float64() < imp.Loss {
		r.stats.dropped.Add(1)
		return
	}
	copies := 1
	if imp.Duplicate > 0 && d.rng.Float64() < imp.Duplicate {
		copies = 2
		r.stats.duplicated.Add(1)
	}
	pkt := p // the reader's buffer: copied below if the packet waits
	if imp.Corrupt > 0 && d.rng.Float64() < imp.Corrupt && len(pkt) > 20 {
		hdr := int(pkt[0]&0x0f) * 4 // IPv4 header length; IPv6 is 40
		if pkt[0]>>4 == 6 {
			hdr = 40
		}
		if hdr < len(pkt) {
			pkt[hdr+d.rng.IntN(len(pkt)-hdr)] ^= 0x20
			r.stats.corrupted.Add(1)
		}
	}
	delay := imp.Delay
	if imp.Jitter > 0 {
		delay += time.Duration(d.rng.Int64N(int64(2*imp.Jitter)+1)) - imp.Jitter
	}
	if imp.Reorder > 0 && d.rng.Float64() < imp.Reorder {
		delay += imp.ReorderGap
		r.stats.reordered.Add(1)
	}
	if delay > 0 {
		pkt = append([]byte(nil), pkt...)
	}
	for i := 0; i < copies; i++ {
		if delay <= 0 {
			d.send(pkt)
			continue
		}
		r.stats.delayed.Add(1)
		d.mu.Lock()
		d.seq++
		heap.Push(&d.q, queued{at: time.Now().Add(delay), seq: d.seq, pkt: pkt})
		d.mu.Unlock()
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

func (d *direction) send(pkt []byte) {
	if _, err := d.out.Write(pkt); err == nil {
		d.r.stats.forwarded.Add(1)
	}
}

// runScheduler releases delayed packets when their time comes.
func (d *direction) runScheduler() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		d.mu.Lock()
		var next time.Duration = time.Hour
		for d.q.Len() > 0 {
			if wait := time.Until(d.q[0].at); wait > 0 {
				next = wait
				break
			}
			p := heap.Pop(&d.q).(queued)
			d.mu.Unlock()
			d.send(p.pkt)
			d.mu.Lock()
		}
		d.mu.Unlock()
		t.Reset(next)
		select {
		case <-d.r.quit:
			return
		case <-d.wake:
		case <-t.C:
		}
	}
}

type queued struct {
	at  time.Time
	seq uint64
	pkt []byte
}

// packetHeap orders packets by release time, then arrival.
type packetHeap []queued

func (h packetHeap) Len() int { return len(h) }
func (h packetHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h packetHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *packetHeap) Push(x any)   { *h = append(*h, x.(queued)) }
func (h *packetHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
