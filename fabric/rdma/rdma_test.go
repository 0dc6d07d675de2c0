package rdma_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rdma"
)

type stubProvider struct {
	name       string
	transports []string
}

func (p stubProvider) Name() string         { return p.name }
func (p stubProvider) Transports() []string { return p.transports }
func (p stubProvider) Domains(string, rdma.DomainOptions) ([]rdma.DomainInfo, error) {
	return nil, rdma.ErrNotSupported
}
func (p stubProvider) Open(rdma.DomainInfo, rdma.DomainOptions) (rdma.Domain, error) {
	return nil, rdma.ErrNotSupported
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

// The registry serves each transport from one provider, and fabric's
// views of it are the same registry.
func TestRegistry(t *testing.T) {
	p := stubProvider{name: "rdma-test-stub", transports: []string{"rdma-test-a", "rdma-test-b"}}
	rdma.Register(p)
	mustPanic(t, "second Register of a name", func() { rdma.Register(p) })
	mustPanic(t, "Register of a taken transport", func() {
		rdma.Register(stubProvider{name: "rdma-test-other", transports: []string{"rdma-test-b"}})
	})
	got, err := rdma.Lookup("rdma-test-b")
	if err != nil || got.Name() != p.name {
		t.Fatalf("Lookup: %v, %v", got, err)
	}
	if _, err := rdma.Lookup("rdma-test-none"); !errors.Is(err, rdma.ErrUnknownProvider) || !errors.Is(err, fabric.ErrUnknownProvider) {
		t.Fatalf("Lookup of an unknown transport: %v", err)
	}
	var seen int
	for _, ti := range fabric.Transports() {
		if ti.Provider == p.name {
			seen++
		}
	}
	if seen != 2 {
		t.Fatalf("fabric.Transports lists %d of the stub's 2 transports", seen)
	}
	if _, err := fabric.ChooseTransport("rdma-test-a", fabric.DomainOptions{}); !errors.Is(err, fabric.ErrNotSupported) {
		t.Fatalf("ChooseTransport through the registry: %v", err)
	}
}

// Errors made with either package's names match both.
func TestErrorsAcrossPackages(t *testing.T) {
	var err error = &rdma.ProviderError{Provider: "x", Op: "write completion", Errno: 110, Timeout: true, RegionGone: true}
	for _, target := range []error{rdma.ErrProvider, fabric.ErrProvider, fabric.ErrTimeout, fabric.ErrUnknownRegion} {
		if !errors.Is(err, target) {
			t.Errorf("%v does not match %v", err, target)
		}
	}
	var pe *fabric.ProviderError
	if !errors.As(err, &pe) || pe.Errno != 110 {
		t.Errorf("errors.As to fabric.ProviderError: %v", pe)
	}
	if errors.Is(err, fabric.ErrPeerLost) {
		t.Error("a timeout that is not the peer's matched ErrPeerLost")
	}
}

func TestAddress(t *testing.T) {
	a, err := rdma.AddressFromRaw([]byte("nic0"))
	if err != nil {
		t.Fatal(err)
	}
	bin, _ := a.MarshalBinary()
	bin = append(bin, 0xff)
	b, n, err := rdma.DecodeAddress(bin)
	if err != nil || b != a || n != len(bin)-1 {
		t.Fatalf("DecodeAddress: %v %d %v", b, n, err)
	}
	if _, _, err := rdma.DecodeAddress(bin[:3]); !errors.Is(err, fabric.ErrBadEncoding) {
		t.Fatalf("truncated address: %v", err)
	}
	p, err := fabric.ParseAddress(a.String())
	if err != nil || p != a {
		t.Fatalf("fabric.ParseAddress of rdma.Address text: %v %v", p, err)
	}
	if _, err := rdma.AddressFromRaw(nil); !errors.Is(err, rdma.ErrBadEncoding) {
		t.Fatalf("empty address: %v", err)
	}
}

// The op and event structs are read in place by C: pointer-free, with
// the sizes the shims declare (internal/ofi and internal/ibv check every
// offset against their headers).
func TestOpSizes(t *testing.T) {
	if s := unsafe.Sizeof(rdma.WriteOp{}); s != 64 {
		t.Errorf("WriteOp is %d bytes, want 64", s)
	}
	if s := unsafe.Sizeof(rdma.Event{}); s != 32 {
		t.Errorf("Event is %d bytes, want 32", s)
	}
}
