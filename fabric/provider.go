package fabric

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

var registry struct {
	mu        sync.RWMutex
	providers map[string]Provider
}

// Register makes a provider available by name. It panics if the name, or
// one of its transport names, is taken, as database/sql's Register does:
// that is a programming error at init time, never a runtime condition.
func Register(p Provider) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.providers == nil {
		registry.providers = make(map[string]Provider)
	}
	if _, dup := registry.providers[p.Name()]; dup {
		panic("fabric: Register called twice for provider " + p.Name())
	}
	for _, q := range registry.providers {
		for _, t := range p.Transports() {
			if slices.Contains(q.Transports(), t) {
				panic("fabric: transport " + t + " served by both " + q.Name() + " and " + p.Name())
			}
		}
	}
	registry.providers[p.Name()] = p
}

// Providers returns the names of the registered providers, sorted.
func Providers() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	names := make([]string, 0, len(registry.providers))
	for n := range registry.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TransportAuto picks EFA, then verbs, and fails with ErrNoTransport when
// neither exists. It never falls back to TCP or shared memory.
const TransportAuto = "auto"

// lookupTransport returns the provider that serves transport by name.
func lookupTransport(transport string) (Provider, error) {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	for _, p := range registry.providers {
		if slices.Contains(p.Transports(), transport) {
			return p, nil
		}
	}
	known := []string{TransportAuto}
	for _, t := range transportsLocked() {
		known = append(known, t.Name)
	}
	hint := ""
	if len(registry.providers) == 0 {
		hint = "; no provider is linked in: import github.com/ferryrdma/ferry/providers (or /efa, /verbs)"
	}
	return nil, fmt.Errorf("unknown transport %q (valid: %s)%s: %w", transport, strings.Join(known, ", "), hint, ErrUnknownProvider)
}

// TransportInfo names a transport and the provider that serves it.
type TransportInfo struct {
	Name     string // "tcp;ofi_rxm", "verbs", ...
	Provider string // Provider.Name() of the package that serves it
}

// Transports lists every transport name the registered providers serve,
// sorted by name. Whether a transport has a usable device here is a
// separate question (ChooseTransport answers it).
func Transports() []TransportInfo {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return transportsLocked()
}

func transportsLocked() []TransportInfo {
	var out []TransportInfo
	for _, p := range registry.providers {
		for _, t := range p.Transports() {
			out = append(out, TransportInfo{Name: t, Provider: p.Name()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Choice is the outcome of choosing a transport: what was picked and why.
type Choice struct {
	Provider  Provider
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
			p, err := lookupTransport(t)
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
	p, err := lookupTransport(transport)
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
