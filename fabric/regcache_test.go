package fabric

import (
	"testing"
)

// Which handles may share a registration (registration.serves): the rules
// that keep a shared descriptor from granting more than was asked, or
// from pointing peers at the wrong bytes.
func TestRegistrationServes(t *testing.T) {
	const base, n = 0x10000, 0x10000
	mk := func(access Access, mode AddrMode) *registration {
		r := &registration{span: MemorySpan{Addr: base, Len: n, Device: HostDevice}, access: access, refs: 1}
		if access&(AccessRemoteWrite|AccessRemoteRead) != 0 {
			r.desc = Descriptor{Base: base, Length: n, NICs: []RemoteKey{{Mode: AddrVirtual}, {Mode: mode}}}
		}
		return r
	}
	span := func(off, len uint64) MemorySpan {
		return MemorySpan{Addr: base + uintptr(off), Len: len, Device: HostDevice}
	}
	rw, rr := AccessRemoteWrite, AccessRemoteRead
	for _, tc := range []struct {
		name   string
		reg    *registration
		span   MemorySpan
		access Access
		want   bool
	}{
		{"same", mk(rw, AddrVirtual), span(0, n), rw, true},
		{"inside", mk(rw, AddrVirtual), span(0x100, 0x100), rw, true},
		{"to-the-end", mk(rw, AddrVirtual), span(0x100, n-0x100), rw, true},
		{"past-the-end", mk(rw, AddrVirtual), span(0x100, n), rw, false},
		{"before", mk(rw, AddrVirtual), MemorySpan{Addr: base - 1, Len: 2, Device: HostDevice}, AccessLocal, false},
		{"local-in-remote", mk(rw|rr, AddrOffset), span(0x100, 0x100), AccessLocal, true},
		{"more-access", mk(rw, AddrVirtual), span(0, 1), rw | rr, false},
		{"local-wants-remote", mk(AccessLocal, AddrVirtual), span(0, 1), rw, false},
		{"narrower-remote", mk(rw|rr, AddrVirtual), span(0, 1), rw, false},
		// Offset-addressed NICs: peers address from the registration's
		// start, so only a handle starting there can share it.
		{"offset-inside", mk(rw, AddrOffset), span(0x100, 0x100), rw, false},
		{"offset-at-start", mk(rw, AddrOffset), span(0, 0x100), rw, true},
		{"other-device", mk(rw, AddrVirtual), MemorySpan{Addr: base, Len: 1, Device: CUDADevice(0)}, AccessLocal, false},
		{"dead", func() *registration { r := mk(rw, AddrVirtual); r.dead = true; return r }(), span(0, 1), AccessLocal, false},
		{"internal", func() *registration { r := mk(AccessLocal, AddrVirtual); r.internal = true; return r }(), span(0, 1), AccessLocal, false},
	} {
		if got := tc.reg.serves(tc.span, tc.access); got != tc.want {
			t.Errorf("%s: serves = %v, want %v", tc.name, got, tc.want)
		}
	}
}
