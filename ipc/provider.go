package ipc

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"golang.org/x/sys/unix"
)

// TransportName is the transport (and provider) name: fabric.Config{Transport: "ipc"}.
const TransportName = "ipc"

func init() { rdma.Register(provider{}) }

type provider struct{}

func (provider) Name() string         { return TransportName }
func (provider) Transports() []string { return []string{TransportName} }

// Domains returns the one ipc domain (the engine opens as many endpoints
// of it as it wants NICs), or an error wrapping rdma.ErrNotSupported
// where the kernel lacks memfd_create.
func (provider) Domains(transport string, opts rdma.DomainOptions) ([]rdma.DomainInfo, error) {
	if err := Probe(); err != nil {
		return nil, err
	}
	// No link speed: there is no link, only this host's memory.
	return []rdma.DomainInfo{domainInfo()}, nil
}

func (provider) Open(info rdma.DomainInfo, opts rdma.DomainOptions) (rdma.Domain, error) {
	if err := Probe(); err != nil {
		return nil, err
	}
	return open(info, opts.Incarnation)
}

// Open opens a domain directly, without an engine (tests, tools).
func Open() (*Domain, error) {
	if err := Probe(); err != nil {
		return nil, err
	}
	return open(domainInfo(), 0)
}

// domainInfo describes the one ipc domain. Writes to one peer are carried
// out in order (copied by the initiator's worker as they are posted, or
// held in order), and any length a mapping holds is taken in one op.
func domainInfo() rdma.DomainInfo {
	return rdma.DomainInfo{Provider: TransportName, Transport: TransportName, Name: "ipc", NUMANode: -1,
		OrderedWrites: true, Reads: true}
}

// Probe reports whether ipc can run here: nil, or an error wrapping
// rdma.ErrNotSupported when the kernel refuses memfds (conclusive and
// cached, like success). Other errors (out of descriptors) are returned
// as they are and not cached.
func Probe() error {
	probe.Lock()
	defer probe.Unlock()
	if probe.done {
		return probe.err
	}
	fd, err := newMemfd("ferry-ipc-probe", 4096)
	if err == nil {
		_ = unix.Close(fd)
		probe.done = true
		return nil
	}
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EINVAL) {
		probe.done = true
		probe.err = fmt.Errorf("ipc needs sealed memfds: %v: %w", err, rdma.ErrNotSupported)
		return probe.err
	}
	return fmt.Errorf("ipc probe: %w", err)
}

var probe struct {
	sync.Mutex
	done bool
	err  error
}
