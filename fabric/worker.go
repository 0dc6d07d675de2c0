package fabric

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// A worker owns one group's domains. Its goroutine is locked to an OS
// thread (pinned to a CPU when asked, before any domain is opened) and is
// the only code that touches the domains, the op-context pools and the
// FIFOs below, so none of that state needs a lock.
//
// Lifecycle:
//
//	run: pin -> open domains -> initDone -> loop -> drain -> close -> exited
//
// stop() asks the loop to drain: queued work fails with ErrClosed,
// in-flight ops are polled to completion until the deadline.
type worker struct {
	e     *Engine
	dev   Device
	spec  GroupSpec
	infos []DomainInfo
	doms  []*domState
	port  int // Config.ListenPort of its first domain, or 0

	// Each concern's state is kept in its own struct, declared in the
	// file of that concern's functions.
	queue      workQueue     // submission and back-pressure (queue.go)
	pool       opPool        // op contexts and transfer slots (pool.go)
	deadlines  deadlineScan  // transfer deadlines (deadline.go)
	peerHealth peerHealth    // peer liveness (liveness.go)
	watchdog   watchdogState // stuck provider calls (watchdog.go)
	// Every submit reads sleep.sleeping (kick), and the worker writes
	// watchdog.callStart around each provider call: apart, the line
	// stays in both cores' caches.
	_     [cacheLine]byte
	sleep sleepState // polling policy and sleep (sleep.go)
	hist  xferHist   // transfer latency and size (histogram.go)
	// completed counts the transfers that succeeded since the last
	// publishCounts, which adds them to the engine's count.
	completed uint64

	// Submitters read abandon and exitState, which change once: apart
	// from the fields changed per pass or per request, before and after.
	_        [cacheLine]byte
	initDone chan error
	exited   chan struct{}
	// abandon is closed by a Close that gave up on this worker (see
	// exitState): its Transfer waits end.
	abandon   chan struct{}
	exitState atomic.Int32
	stopping  bool
	deadline  time.Time
	closeErr  error
	_         [cacheLine]byte

	rr int // the NIC round-robin routing takes next (nextNIC)
	// nextPublish is when the loop next publishes its counts
	// (publishEvery), on the clock of now.
	nextPublish int64

	// now is the monotonic clock (nanotime), read at most once per pass
	// (see clockEvery and tick); clock counts the passes since it was.
	now   int64
	clock struct{ since, stride int }
	// missed are the immediates of this pass no counter took, with no
	// OnImm callback installed, run-length counted: flush settles them
	// under the engine's immediate lock, once per pass (settleMissed).
	missed []immRun

	groups map[uint32]*peerGroupState
	recvs  []recvSlot

	// pending completions for the dispatcher, handed over once per pass.
	pending []dispEvent
	outMu   sync.Mutex
	out     []dispEvent

	// regs is the group's registrations (regcache.go); regMode where
	// they run, set once the domains are open.
	regs    regCache
	regMode RegistrationMode
	immSrc  *MemoryRegion // local side of immediate-only writes (main worker)
}

// domState is one domain and the worker's queues for it.
type domState struct {
	d        rdma.Domain
	info     DomainInfo
	addr     Address
	peers    map[Address]*peerState
	peerList []*peerState
	byID     map[rdma.PeerID]*peerState
	lastPeer *peerState // the peer resolve returned last (peers are never removed)
	probe    [1]rdma.WriteOp
	fifo     ring
	batch    []rdma.WriteOp
	segs     []batchSeg
	events   []rdma.Event
	sendQ    []rdma.SendOp
	recvQ    []rdma.RecvOp
	posted   int // ops in flight on the provider
	// stalled is set once a peer of this domain stopped answering
	// without a reset (unanswered heartbeats, posts refused for the
	// handshake timeout): see closeDomains.
	stalled  bool
	probes   int   // heartbeats in flight, counted in posted
	reaped   int64 // write completions of this poll, for stats.InFlight
	idlePoll int64 // running mean of an empty poll's duration, ns
	depth    int
	piece    uint64 // the largest write posted here (split.go)
	stats    DomainStats
}

