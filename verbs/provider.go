package verbs

import (
	"fmt"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

func init() { rdma.Register(Provider{}) }

// Provider is the "verbs" rdma.Provider. Importing this package
// registers it.
type Provider struct{}

var _ rdma.Provider = Provider{}

// Name returns "verbs".
func (Provider) Name() string { return provName }

// Transports returns []string{"verbs"}.
func (Provider) Transports() []string { return []string{provName} }

// Domains lists one domain per active port of every verbs device. Without
// any it returns an error wrapping rdma.ErrNotSupported.
func (Provider) Domains(transport string, _ rdma.DomainOptions) ([]rdma.DomainInfo, error) {
	if transport != provName {
		return nil, fmt.Errorf("verbs: transport %q: %w", transport, rdma.ErrUnknownProvider)
	}
	devs, err := Devices()
	if err != nil {
		return nil, err
	}
	var out []rdma.DomainInfo
	for _, d := range devs {
		for _, p := range d.Ports {
			if !p.Active() {
				continue
			}
			out = append(out, rdma.DomainInfo{Provider: provName, Transport: provName, Name: d.Name,
				PCIAddress: d.PCIAddress, NUMANode: d.NUMANode, LinkSpeed: p.LinkSpeed, Index: p.Number, Port: p.Number})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("verbs: %d device(s), no active port: %w", len(devs), rdma.ErrNotSupported)
	}
	return out, nil
}

// Open opens one domain; see the package function Open.
func (Provider) Open(info rdma.DomainInfo, opts rdma.DomainOptions) (rdma.Domain, error) {
	d, err := Open(info, opts)
	if err != nil {
		return nil, err
	}
	return d, nil
}
