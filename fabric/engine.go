package fabric

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryrdma/ferry/fabric/topology"
)

// Engine is a TransferEngine: workers that own NIC domains, a dispatcher
// for callbacks, and the engine-wide immediate counters. Its methods are
// safe for concurrent use.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	choice  Choice
	workers []*worker // sorted by device; workers[0] is the main worker
	byDev   map[Device]*worker

	imm    atomic.Pointer[map[uint32]*immEntry]
	immMu  sync.Mutex
	immFns atomic.Pointer[[]func(uint32)]
	// held counts immediates that arrived with no counter and no OnImm
	// callback, per value, until a counter claims them; guarded by immMu.
	held map[uint32]int64
	// immOut holds dispatcher events raised outside the workers (a
	// registration that finds held immediates); guarded by immMu.
	immOut []dispEvent

	disp *dispatcher

	// peers is the engine-wide view of lost and watched peers.
	peers peerRegistry

	closed  atomic.Bool
	closing chan struct{} // closed when Close starts
	// watchdogDone is closed when the watchdog goroutine has ended (or
	// at Open when there is none).
	watchdogDone chan struct{}
	submitters   atomic.Int64
	closeOnce    sync.Once
	closeErr     error
	regMu        sync.Mutex
	regions      map[*MemoryRegion]struct{}
	groupsMu     sync.Mutex
	groupIDs     map[string]PeerGroup
	nextGroupID  uint32

	sendPool chan int32
	sendBuf  *HostBuffer
	sendReg  *MemoryRegion
	sendOnce sync.Once
	sendErr  error
	immBuf   *HostBuffer

	engineCounters
}

var domainInstance atomic.Int64

// newIncarnation is an engine's random identity, never 0: addresses and
// descriptors carry it, so a later engine on the same endpoint refuses them.
func newIncarnation() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand does not fail on Linux
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// Open starts an engine: it chooses the transport, starts one worker per
// group (each pins itself, then opens its domains) and the dispatcher.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("open engine: %w", err)
	}
	cfg.withDefaults()
	opts := DomainOptions{Node: cfg.Node, QueueDepth: cfg.QueueDepth, HandshakeTimeout: cfg.HandshakeTimeout,
		Incarnation: newIncarnation()}
	choice, err := ChooseTransport(cfg.Transport, opts)
	if err != nil {
		return nil, fmt.Errorf("open engine: %w", err)
	}
	e := &Engine{
		cfg:      cfg,
		log:      newEngineLogger(cfg.Logger, cfg.LogLevel),
		choice:   choice,
		byDev:    make(map[Device]*worker),
		regions:  make(map[*MemoryRegion]struct{}),
		groupIDs: make(map[string]PeerGroup),
		held:     make(map[uint32]int64),
		closing:  make(chan struct{}),

		watchdogDone: make(chan struct{}),
	}
	empty := map[uint32]*immEntry{}
	e.imm.Store(&empty)
	e.immFns.Store(new([]func(uint32)))

	if len(cfg.Groups) == 0 {
		spec := topology.Spec{}
		if cfg.Topology != nil {
			spec = *cfg.Topology
		}
		spec.NICs = TopologyNICs(choice)
		topo, err := topology.Detect(spec)
		if err != nil {
			return nil, fmt.Errorf("open engine: topology: %w", err)
		}
		if cfg.Groups, err = PlaceGroups(choice, topo, cfg.GPUs, cfg.NICs); err != nil {
			return nil, fmt.Errorf("open engine: %w", err)
		}
	}
	specs := slices.Clone(cfg.Groups)
	slices.SortStableFunc(specs, func(a, b GroupSpec) int {
		if deviceLess(a.Device, b.Device) {
			return -1
		}
		if deviceLess(b.Device, a.Device) {
			return 1
		}
		return 0
	})
	next, port := 0, cfg.ListenPort
	for i, g := range specs {
		if i > 0 && specs[i-1].Device == g.Device {
			return nil, fmt.Errorf("open engine: device %s in two groups: %w", g.Device, ErrInvalidArgument)
		}
		infos := g.Domains
		if len(infos) == 0 {
			n := g.NICs
			if n <= 0 {
				n = cfg.NICs
			}
			if n > MaxNICs {
				return nil, fmt.Errorf("open engine: %d nics for %s (at most %d): %w", n, g.Device, MaxNICs, ErrInvalidArgument)
			}
			// Take distinct domains when there are enough; a provider with
			// fewer (one loopback interface) emulates NICs with several
			// endpoints on the same domain.
			for k := 0; k < n; k++ {
				di := choice.Domains[(next+k)%len(choice.Domains)]
				di.Index = k
				infos = append(infos, di)
			}
			if next+n <= len(choice.Domains) {
				next += n
			}
		}
		if len(infos) == 0 || len(infos) > MaxNICs {
			return nil, fmt.Errorf("open engine: %d nics for %s (1 to %d): %w", len(infos), g.Device, MaxNICs, ErrInvalidArgument)
		}
		w := newWorker(e, g, infos)
		if cfg.ListenPort > 0 {
			w.port, port = port, port+len(infos)
		}
		e.workers = append(e.workers, w)
		e.byDev[g.Device] = w
	}
	for i, w := range e.workers {
		if err := w.wake.open(); err != nil {
			for _, o := range e.workers[:i] {
				o.wake.close()
			}
			return nil, fmt.Errorf("open engine: %w", err)
		}
	}
	e.disp = newDispatcher(e)

	// Start every worker first so NICs of different groups open in
	// parallel, then collect their results.
	for _, w := range e.workers {
		go w.run(opts)
	}
	var errs []error
	for _, w := range e.workers {
		select {
		case err := <-w.initDone:
			if err != nil {
				errs = append(errs, fmt.Errorf("group %s: %w", w.dev, err))
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("group %s: %w", w.dev, ctxErr(ctx)))
			// The worker still reports; wait for it so nothing leaks.
			if err := <-w.initDone; err != nil {
				errs = append(errs, err)
			}
		}
	}
	go e.disp.run()
	if cfg.StuckTimeout > 0 {
		go e.runWatchdog()
	} else {
		close(e.watchdogDone)
	}
	if len(errs) == 0 {
		if err := e.initImmSource(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.Close(cctx)
		return nil, fmt.Errorf("open engine: %w", errors.Join(errs...))
	}
	e.log.Info("ferry engine open", "provider", choice.Provider.Name(), "transport", choice.Transport,
		"reason", choice.Reason, "groups", len(e.workers), "poll", cfg.Poll.String())
	return e, nil
}

