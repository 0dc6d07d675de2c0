//go:build !cgo

package efa

import (
	"errors"
	"testing"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rdma"
)

func TestNoCgo(t *testing.T) {
	if _, err := Domains("tcp;ofi_rxm", rdma.DomainOptions{}); !errors.Is(err, rdma.ErrNotSupported) {
		t.Errorf("Domains: %v", err)
	}
	if _, err := fabric.ChooseTransport("shm", rdma.DomainOptions{}); !errors.Is(err, rdma.ErrNotSupported) {
		t.Errorf("ChooseTransport: %v", err)
	}
	if _, err := RawBench(RawSpec{}); !errors.Is(err, rdma.ErrNotSupported) {
		t.Errorf("RawBench: %v", err)
	}
	if _, err := Transports(); !errors.Is(err, rdma.ErrNotSupported) {
		t.Errorf("Transports: %v", err)
	}
}
