package rdma

import (
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
		panic("rdma: Register called twice for provider " + p.Name())
	}
	for _, q := range registry.providers {
		for _, t := range p.Transports() {
			if slices.Contains(q.Transports(), t) {
				panic("rdma: transport " + t + " served by both " + q.Name() + " and " + p.Name())
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

// TransportAuto picks EFA, then verbs, and fails when neither exists. It
// never falls back to TCP or shared memory. No provider serves it: the
// engine resolves it (fabric.ChooseTransport).
const TransportAuto = "auto"

// Lookup returns the provider that serves transport by name, or an error
// wrapping ErrUnknownProvider that lists the valid names.
func Lookup(transport string) (Provider, error) {
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
// separate question (Provider.Domains answers it).
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
