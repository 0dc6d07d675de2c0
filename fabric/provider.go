package fabric

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Providers are registered with rdma.Register (package rdma is the
// provider contract); these are the registry's views a program needs.

// Providers returns the names of the registered providers, sorted.
func Providers() []string { return rdma.Providers() }

// TransportAuto picks EFA, then verbs, and fails with ErrNoTransport when
// neither exists. It never falls back to TCP or shared memory.
const TransportAuto = rdma.TransportAuto

// TransportInfo names a transport and the provider that serves it.
type TransportInfo = rdma.TransportInfo

// Transports lists every transport name the registered providers serve,
// sorted by name. Whether a transport has a usable device here is a
// separate question (ChooseTransport answers it).
func Transports() []TransportInfo { return rdma.Transports() }

// Choice is the outcome of choosing a transport: what was picked and why.
type Choice struct {
	Provider  rdma.Provider
	Transport string
	Domains   []DomainInfo
	Reason    string
}

// ChooseTransport resolves a transport name to a provider and the domains
// it can open here. For TransportAuto it tries "efa", then "verbs", and
// fails with ErrNoTransport (saying how to pick tcp or shm explicitly) when
// neither has a device.
func ChooseTransport(transport string, opts DomainOptions) (Choice, error) {
	if transport == "" || transport == TransportAuto {
		var tried []string
		for _, t := range []string{"efa", "verbs"} {
			p, err := rdma.Lookup(t)
			if err != nil {
				tried = append(tried, t+": provider not linked in")
				continue
			}
			ds, err := p.Domains(t, opts)
			if err == nil && len(ds) > 0 {
				return Choice{Provider: p, Transport: t, Domains: ds,
					Reason: fmt.Sprintf("auto: %d %s device(s) found", len(ds), t)}, nil
			}
			if err == nil {
				err = errors.New("no devices")
			}
			tried = append(tried, t+": "+err.Error())
		}
		return Choice{}, fmt.Errorf("auto found no RDMA device (%v); choose a transport explicitly, "+
			"for example \"tcp;ofi_rxm\" (between hosts), or \"ipc\" or \"shm\" (processes of one host) on machines without RDMA NICs: %w", tried, ErrNoTransport)
	}
	p, err := rdma.Lookup(transport)
	if err != nil {
		return Choice{}, err
	}
	ds, err := p.Domains(transport, opts)
	if err != nil {
		return Choice{}, err
	}
	if len(ds) == 0 {
		return Choice{}, fmt.Errorf("transport %q: no devices: %w", transport, ErrNotSupported)
	}
	return Choice{Provider: p, Transport: transport, Domains: ds, Reason: "explicit"}, nil
}
