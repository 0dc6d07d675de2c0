package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"golang.org/x/sys/unix"
)

// A provider for registration tests: it accepts CUDA spans (it never
// touches the memory), records what it was given, checks that a dma-buf fd
// is open while it registers, and fails on demand.
const fakeTransport = "gpu-test-fake"

func init() { rdma.Register(fakeProvider{}) }

type fakeProvider struct{}

func (fakeProvider) Name() string         { return fakeTransport }
func (fakeProvider) Transports() []string { return []string{fakeTransport} }
func (fakeProvider) Domains(string, rdma.DomainOptions) ([]rdma.DomainInfo, error) {
	return []rdma.DomainInfo{{Provider: fakeTransport, Transport: fakeTransport, Name: "fake0", NUMANode: -1}}, nil
}

var fakeIDs atomic.Uint64

func (fakeProvider) Open(info rdma.DomainInfo, _ rdma.DomainOptions) (rdma.Domain, error) {
	raw := binary.LittleEndian.AppendUint64([]byte{'g'}, fakeIDs.Add(1))
	addr, _ := rdma.AddressFromRaw(raw)
	return &fakeDomain{info: info, addr: addr, regs: map[uintptr]rdma.MemorySpan{}}, nil
}

// fakeFaults says what registrations fail.
var fakeFaults struct {
	sync.Mutex
	dmabuf error // returned for spans with a dma-buf fd
	all    error // returned for every CUDA span
	seen   []seenSpan
}

type seenSpan struct {
	span   rdma.MemorySpan
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
	info rdma.DomainInfo
	addr rdma.Address
	next uintptr
	regs map[uintptr]rdma.MemorySpan
}

func (d *fakeDomain) Info() rdma.DomainInfo { return d.info }
func (d *fakeDomain) Address() rdma.Address { return d.addr }

func (d *fakeDomain) RegisterMemory(s rdma.MemorySpan, _ rdma.Access) (rdma.MemoryKeys, error) {
	if s.Device.IsCUDA() {
		fakeFaults.Lock()
		open := s.DmabufFD >= 0 && fdOpen(s.DmabufFD)
		fakeFaults.seen = append(fakeFaults.seen, seenSpan{span: s, fdOpen: open})
		fdErr, allErr := fakeFaults.dmabuf, fakeFaults.all
		fakeFaults.Unlock()
		if allErr != nil {
			return rdma.MemoryKeys{}, allErr
		}
		if s.DmabufFD >= 0 && fdErr != nil {
			return rdma.MemoryKeys{}, fdErr
		}
	}
	d.next++
	d.regs[d.next] = s
	return rdma.MemoryKeys{Handle: d.next, Local: uint64(d.next), Remote: uint64(d.next), Mode: rdma.AddrVirtual}, nil
}

func (d *fakeDomain) UnregisterMemory(k rdma.MemoryKeys) error {
	if _, ok := d.regs[k.Handle]; !ok {
		return fmt.Errorf("fake: %w", rdma.ErrUnknownRegion)
	}
	delete(d.regs, k.Handle)
	return nil
}

func (d *fakeDomain) ResolvePeer(rdma.Address) (rdma.PeerID, error) {
	return 0, errors.New("fake: no peers")
}
func (d *fakeDomain) PostWrites([]rdma.WriteOp) (int, error) {
	return 0, errors.New("fake: no writes")
}
func (d *fakeDomain) PostSends([]rdma.SendOp) (int, error) { return 0, errors.New("fake: no sends") }
func (d *fakeDomain) PostRecvs([]rdma.RecvOp) (int, error) {
	return 0, errors.New("fake: no receives")
}
func (d *fakeDomain) Poll([]rdma.Event) (int, error) { return 0, nil }
func (d *fakeDomain) DescribeError(ev rdma.Event) error {
	return &rdma.ProviderError{Provider: fakeTransport, Op: "completion", Errno: int(ev.Errno)}
}
func (d *fakeDomain) Close() error { return nil }

func fdOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}
