//go:build cgo

package efa

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ofi"
)

func init() { rdma.Register(provider{}) }

// provider is the rdma.Provider registered as "libfabric".
type provider struct{}

func (provider) Name() string { return ProviderName }

func (provider) Transports() []string { return slices.Clone(transportNames) }

func (provider) Domains(transport string, opts rdma.DomainOptions) ([]rdma.DomainInfo, error) {
	return Domains(transport, opts)
}

func (provider) Open(info rdma.DomainInfo, opts rdma.DomainOptions) (rdma.Domain, error) {
	d, err := Open(info, opts)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Version returns the version of the libfabric library in use, such as "1.17".
func Version() string { return ofi.Version() }

// APIVersion returns the libfabric API version ferry asks fi_getinfo for
// (FI_VERSION): the oldest of the library's, the headers ferry was built
// with and the newest ferry was checked against, such as "2.1".
func APIVersion() string { return ofi.APIVersion() }

var _ rdma.LibraryReporter = provider{}

// Library names the libfabric in use and the API version asked for.
func (provider) Library() rdma.LibraryInfo {
	return rdma.LibraryInfo{Name: "libfabric", Version: ofi.Version(), API: ofi.APIVersion()}
}

// Transports lists the libfabric provider names usable on this machine for
// FI_EP_RDM with messages and RMA, sorted; utility providers that only wrap
// others (ofi_rxm on its own) are listed as libfabric names them
// ("tcp;ofi_rxm").
func Transports() ([]string, error) {
	l, err := ofi.GetInfo("", "", ofi.CapMsg|ofi.CapRMA, fullMRMode, 0)
	if err != nil {
		if errors.Is(err, ofi.ENODATA) {
			return nil, nil
		}
		return nil, callError("", "fi_getinfo", err)
	}
	defer l.Free()
	seen := map[string]bool{}
	var out []string
	for _, in := range l.Infos() {
		if n := in.ProvName(); !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Domains lists the distinct libfabric domains of transport (a libfabric
// provider name) that can run ferry: FI_EP_RDM with FI_MSG and FI_RMA and
// 4 bytes of remote CQ data. opts.Node pins the source address (tests use
// "127.0.0.1" for tcp); shm ignores it. No domain gives an error wrapping
// rdma.ErrNotSupported that says why.
func Domains(transport string, opts rdma.DomainOptions) ([]rdma.DomainInfo, error) {
	l, p, err := getInfo(transport, opts)
	if err != nil {
		return nil, err
	}
	defer l.Free()
	var out []rdma.DomainInfo
	seen := map[string]bool{}
	var skipped []string
	for _, in := range l.Infos() {
		if seen[in.DomainName()] {
			continue
		}
		if why := unusable(in); why != "" {
			skipped = append(skipped, in.DomainName()+": "+why)
			continue
		}
		seen[in.DomainName()] = true
		out = append(out, domainInfo(p.transport, in))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("libfabric %s: no usable domain (%s): %w",
			transport, strings.Join(skipped, "; "), rdma.ErrNotSupported)
	}
	return out, nil
}

// getInfo runs fi_getinfo with transport's policy. "No such provider or
// device" becomes rdma.ErrNotSupported.
func getInfo(transport string, opts rdma.DomainOptions) (*ofi.InfoList, policy, error) {
	if transport == "" || transport == rdma.TransportAuto {
		return nil, policy{}, fmt.Errorf("libfabric: transport %q: name a libfabric provider: %w",
			transport, rdma.ErrInvalidArgument)
	}
	p := policyFor(transport)
	node, flags := p.node(opts.Node)
	service := ""
	if opts.Port > 0 && node != "" && !p.efa {
		// With FI_SOURCE the service is the local port (tcp): a
		// restarted process takes its old address again.
		service = strconv.Itoa(opts.Port)
	}
	l, err := ofi.GetInfoService(p.transport, node, service, p.caps, p.mrMode, flags)
	if err != nil {
		if errors.Is(err, ofi.ENODATA) || errors.Is(err, ofi.ENOSYS) {
			where := ""
			if node != "" {
				where = " on " + node
			}
			return nil, p, fmt.Errorf("libfabric %s: no device%s (libfabric %s, fi_getinfo: %v): %w",
				transport, where, ofi.Version(), err, rdma.ErrNotSupported)
		}
		return nil, p, callError(transport, "fi_getinfo", err)
	}
	return l, p, nil
}

// unusable says why an fi_info cannot carry ferry's protocol, or "".
func unusable(in ofi.Info) string {
	if in.CQDataSize() < 4 {
		return fmt.Sprintf("%d bytes of remote CQ data, need 4", in.CQDataSize())
	}
	return ""
}

func domainInfo(transport string, in ofi.Info) rdma.DomainInfo {
	pci := in.PCIAddress()
	return rdma.DomainInfo{
		Provider:   ProviderName,
		Transport:  transport,
		Name:       in.DomainName(),
		PCIAddress: pci,
		NUMANode:   numaNode(pci),
		LinkSpeed:  in.LinkSpeed(),
		// Longer writes are posted in pieces by the engine; the order
		// says whether their immediate may follow at once.
		MaxWrite:      in.MaxMsgSize(),
		OrderedWrites: in.WritesOrdered(),
		// FI_RMA without direction bits asks for reads as well.
		Reads: true,
	}
}

// numaNode reads the NIC's NUMA node from sysfs; -1 when unknown.
func numaNode(pci string) int {
	if pci == "" {
		return -1
	}
	b, err := os.ReadFile("/sys/bus/pci/devices/" + pci + "/numa_node")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return -1
	}
	return n
}
