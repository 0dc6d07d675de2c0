package cuda

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// Context is a retained primary context of one device: the context the
// CUDA runtime and PyTorch use too, so memory and modules are shared with
// them. Every object made from it (memory, streams, events, modules,
// graphs, flags) keeps it busy: Close fails with ErrBusy until they are
// closed.
//
// Context is safe for concurrent use. Calls never depend on which OS
// thread the goroutine runs on: each driver call makes the context current
// on its thread as part of the same C call.
type Context struct {
	dev      Device
	h        cudadrv.Context
	s        *driverState
	closed   atomic.Bool
	children atomic.Int64
	mu       sync.Mutex // serialises Close
}

// PrimaryContext retains the device's primary context.
func (d Device) PrimaryContext() (*Context, error) {
	s, err := driver()
	if err != nil {
		return nil, err
	}
	h, r := s.d.DevicePrimaryCtxRetain(d.h)
	if err := s.check("cuDevicePrimaryCtxRetain", r); err != nil {
		return nil, err
	}
	return &Context{dev: d, h: h, s: s}, nil
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// use returns the driver for a call in this context, or ErrClosed.
func (c *Context) use(op string) (*driverState, error) {
	if c == nil {
		return nil, invalid(op, "nil context")
	}
	if c.closed.Load() {
		return nil, closedErr(op)
	}
	return c.s, nil
}

func (c *Context) addChild()  { c.children.Add(1) }
func (c *Context) dropChild() { c.children.Add(-1) }

// Synchronize waits for all work in the context.
func (c *Context) Synchronize() error {
	s, err := c.use("synchronize")
	if err != nil {
		return err
	}
	return s.check("cuCtxSynchronize", s.d.CtxSynchronize(c.h))
}

// EnablePeerAccess lets kernels in c access memory allocated in peer's
// context (cuMemAlloc memory; VMM memory uses DeviceMemory.GrantAccess).
// Enabling twice is not an error.
func (c *Context) EnablePeerAccess(peer *Context) error {
	s, err := c.use("enable peer access")
	if err != nil {
		return err
	}
	if _, err := peer.use("enable peer access"); err != nil {
		return err
	}
	r := s.d.CtxEnablePeerAccess(c.h, peer.h)
	if r == cudadrv.ErrPeerAccessAlreadyEnabled {
		return nil
	}
	return s.check("cuCtxEnablePeerAccess", r)
}

// DisablePeerAccess undoes EnablePeerAccess.
func (c *Context) DisablePeerAccess(peer *Context) error {
	s, err := c.use("disable peer access")
	if err != nil {
		return err
	}
	if _, err := peer.use("disable peer access"); err != nil {
		return err
	}
	return s.check("cuCtxDisablePeerAccess", s.d.CtxDisablePeerAccess(c.h, peer.h))
}

// Close releases the primary context. It fails with ErrBusy while objects
// made from it are open, and is a no-op when already closed.
func (c *Context) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil
	}
	if n := c.children.Load(); n > 0 {
		return fmt.Errorf("cuda: close context %s: %d objects still open: %w", c.dev, n, ErrBusy)
	}
	c.closed.Store(true)
	return c.s.check("cuDevicePrimaryCtxRelease", c.s.d.DevicePrimaryCtxRelease(c.dev.h))
}

// FlushGPUDirectRDMAWrites makes the GPUDirect RDMA writes into this
// context's memory that completed before the call visible to its kernels
// (cuFlushGPUDirectRDMAWrites, target the context, scope its owner): a
// CPU that saw a NIC's completion flushes before it raises the flag a
// kernel polls, where Device.NeedsRDMAFlush says the NIC's writes may
// otherwise land after the flag. It fails with an error wrapping
// ErrNotSupported where the driver lacks the call (before CUDA 11.3).
func (c *Context) FlushGPUDirectRDMAWrites() error {
	s, err := c.use("cuFlushGPUDirectRDMAWrites")
	if err != nil {
		return err
	}
	const targetCurrentCtx, toOwner = 0, 100
	return s.check("cuFlushGPUDirectRDMAWrites", s.d.FlushGPUDirectRDMAWrites(c.h, targetCurrentCtx, toOwner))
}
