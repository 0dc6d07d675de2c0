package fabric

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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

	// Each concern's state is kept in its own struct, declared in the
	// file of that concern's functions.
	imms   immTable     // immediate counters and callbacks (imm.go)
	life   lifecycle    // open, close and the watchdog's end (close.go)
	regs   regTable     // registered memory (register.go)
	groups groupTable   // peer groups (peergroup.go)
	send   sendChannel  // the two-sided side channel's buffers (sendrecv.go)
	peers  peerRegistry // lost and watched peers (peerwatch.go)
	leases leaseTable   // immediate leases (lease.go)
	notes  noteChannel  // notifications: inbox and send queue (notify.go)

	disp *dispatcher

	immBuf *HostBuffer

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
		cfg:    cfg,
		log:    newEngineLogger(cfg.Logger, cfg.LogLevel),
		choice: choice,
		byDev:  make(map[Device]*worker),
		regs:   regTable{regions: make(map[*MemoryRegion]struct{})},
		groups: groupTable{ids: make(map[string]PeerGroup)},
		imms:   immTable{held: make(map[uint32]int64)},
		life:   lifecycle{closing: make(chan struct{}), watchdogDone: make(chan struct{})},
	}
	empty := map[uint32]*immEntry{}
	e.imms.counters.Store(&empty)
	e.imms.fns.Store(new([]func(uint32)))

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
		if err := w.sleep.wake.open(); err != nil {
			for _, o := range e.workers[:i] {
				o.sleep.wake.close()
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
		close(e.life.watchdogDone)
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
	case w.queue.ctl <- func(w *worker) { f(w); close(done) }:
		w.kick()
	case <-w.exited:
		e.leave()
		return ErrClosed
	case <-e.life.closing:
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
	e.life.submitters.Add(1)
	if e.life.closed.Load() {
		e.life.submitters.Add(-1)
		return false
	}
	return true
}

func (e *Engine) leave() { e.life.submitters.Add(-1) }
