package cudabackend

import (
	"runtime"
	"unsafe"
)

// stager gives kernels the addresses of the caller's slices for one call:
// the slices themselves, pinned, where the device addresses host memory
// (the emulator), or device copies otherwise (uploaded before the launch,
// outputs downloaded after it).
type stager interface {
	// in returns the address of b for reading; inout for reading and
	// writing (b is copied back after the launch). nil or empty: 0.
	in(b []byte) (uint64, error)
	inout(b []byte) (uint64, error)
	// done ends the call: copies outputs back and releases the pins.
	done() error
	free() error
}

func newStager(d Device) stager {
	if d.HostAddressable() {
		return &pinStager{}
	}
	return &copyStager{dev: d}
}

// pinStager passes slices as they are, pinned for the launch: the kernel
// runs on other threads while the Go code waits, so the memory must not
// move or be freed under it.
type pinStager struct{ p runtime.Pinner }

func (s *pinStager) in(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, nil
	}
	s.p.Pin(unsafe.SliceData(b))
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), nil
}

func (s *pinStager) inout(b []byte) (uint64, error) { return s.in(b) }
func (s *pinStager) done() error                    { s.p.Unpin(); return nil }
func (s *pinStager) free() error                    { s.p.Unpin(); return nil }

// copyStager stages through device buffers, one per argument position of
// a call, grown as needed and kept for the next calls.
type copyStager struct {
	dev  Device
	bufs []Memory
	used int
	back []copyBack
}

type copyBack struct {
	dst []byte
	src uint64
}

func (s *copyStager) slot(n int) (Memory, error) {
	if s.used < len(s.bufs) && len(s.bufs[s.used].Bytes()) >= n {
		m := s.bufs[s.used]
		s.used++
		return m, nil
	}
	m, err := s.dev.Alloc(max(n, 4096))
	if err != nil {
		return nil, err
	}
	if s.used < len(s.bufs) {
		_ = s.bufs[s.used].Free()
		s.bufs[s.used] = m
	} else {
		s.bufs = append(s.bufs, m)
	}
	s.used++
	return m, nil
}

func (s *copyStager) in(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, nil
	}
	m, err := s.slot(len(b))
	if err != nil {
		return 0, err
	}
	return m.Addr(), s.dev.Upload(m.Addr(), b)
}

func (s *copyStager) inout(b []byte) (uint64, error) {
	a, err := s.in(b)
	if err == nil && a != 0 {
		s.back = append(s.back, copyBack{dst: b, src: a})
	}
	return a, err
}

func (s *copyStager) done() error {
	var first error
	for _, c := range s.back {
		if err := s.dev.Download(c.dst, c.src); err != nil && first == nil {
			first = err
		}
	}
	s.back, s.used = s.back[:0], 0
	return first
}

func (s *copyStager) free() error {
	var first error
	for _, m := range s.bufs {
		if err := m.Free(); err != nil && first == nil {
			first = err
		}
	}
	s.bufs = nil
	return first
}

func f32Bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

func u32Bytes(v []uint32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

func i32Bytes(v []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}