type batchSeg struct {
	ctx uint32
	n   int
}

const (
	batchSize   = 64
	eventsSize  = 64
	reqsPerPass = 64
	queueLen    = 4096
)

func newWorker(e *Engine, g GroupSpec, infos []DomainInfo) *worker {
	w := &worker{
		e: e, dev: g.Device, spec: g, infos: infos, now: nanotime(),
		queue:     workQueue{ctl: make(chan func(*worker), 16)},
		deadlines: deadlineScan{nextScan: noDeadline},
		initDone:  make(chan error, 1),
		exited:    make(chan struct{}),
		abandon:   make(chan struct{}),
		groups:    make(map[uint32]*peerGroupState),
	}
	w.queue.reqs.init(queueLen)
	return w
}

func (w *worker) run(opts DomainOptions) {
	defer close(w.exited)
	defer func() {
		if !w.exitState.CompareAndSwap(workerRunning, workerExited) {
			// Close gave up on this worker and left its wake to it.
			w.sleep.wake.close()
		}
	}()
	runtime.LockOSThread()
	defer w.startPolling()()
	defer runtime.UnlockOSThread()
	w.sleep.wake.tune()
	if err := w.open(opts); err != nil {
		w.closeDomains()
		w.initDone <- err
		return
	}
	w.initDone <- nil
	w.e.log.Debug("ferry worker start", "device", w.dev.String(), "nics", len(w.doms))
	defer w.e.log.Debug("ferry worker stop", "device", w.dev.String())
	w.loop()
	w.drain()
	w.flush()
	w.closeErr = errors.Join(w.closeErr, w.closeDomains())
}

func (w *worker) open(opts DomainOptions) error {
	if w.spec.Pin {
		var set unix.CPUSet
		set.Set(w.spec.CPU)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("pin worker to cpu %d: %w", w.spec.CPU, err)
		}
	}
	p := w.e.choice.Provider
	for _, info := range w.infos {
		o := opts
		o.Instance = int(domainInstance.Add(1))
		if w.port > 0 {
			o.Port = w.port + len(w.doms)
		}
		d, err := p.Open(info, o)
		if err != nil {
			return fmt.Errorf("open domain %s#%d: %w", info.Name, info.Index, err)
		}
		ds := &domState{
			d: d, info: d.Info(), addr: d.Address(),
			peers:  make(map[Address]*peerState),
			byID:   make(map[rdma.PeerID]*peerState),
			batch:  make([]rdma.WriteOp, batchSize),
			segs:   make([]batchSeg, 0, batchSize),
			events: make([]rdma.Event, eventsSize),
			depth:  opts.QueueDepth,
		}
		ds.info.Index = info.Index
		ds.piece = pieceSize(ds.info)
		ds.stats.Name = ds.info.Name
		if r, ok := d.(rdma.ProgressReporter); ok {
			w.watchdog.reporters = append(w.watchdog.reporters, r)
		}
		if s, ok := d.(rdma.Sleeper); ok {
			w.sleep.sleepers = append(w.sleep.sleepers, s)
			w.sleep.wake.watch(s.WakeFD())
		}
		w.doms = append(w.doms, ds)
		addLocalEndpoint(ds.addr)
	}
	w.regMode = registrationMode(w.doms, w.e.cfg.RegisterOnWorker)
	return nil
}