// initImmSource registers a small local buffer on the main worker, the
// local side of immediate-only writes (Imm, Barrier): some providers (EFA)
// want a valid local descriptor even for zero bytes. It is released with
// the worker's other registrations at Close.
func (e *Engine) initImmSource() error {
	buf, err := AllocHost(4096)
	if err != nil {
		return err
	}
	r := &MemoryRegion{eng: e, w: e.main(), span: buf.Span(), access: AccessLocal}
	var regErr error
	if err := e.control(e.main(), func(w *worker) {
		if regErr = w.register(r); regErr == nil {
			w.immSrc = r
		}
	}); err != nil {
		_ = buf.Free()
		return err
	}
	if regErr != nil {
		_ = buf.Free()
		return fmt.Errorf("register immediate source: %w", regErr)
	}
	e.immBuf = buf
	return nil
}

// main is the one definition of the main worker: the group of the least
// device (the host group if there is one, else the lowest CUDA ordinal). It
// serves host memory when there is no host group, immediates, barriers,
// sends and receives, and its NIC 0 address is MainAddress.
func (e *Engine) main() *worker { return e.workers[0] }

// MainDevice returns the main worker's device.
func (e *Engine) MainDevice() Device {
	if e == nil {
		return Device{}
	}
	return e.main().dev
}

// MainAddress is the address peers send to and reply to: NIC 0 of the
// main worker.
func (e *Engine) MainAddress() Address {
	if e == nil {
		return Address{}
	}
	return e.main().doms[0].addr
}

// NICs returns the main worker's NIC count.
func (e *Engine) NICs() int {
	if e == nil {
		return 0
	}
	return len(e.main().doms)
}

// workerFor returns the worker serving memory on dev.
func (e *Engine) workerFor(dev Device) (*worker, error) {
	if w, ok := e.byDev[dev]; ok {
		return w, nil
	}
	if dev.IsHost() {
		return e.main(), nil
	}
	return nil, fmt.Errorf("no group for device %s: %w", dev, ErrInvalidArgument)
}

// control runs f on w's thread and waits for it.
func (e *Engine) control(w *worker, f func(*worker)) error {
	if !e.enter() {
		return ErrClosed
	}
	done := make(chan struct{})
	select {
	case w.ctl <- func(w *worker) { f(w); close(done) }:
		w.kick()
	case <-w.exited:
		e.leave()
		return ErrClosed
	case <-e.closing:
		e.leave()
		return ErrClosed
	}
	e.leave()
	select {
	case <-done:
		return nil
	case <-w.exited:
		return ErrClosed
	case <-w.abandon:
		return fmt.Errorf("group %s: %w", w.dev, ErrAbandoned)
	}
}

// enter registers a submitter; false once the engine is closing.
func (e *Engine) enter() bool {
	e.submitters.Add(1)
	if e.closed.Load() {
		e.submitters.Add(-1)
		return false
	}
	return true
}

func (e *Engine) leave() { e.submitters.Add(-1) }

// enqueue hands r to w without blocking on the NIC. While the worker's
// queue is full it waits, as back-pressure, until the request's deadline
// (see enqueueFull).
func (e *Engine) enqueue(w *worker, r *request) error {
	if err := r.c.begin(); err != nil {
		return err
	}
	if !e.enter() {
		r.c.abort()
		return ErrClosed
	}
	if w.exitState.Load() == workerAbandoned {
		e.leave()
		r.c.abort()
		return fmt.Errorf("%s: group %s: %w", r.kind, w.dev, ErrAbandoned)
	}
	if t := r.c.t; t != nil && t.abandon.Load() != &w.abandon {
		// A Transfer is usually reused on one worker: the store (a locked
		// exchange) is paid when it changes, not per submit.
		t.abandon.Store(&w.abandon)
	}
	select {
	case w.reqs <- *r:
	default:
		if err := e.enqueueFull(w, r); err != nil {
			e.leave()
			r.c.abort()
			return err
		}
	}
	w.kick()
	e.leave()
	return nil
}
