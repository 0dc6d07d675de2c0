package emu

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Memory is "device memory" for emulated kernels: anonymous mmap'd host
// memory (never the Go heap, so kernels may keep addresses into it),
// zeroed, page aligned. Go code reads and writes it through Bytes or the
// atomic views while kernels run.
type Memory struct {
	b []byte
}

// Alloc maps n bytes.
func Alloc(n int) (*Memory, error) {
	if n <= 0 {
		return nil, invalid("alloc %d bytes", n)
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("cuda emu: mmap %d bytes: %w", n, err)
	}
	return &Memory{b: b}, nil
}

// Ptr is the address to pass to kernels (plus an offset).
func (m *Memory) Ptr(off int) uintptr { return uintptr(unsafe.Pointer(&m.b[off])) }

// Bytes is the memory itself.
func (m *Memory) Bytes() []byte { return m.b }

// Uint32 is the i-th 32-bit word, for atomic access while kernels run.
func (m *Memory) Uint32(i int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&m.b[4*i]))
}

// Uint64 is the i-th 64-bit word, for atomic access while kernels run.
func (m *Memory) Uint64(i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&m.b[8*i]))
}

// Free unmaps the memory; no kernel may still use it.
func (m *Memory) Free() error {
	if m == nil || m.b == nil {
		return nil
	}
	err := syscall.Munmap(m.b)
	m.b = nil
	return err
}