func (w *worker) closeDomains() error {
	var errs []error
	w.releaseAll()
	abandoned := false
	for _, ds := range w.doms {
		removeLocalEndpoint(ds.addr)
		if a, ok := ds.d.(rdma.Abandoner); ok && (ds.posted > ds.probes || ds.stalled) {
			// The drain ended with ops the provider still holds, or a
			// connection stopped moving with data possibly half way.
			abandoned = true
			why := fmt.Sprintf("%d operations in flight", ds.posted-ds.probes)
			if ds.stalled {
				why += " and a peer that stopped answering"
			}
			// Abandon returns nil when it could close the domain after
			// all (the ops it held are dropped, which the close drain has
			// reported already): nothing more to say then.
			if aerr := a.Abandon(); aerr != nil {
				errs = append(errs, fmt.Errorf("domain %s, with %s: %w", ds.info.Name, why, aerr))
			}
			continue
		}
		if err := ds.d.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if !abandoned {
		// An abandoned endpoint may still have receives posted into them.
		w.freeRecvBuffers()
	}
	return errors.Join(errs...)
}

func (w *worker) loop() {
	idle := 0
	for !w.stopping {
		did := false
		w.tick(idle)
		if w.now >= w.deadlines.nextScan {
			w.scanDeadlines()
		}
		if w.now >= w.peerHealth.nextLiveness {
			w.liveness()
		}
		select {
		case f := <-w.queue.ctl:
			f(w)
			did = true
			w.nextPublish = 0 // a reader may count on this pass (syncCounts)
			continue
		default:
		}
		if w.acceptPass() {
			did = true
		}
		if w.progress() {
			did = true
		}
		if len(w.peerHealth.lostLater) > 0 {
			w.declareLostLater()
		}
		w.endPass()
		if did {
			idle = 0
			continue
		}
		idle++
		if w.sleep.busyPoll {
			w.sleep.busyPoll = false
			idle = min(idle, idleSleepFrom)
		}
		if w.e.cfg.Poll == PollSpin {
			continue
		}
		w.idle(idle)
	}
}

// The adaptive idle phases, in passes with nothing done: spin, then
// yield, then sleep.
const (
	idleSpins     = 64
	idleSleepFrom = idleSpins + 256
)

// clockEvery is how many passes in a row with nothing done reuse the
// clock reading (w.now) of the pass before them. A pass after one that
// did work reads the clock, as does every pass that may have yielded or
// slept; a worker spinning empty reads it every clockEvery passes, not on
// each: reading it costs 40-170 ns on these virtual machines, more than
// the rest of an empty pass, and a spinning worker makes several empty
// passes per op. So w.now lags by at most clockEvery empty passes, which
// deadlines (milliseconds and up), liveness and the watchdog (seconds)
// do not notice.
//
// Passes that did work read it every pass, unless the passes since the
// last reading took less than shortPassNanos each (a fast provider, a
// worker that keeps up with its submitter and takes a request or two per
// pass): then every workClockEvery passes, so the clock lags by about a
// microsecond at most, below the histograms' first bucket, and such a
// pass does not spend a tenth of its time reading the clock (25 ns
// here, of about 250).
const (
	clockEvery     = 64
	workClockEvery = 4
	shortPassNanos = 250
)

// tick reads the clock into w.now when the pass, the idle-th in a row
// with nothing done before it, should (see clockEvery).
func (w *worker) tick(idle int) {
	c := &w.clock
	c.since++
	if idle == 0 && c.since >= c.stride || idle > 0 && idle%clockEvery == 0 ||
		idle >= idleSpins && w.e.cfg.Poll != PollSpin {
		t := nanotime()
		c.stride = 1
		if t-w.now < int64(c.since)*shortPassNanos {
			c.stride = workClockEvery
		}
		w.now, c.since = t, 0
	}
}

// drain fails everything not yet posted with ErrClosed and polls in-flight
// ops until they complete or the deadline passes.
func (w *worker) drain() {
	// Requests already queued: every submitter has left (Close waited).
	w.takeQueued(func(r *request) { w.refuse(r, ErrClosed) })
	for _, ds := range w.doms {
		for !ds.fifo.empty() {
			ci := ds.fifo.pop()
			c := &w.pool.ctxs[ci]
			c.inQueue = false
			w.failXfer(c.xfer, ErrClosed)
			w.maybeRetire(ci)
		}
		for i := range ds.sendQ {
			w.finishXfer(uint32(ds.sendQ[i].Context&ctxIndexMask), ErrClosed)
		}
		ds.sendQ = ds.sendQ[:0]
		ds.recvQ = ds.recvQ[:0]
	}
	for w.workInFlight() > 0 && time.Now().Before(w.deadline) {
		if !w.poll() {
			w.sleep.wake.sleep(20*time.Microsecond, false)
		}
	}
	// Whatever never completed is failed now, exactly once, and Close
	// says what it gave up on.
	n, failed := w.workInFlight(), 0
	for i := range w.pool.xfers {
		x := &w.pool.xfers[i]
		if x.live {
			if x.err == nil {
				x.err = ErrClosed
			}
			if !x.reported {
				failed++
			}
			w.completeXfer(uint32(i))
		}
	}
	if n > 0 {
		w.closeErr = fmt.Errorf("%d operations were still with the provider at the close deadline and were abandoned "+
			"(%d transfers failed with ErrClosed): %w", n, failed, ErrTimeout)
	}
	w.failRecvs(ErrClosed)
}

func (w *worker) opsInFlight() int {
	n := 0
	for _, ds := range w.doms {
		n += ds.posted
	}
	return n
}

// workInFlight is opsInFlight without heartbeats, which the close drain
// does not wait for: one to a peer that closed first may never come back.
func (w *worker) workInFlight() int {
	n := 0
	for _, ds := range w.doms {
		n += ds.posted - ds.probes
	}
	return n
}

// flush hands this pass's completions to the dispatcher, and its counts
// to readers (publishCounts).
func (w *worker) flush() {
	w.publishCounts()
	w.handOver()
}

// publishEvery is how often the loop publishes its counts on its own
// (publishCounts): readers ask for them first (syncCounts), so these
// publications only bound how old the counts of a worker stuck in a
// provider call are. Per pass they cost five or more locked adds, about
// as many locked instructions as the rest of a pass that takes one
// request.
const publishEvery = time.Millisecond

// endPass ends a pass of the loop: counts published every publishEvery,
// completions handed over.
func (w *worker) endPass() {
	if w.now >= w.nextPublish {
		w.publishCounts()
		w.nextPublish = w.now + int64(publishEvery)
	}
	w.handOver()
}

// handOver hands this pass's completions to the dispatcher.
func (w *worker) handOver() {
	if len(w.missed) > 0 {
		w.settleMissed()
	}
	if len(w.pending) == 0 {
		return
	}
	w.outMu.Lock()
	w.out = append(w.out, w.pending...)
	w.outMu.Unlock()
	clear(w.pending)
	w.pending = w.pending[:0]
	w.e.disp.kick()
}

// ring is a growable FIFO of op-context indexes.
type ring struct {
	buf        []uint32
	head, size int
}

func (r *ring) empty() bool { return r.size == 0 }

func (r *ring) push(v uint32) {
	if r.size == len(r.buf) {
		nb := make([]uint32, max(16, 2*len(r.buf)))
		for i := 0; i < r.size; i++ {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.size)%len(r.buf)] = v
	r.size++
}

func (r *ring) at(i int) uint32 { return r.buf[(r.head+i)%len(r.buf)] }

func (r *ring) pop() uint32 {
	v := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	return v
}

// DomainStats counts one domain's traffic.
type DomainStats struct {
	Name        string
	Posted      atomic.Uint64 // write, send and receive ops accepted
	Bytes       atomic.Uint64 // bytes written and sent
	Completions atomic.Uint64 // completions reaped (local ops and immediates)
	Errors      atomic.Uint64 // error completions and refused posts
	Imms        atomic.Uint64 // immediates received
	InFlight    atomic.Int64  // ops posted and not completed (completions taken off once per poll)
	Peers       atomic.Int64  // peer addresses resolved (Connect, or the first op to each)
}
