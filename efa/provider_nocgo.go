//go:build !cgo

package efa

import (
	"fmt"
	"slices"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// errNoCgo is what every entry point returns in a build without cgo, where
// libfabric cannot be called.
var errNoCgo = fmt.Errorf("libfabric provider: built with CGO_ENABLED=0: %w", rdma.ErrNotSupported)

func init() { rdma.Register(provider{}) }

type provider struct{}

func (provider) Name() string         { return ProviderName }
func (provider) Transports() []string { return slices.Clone(transportNames) }

func (provider) Domains(string, rdma.DomainOptions) ([]rdma.DomainInfo, error) {
	return nil, errNoCgo
}

func (provider) Open(rdma.DomainInfo, rdma.DomainOptions) (rdma.Domain, error) {
	return nil, errNoCgo
}

// Domain is the libfabric domain; without cgo none can be opened.
type Domain struct{}

// Domains fails: built without cgo.
func Domains(string, rdma.DomainOptions) ([]rdma.DomainInfo, error) { return nil, errNoCgo }

// Open fails: built without cgo.
func Open(rdma.DomainInfo, rdma.DomainOptions) (*Domain, error) { return nil, errNoCgo }

// Version is empty: built without cgo.
func Version() string { return "" }

// APIVersion is empty: built without cgo.
func APIVersion() string { return "" }

// Transports fails: built without cgo.
func Transports() ([]string, error) { return nil, errNoCgo }

// RawBench fails: built without cgo.
func RawBench(RawSpec) (RawResult, error) { return RawResult{}, errNoCgo }
