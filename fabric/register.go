package fabric

import (
	"errors"
	"fmt"
	"sync"
)

// Register registers span with every NIC of the group that owns its device
// (host memory goes to the host group, or the main worker when there is
// none). With AccessRemoteWrite the region has a Descriptor peers can write
// through; with AccessRemoteRead (see SubmitRead) peers can also read it. A failure part way unregisters what was done: nothing leaks.
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
	r := &MemoryRegion{eng: e, w: w, span: span, access: access}
	var regErr error
	if err := e.control(w, func(w *worker) { regErr = w.register(r) }); err != nil {
		return nil, err
	}
	if regErr != nil {
		return nil, regErr
	}
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

func (w *worker) register(r *MemoryRegion) error {
	for i, ds := range w.doms {
		k, err := ds.d.RegisterMemory(r.span, r.access)
		if err != nil {
			for j := 0; j < i; j++ {
				_ = w.doms[j].d.UnregisterMemory(r.keys[j])
			}
			return fmt.Errorf("register %#x+%d on %s: %w", r.span.Addr, r.span.Len, ds.info.Name, err)
		}
		r.keys[i] = k
	}
	if r.access&(AccessRemoteWrite|AccessRemoteRead) != 0 {
		r.desc = Descriptor{Base: uint64(r.span.Addr), Length: r.span.Len, NICs: make([]RemoteKey, len(w.doms))}
		for i, ds := range w.doms {
			r.desc.NICs[i] = RemoteKey{Addr: ds.addr, Key: r.keys[i].Remote, Mode: r.keys[i].Mode}
		}
		addLocalRegion(r)
	}
	w.regions[r] = struct{}{}
	return nil
}

// Unregister releases r on the worker that registered it. Operations
// accepted before the call (their Submit returned nil) finish first, and
// Unregister returns once they have; submits that start after it fail with
// ErrUnknownRegion, as does a second Unregister.
func (e *Engine) Unregister(r *MemoryRegion) error {
	if e == nil {
		return errNilEngine
	}
	if r == nil || r.eng != e {
		return fmt.Errorf("unregister: %w", ErrUnknownRegion)
	}
	if !r.state.CompareAndSwap(regLive, regDying) {
		return fmt.Errorf("unregister %#x: already unregistered: %w", r.span.Addr, ErrUnknownRegion)
	}
	e.regs.mu.Lock()
	delete(e.regs.regions, r)
	e.regs.mu.Unlock()
	var unregErr error
	done := make(chan struct{})
	err := e.control(r.w, func(w *worker) {
		// Control messages overtake queued requests: accept those first,
		// so every request submitted before this call counts as a user.
		w.acceptQueued()
		if r.inflight == 0 {
			unregErr = w.unregisterNow(r)
			close(done)
			return
		}
		r.unregWait = func() { unregErr = w.unregisterNow(r); close(done) }
	})
	if errors.Is(err, ErrClosed) {
		return nil // Close unregistered it
	}
	if err != nil {
		return err
	}
	select {
	case <-done:
	case <-r.w.exited:
	}
	return unregErr
}

func (w *worker) unregisterNow(r *MemoryRegion) error {
	if _, ok := w.regions[r]; !ok {
		return nil
	}
	delete(w.regions, r)
	removeLocalRegion(r)
	r.state.Store(regDead)
	var errs []error
	for i, ds := range w.doms {
		if err := ds.d.UnregisterMemory(r.keys[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Regions returns the number of live registrations (a leak check).
func (e *Engine) Regions() int {
	if e == nil {
		return 0
	}
	e.regs.mu.Lock()
	defer e.regs.mu.Unlock()
	return len(e.regs.regions)
}

// regTable is the engine's registered memory, guarded by mu.
type regTable struct {
	mu      sync.Mutex
	regions map[*MemoryRegion]struct{}
}
