//go:build !cgo || !linux

package emu

import (
	"context"
	"fmt"
)

type sharedModule struct{ kernels []kernelInfo }

type kernelInfo struct {
	name       string
	sizes      []uint32
	maxThreads int
}

// Build always fails in this build: loading a module needs cgo.
func Build(ctx context.Context, spec BuildSpec) (*Module, error) {
	return nil, fmt.Errorf("cuda emu: built with CGO_ENABLED=0: %w", ErrNotSupported)
}

// Close does nothing in this build.
func (m *Module) Close() error { return nil }

func (sm *sharedModule) run(l *launchReq, cancel *int32) error { return ErrNotSupported }

type cancelFlag struct{ p *int32 }

func newCancelFlag() cancelFlag { return cancelFlag{new(int32)} }
func (c cancelFlag) set(v int)  {}
func (c cancelFlag) free()      {}
