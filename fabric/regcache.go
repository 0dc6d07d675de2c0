package fabric

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// RegistrationMode says where a group's registrations run: on its worker,
// on its NICs at once while the worker waits, or beside the worker (see
// rdma.RegistrationMode).
type RegistrationMode = rdma.RegistrationMode

// The registration modes.
const (
	RegisterOnWorker       = rdma.RegisterOnWorker
	RegisterNICsInParallel = rdma.RegisterNICsInParallel
	RegisterBeside         = rdma.RegisterBeside
)

// registration is one provider registration of a span on every NIC of a
// group. The handles (MemoryRegion) Register gives out share it; it is
// released with the last. refs and dead are guarded by the group's
// regCache.mu; keys, desc and registered are written before it is
// published in the cache and not changed until it is dead.
type registration struct {
	w          *worker
	span       MemorySpan
	access     Access
	keys       [MaxNICs]rdma.MemoryKeys
	registered [MaxNICs]bool
	desc       Descriptor // for a remotely accessible registration
	refs       int
	dead       bool
	internal   bool // the engine's own (immediate source): never a cache hit
}

// serves reports whether a handle on span with access may share reg:
// same device, span inside reg's, no access reg lacks, and a descriptor
// that grants no more than was asked (a local-only handle has none, so
// any access serves it). A remote handle starting inside reg also needs
// every NIC to address by virtual address: peers address an
// offset-addressed registration from its start, which a descriptor of a
// range inside it cannot say.
func (reg *registration) serves(span MemorySpan, access Access) bool {
	if reg.dead || reg.internal || span.Device != reg.span.Device {
		return false
	}
	if span.Addr < reg.span.Addr || uint64(span.Addr-reg.span.Addr)+span.Len > reg.span.Len {
		return false
	}
	if access&^reg.access != 0 {
		return false
	}
	remote := access & (AccessRemoteWrite | AccessRemoteRead)
	if remote == 0 {
		return true
	}
	if remote != reg.access&(AccessRemoteWrite|AccessRemoteRead) {
		return false
	}
	if span.Addr != reg.span.Addr {
		for _, k := range reg.desc.NICs {
			if k.Mode != AddrVirtual {
				return false
			}
		}
	}
	return true
}

// regCache is a group's registrations, sorted by start address, and the
// state that lets registration run beside the worker: closed is set when
// the worker's domains are about to close; busy counts provider calls
// running beside the worker, which the close waits out.
type regCache struct {
	mu     sync.Mutex
	regs   []*registration
	closed bool
	busy   sync.WaitGroup

	hits, misses atomic.Uint64
}

// lookup returns a live registration that serves span with access, with
// a reference taken for the caller, or nil when there is none.
func (c *regCache) lookup(span MemorySpan, access Access) (*registration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("register: %w", ErrClosed)
	}
	// Every candidate starts at or before span.
	i := sort.Search(len(c.regs), func(i int) bool { return c.regs[i].span.Addr > span.Addr })
	for i--; i >= 0; i-- {
		if reg := c.regs[i]; reg.serves(span, access) {
			reg.refs++
			c.hits.Add(1)
			return reg, nil
		}
	}
	return nil, nil
}

// begin admits a provider call beside the worker; false once closing.
func (c *regCache) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.busy.Add(1)
	return true
}

// insert publishes a new registration; false once closing.
func (c *regCache) insert(reg *registration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	i := sort.Search(len(c.regs), func(i int) bool { return c.regs[i].span.Addr > reg.span.Addr })
	c.regs = append(c.regs, nil)
	copy(c.regs[i+1:], c.regs[i:])
	c.regs[i] = reg
	if !reg.internal {
		c.misses.Add(1)
	}
	return true
}

// drop takes one reference off reg. It returns true when that was the
// last and the caller now owns the release: reg is out of the cache and
// a busy call is admitted for it (the caller calls busy.Done). Once
// closing, the close owns every registration left.
func (c *regCache) drop(reg *registration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	reg.refs--
	if reg.refs > 0 || c.closed || reg.dead {
		return false
	}
	reg.dead = true
	for i, r := range c.regs {
		if r == reg {
			c.regs = append(c.regs[:i], c.regs[i+1:]...)
			break
		}
	}
	c.busy.Add(1)
	return true
}

// closeAll stops the cache and returns every registration left, once no
// provider call runs beside the worker.
func (c *regCache) closeAll() []*registration {
	c.mu.Lock()
	c.closed = true
	left := c.regs
	c.regs = nil
	for _, reg := range left {
		reg.dead = true
	}
	c.mu.Unlock()
	c.busy.Wait()
	return left
}

// counts returns the live registrations (the engine's own excluded).
func (c *regCache) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, reg := range c.regs {
		if !reg.internal {
			n++
		}
	}
	return n
}

// RegistrationStats describes the engine's registrations.
type RegistrationStats struct {
	// Handles are the live MemoryRegions (Regions).
	Handles int
	// Registrations are the provider registrations behind them: fewer
	// than Handles when handles share one (see Register).
	Registrations int
	// Hits counts Register calls served by a registration already there;
	// Misses those that registered with the providers.
	Hits, Misses uint64
	// Modes is where each group registers, in Info().Groups order.
	Modes []RegistrationMode
}

// RegistrationStats reports the engine's registrations and its range
// cache's hits and misses.
func (e *Engine) RegistrationStats() RegistrationStats {
	if e == nil {
		return RegistrationStats{}
	}
	s := RegistrationStats{Handles: e.Regions()}
	for _, w := range e.workers {
		s.Registrations += w.regs.count()
		s.Hits += w.regs.hits.Load()
		s.Misses += w.regs.misses.Load()
		s.Modes = append(s.Modes, w.regMode)
	}
	return s
}

// registrationMode is the mode every domain of a group allows (the least
// of theirs), or RegisterOnWorker when the engine is told to keep
// registration there.
func registrationMode(doms []*domState, onWorker bool) RegistrationMode {
	if onWorker || len(doms) == 0 {
		return RegisterOnWorker
	}
	m := RegisterBeside
	for _, ds := range doms {
		r, ok := ds.d.(rdma.Registrar)
		if !ok {
			return RegisterOnWorker
		}
		m = min(m, r.RegistrationMode())
	}
	return m
}
