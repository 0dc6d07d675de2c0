//go:build !cgo

package efa

import (
	"errors"
	"testing"

	"github.com/ferryrdma/ferry/fabric"
)

func TestNoCgo(t *testing.T) {
	if _, err := Domains("tcp;ofi_rxm", fabric.DomainOptions{}); !errors.Is(err, fabric.ErrNotSupported) {
		t.Errorf("Domains: %v", err)
	}
	if _, err := fabric.ChooseTransport("shm", fabric.DomainOptions{}); !errors.Is(err, fabric.ErrNotSupported) {
		t.Errorf("ChooseTransport: %v", err)
	}
	if _, err := RawBench(RawSpec{}); !errors.Is(err, fabric.ErrNotSupported) {
		t.Errorf("RawBench: %v", err)
	}
	if _, err := Transports(); !errors.Is(err, fabric.ErrNotSupported) {
		t.Errorf("Transports: %v", err)
	}
}
