package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric"
)

// A provider for registration tests: it accepts CUDA spans (it never
// touches the memory), records what it was given, checks that a dma-buf fd
// is open while it registers, and fails on demand.
const fakeTransport = "gpu-test-fake"

func init() { fabric.Register(fakeProvider{}) }

type fakeProvider struct{}

func (fakeProvider) Name() string         { return fakeTransport }
func (fakeProvider) Transports() []string { return []string{fakeTransport} }
func (fakeProvider) Domains(string, fabric.DomainOptions) ([]fabric.DomainInfo, error) {
	return []fabric.DomainInfo{{Provider: fakeTransport, Transport: fakeTransport, Name: "fake0", NUMANode: -1}}, nil
}

var fakeIDs atomic.Uint64

func (fakeProvider) Open(info fabric.DomainInfo, _ fabric.DomainOptions) (fabric.RdmaDomain, error) {
	raw := binary.LittleEndian.AppendUint64([]byte{'g'}, fakeIDs.Add(1))
	addr, _ := fabric.AddressFromRaw(raw)
	return &fakeDomain{info: info, addr: addr, regs: map[uintptr]fabric.MemorySpan{}}, nil
}

// fakeFaults says what registrations fail.
var fakeFaults struct {
	sync.Mutex
	dmabuf error // returned for spans with a dma-buf fd
	all    error // returned for every CUDA span
	seen   []seenSpan
}

type seenSpan struct {
	span   fabric.MemorySpan
	fdOpen bool
}

func setFakeFaults(dmabuf, all error) {
	fakeFaults.Lock()
	fakeFaults.dmabuf, fakeFaults.all, fakeFaults.seen = dmabuf, all, nil
	fakeFaults.Unlock()
}

func fakeSeen() []seenSpan {
	fakeFaults.Lock()
	defer fakeFaults.Unlock()
	return append([]seenSpan(nil), fakeFaults.seen...)
}

type fakeDomain struct {
	info fabric.DomainInfo
	addr fabric.Address
	next uintptr
	regs map[uintptr]fabric.MemorySpan
}

func (d *fakeDomain) Info() fabric.DomainInfo { return d.info }
func (d *fakeDomain) Address() fabric.Address { return d.addr }

func (d *fakeDomain) RegisterMemory(s fabric.MemorySpan, _ fabric.Access) (fabric.MemoryKeys, error) {
	if s.Device.IsCUDA() {
		fakeFaults.Lock()
		open := s.DmabufFD >= 0 && fdOpen(s.DmabufFD)
		fakeFaults.seen = append(fakeFaults.seen, seenSpan{span: s, fdOpen: open})
		fdErr, allErr := fakeFaults.dmabuf, fakeFaults.all
		fakeFaults.Unlock()
		if allErr != nil {
			return fabric.MemoryKeys{}, allErr
		}
		if s.DmabufFD >= 0 && fdErr != nil {
			return fabric.MemoryKeys{}, fdErr
		}
	}
	d.next++
	d.regs[d.next] = s
	return fabric.MemoryKeys{Handle: d.next, Local: uint64(d.next), Remote: uint64(d.next), Mode: fabric.AddrVirtual}, nil
}

func (d *fakeDomain) UnregisterMemory(k fabric.MemoryKeys) error {
	if _, ok := d.regs[k.Handle]; !ok {
		return fmt.Errorf("fake: %w", fabric.ErrUnknownRegion)
	}
	delete(d.regs, k.Handle)
	return nil
}

func (d *fakeDomain) ResolvePeer(fabric.Address) (fabric.PeerID, error) {
	return 0, errors.New("fake: no peers")
}
func (d *fakeDomain) PostWrites([]fabric.WriteOp) (int, error) {
	return 0, errors.New("fake: no writes")
}
func (d *fakeDomain) PostSends([]fabric.SendOp) (int, error) { return 0, errors.New("fake: no sends") }
func (d *fakeDomain) PostRecvs([]fabric.RecvOp) (int, error) {
	return 0, errors.New("fake: no receives")
}
func (d *fakeDomain) Poll([]fabric.Event) (int, error) { return 0, nil }
func (d *fakeDomain) DescribeError(ev fabric.Event) error {
	return &fabric.ProviderError{Provider: fakeTransport, Op: "completion", Errno: int(ev.Errno)}
}
func (d *fakeDomain) Close() error { return nil }

func fdOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}
