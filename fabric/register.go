package fabric

import (
	"errors"
	"fmt"
	"sync"
)

// Register registers span with every NIC of the group that owns its device
// (host memory goes to the host group, or the main worker when there is
// none). With AccessRemoteWrite the region has a Descriptor peers can write
// through; with AccessRemoteRead (see SubmitRead) peers can also read it. A
// failure part way unregisters what was done: nothing leaks.
//
// Registrations are cached by range (see RegistrationStats): a span inside
// one already registered on the same group, with the same remote access
// (or, for a local-only span, any access), is a lookup that returns a new
// handle sharing that registration; each handle is unregistered on its
// own, and the memory is released when the last one is. A span that only
// overlaps a registration, or needs more access than it has, is registered
// anew.
//
// Where the provider allows it (RegistrationMode), the registration runs
// beside the group's worker, every NIC of the group at once: transfers of
// the group keep moving meanwhile. Register is safe for concurrent use.
func (e *Engine) Register(span MemorySpan, access Access) (*MemoryRegion, error) {
	if e == nil {
		return nil, errNilEngine
	}
	if span.Addr == 0 || span.Len == 0 {
		return nil, fmt.Errorf("register [%#x, +%d): %w", span.Addr, span.Len, ErrInvalidArgument)
	}
	if span.Addr+uintptr(span.Len) < span.Addr {
		return nil, fmt.Errorf("register [%#x, +%d) wraps: %w", span.Addr, span.Len, ErrInvalidArgument)
	}
	if span.Device.IsHost() {
		span.DmabufFD = -1
	}
	w, err := e.workerFor(span.Device)
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	if err := checkAccess(w, access); err != nil {
		return nil, err
	}
	// Close waits for calls inside the engine: the handle is in the
	// table before Close marks every handle dead.
	if !e.enter() {
		return nil, fmt.Errorf("register: %w", ErrClosed)
	}
	defer e.leave()
	reg, err := w.regs.lookup(span, access)
	if err != nil {
		return nil, err
	}
	if reg == nil {
		if reg, err = e.registerNew(w, span, access); err != nil {
			return nil, err
		}
	}
	r := newHandle(e, reg, span, access)
	e.regs.mu.Lock()
	e.regs.regions[r] = struct{}{}
	e.regs.mu.Unlock()
	return r, nil
}

// RegisterHost registers a HostBuffer.
func (e *Engine) RegisterHost(b *HostBuffer, access Access) (*MemoryRegion, error) {
	if e == nil {
		return nil, errNilEngine
	}
	return e.Register(b.Span(), access)
}

// newHandle makes the user's handle on reg for span: the keys are reg's,
// the range and access what was asked.
func newHandle(e *Engine, reg *registration, span MemorySpan, access Access) *MemoryRegion {
	r := &MemoryRegion{eng: e, w: reg.w, reg: reg, span: span, access: access, keys: reg.keys}
	if access&(AccessRemoteWrite|AccessRemoteRead) != 0 {
		r.desc = Descriptor{Base: uint64(span.Addr), Length: span.Len, NICs: append([]RemoteKey(nil), reg.desc.NICs...)}
	}
	return r
}

// registerNew registers span with the providers, where their mode allows
// (see RegistrationMode), and enters it in w's cache holding one
// reference.
func (e *Engine) registerNew(w *worker, span MemorySpan, access Access) (*registration, error) {
	reg := &registration{w: w, span: span, access: access, refs: 1}
	if w.regMode == RegisterBeside {
		if !w.regs.begin() {
			return nil, fmt.Errorf("register: %w", ErrClosed)
		}
		defer w.regs.busy.Done()
		if err := w.registerAll(reg); err != nil {
			return nil, err
		}
		if !w.regs.insert(reg) {
			// The worker is closing: its domains stay open until this
			// returns (busy), so the registration is undone here.
			_ = w.unregisterAll(reg)
			return nil, fmt.Errorf("register: %w", ErrClosed)
		}
		return reg, nil
	}
	var regErr error
	err := e.control(w, func(w *worker) {
		if regErr = w.registerAll(reg); regErr == nil && !w.regs.insert(reg) {
			_ = w.unregisterAll(reg)
			regErr = fmt.Errorf("register: %w", ErrClosed)
		}
	})
	if err != nil {
		return nil, err
	}
	return reg, regErr
}

// registerAll registers reg's span on every NIC of w (in parallel unless
// the mode is RegisterOnWorker) and fills its keys and descriptor. On
// failure what was registered is released again.
func (w *worker) registerAll(reg *registration) error {
	errs := make([]error, len(w.doms))
	w.eachDomain(func(i int, ds *domState) {
		k, err := ds.d.RegisterMemory(reg.span, reg.access)
		if err != nil {
			errs[i] = fmt.Errorf("register %#x+%d on %s: %w", reg.span.Addr, reg.span.Len, ds.info.Name, err)
			return
		}
		reg.keys[i] = k
		reg.registered[i] = true
	})
	if err := errors.Join(errs...); err != nil {
		_ = w.unregisterAll(reg)
		return err
	}
	if reg.access&(AccessRemoteWrite|AccessRemoteRead) != 0 {
		reg.desc = Descriptor{Base: uint64(reg.span.Addr), Length: reg.span.Len, NICs: make([]RemoteKey, len(w.doms))}
		for i, ds := range w.doms {
			reg.desc.NICs[i] = RemoteKey{Addr: ds.addr, Key: reg.keys[i].Remote, Mode: reg.keys[i].Mode}
		}
		addLocalRegion(reg)
	}
	return nil
}

// unregisterAll releases what registerAll registered of reg, on every NIC
// at once where the mode allows.
func (w *worker) unregisterAll(reg *registration) error {
	if reg.desc.NICs != nil {
		removeLocalRegion(reg)
	}
	errs := make([]error, len(w.doms))
	w.eachDomain(func(i int, ds *domState) {
		if !reg.registered[i] {
			return
		}
		reg.registered[i] = false
		if err := ds.d.UnregisterMemory(reg.keys[i]); err != nil {
			errs[i] = fmt.Errorf("unregister %#x+%d on %s: %w", reg.span.Addr, reg.span.Len, ds.info.Name, err)
		}
	})
	return errors.Join(errs...)
}

// eachDomain runs f for every domain of w: one after another on the
// worker when its providers want that; else each on a goroutine of its
// own, returning when all have. Those run at the program's priority: a
// lower one would need a thread of their own that ends with the call, and
// a Go program's threads must not end under it (a child started with
// Pdeathsig from such a thread would be killed with it).
func (w *worker) eachDomain(f func(i int, ds *domState)) {
	if w.regMode == RegisterOnWorker || (len(w.doms) == 1 && w.regMode != RegisterBeside) {
		for i, ds := range w.doms {
			f(i, ds)
		}
		return
	}
	var wg sync.WaitGroup
	for i, ds := range w.doms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i, ds)
		}()
	}
	wg.Wait()
}

// register registers an engine-internal region (the immediate source) on
// w's thread, outside the cache; it is released with w's domains.
func (w *worker) register(r *MemoryRegion) error {
	reg := &registration{w: w, span: r.span, access: r.access, refs: 1, internal: true}
	if err := w.registerAll(reg); err != nil {
		return err
	}
	if !w.regs.insert(reg) {
		_ = w.unregisterAll(reg)
		return ErrClosed
	}
	r.reg, r.keys, r.desc = reg, reg.keys, reg.desc
	return nil
}

// Unregister releases r. Operations accepted before the call (their Submit
// returned nil) finish first, and Unregister returns once they have;
// submits that start after it fail with ErrUnknownRegion, as does a second
// Unregister. The memory is released by the providers with the last handle
// on its registration (see Register); where the provider allows, that runs
// beside the group's worker, every NIC at once.
func (e *Engine) Unregister(r *MemoryRegion) error {
	if e == nil {
		return errNilEngine
	}
	if r == nil || r.eng != e || r.reg == nil {
		return fmt.Errorf("unregister: %w", ErrUnknownRegion)
	}
	if !r.state.CompareAndSwap(regLive, regDying) {
		return fmt.Errorf("unregister %#x: already unregistered: %w", r.span.Addr, ErrUnknownRegion)
	}
	e.regs.mu.Lock()
	delete(e.regs.regions, r)
	e.regs.mu.Unlock()
	idle := make(chan struct{})
	err := e.control(r.w, func(w *worker) {
		// Control messages overtake queued requests: accept those first,
		// so every request submitted before this call counts as a user.
		w.acceptQueued()
		if r.inflight == 0 {
			close(idle)
			return
		}
		r.unregWait = func() { close(idle) }
	})
	if errors.Is(err, ErrClosed) {
		return nil // Close releases every registration
	}
	if err != nil {
		return err
	}
	select {
	case <-idle:
	case <-r.w.exited:
		return nil // it released every registration as it closed
	}
	r.state.Store(regDead)
	return e.release(r.reg)
}

// release drops one reference on reg and, with the last, unregisters it
// from the providers: beside the worker where the mode allows, else on
// it.
func (e *Engine) release(reg *registration) error {
	w := reg.w
	if w.regMode == RegisterBeside {
		if !w.regs.drop(reg) {
			return nil
		}
		defer w.regs.busy.Done()
		return w.unregisterAll(reg)
	}
	var unregErr error
	err := e.control(w, func(w *worker) {
		if w.regs.drop(reg) {
			w.regs.busy.Done()
			unregErr = w.unregisterAll(reg)
		}
	})
	if errors.Is(err, ErrClosed) {
		return nil // the worker releases it as it closes
	}
	if err != nil {
		return err
	}
	return unregErr
}

// releaseAll unregisters every registration left on w as its domains
// close, once no registration call runs beside it any more.
func (w *worker) releaseAll() {
	for _, reg := range w.regs.closeAll() {
		_ = w.unregisterAll(reg)
	}
}

// Regions returns the number of live handles: registrations the user has
// not unregistered yet (a leak check). Handles that share a registration
// (see Register) count once each; RegistrationStats counts the
// registrations behind them.
func (e *Engine) Regions() int {
	if e == nil {
		return 0
	}
	e.regs.mu.Lock()
	defer e.regs.mu.Unlock()
	return len(e.regs.regions)
}

// regTable is the engine's live handles, guarded by mu.
type regTable struct {
	mu      sync.Mutex
	regions map[*MemoryRegion]struct{}
}
