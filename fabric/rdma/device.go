package rdma

import (
	"fmt"
	"strconv"
	"strings"
)

// Device names the memory a region lives in and the worker that owns it: the
// host, or one CUDA device by ordinal. The zero value is the host.
type Device struct {
	gpu     bool
	ordinal int
}

// HostDevice is host memory; its worker is the engine's host group.
var HostDevice = Device{}

// CUDADevice returns the device for CUDA ordinal i.
func CUDADevice(i int) Device { return Device{gpu: true, ordinal: i} }

// IsHost reports whether d is host memory.
func (d Device) IsHost() bool { return !d.gpu }

// IsCUDA reports whether d is a CUDA device.
func (d Device) IsCUDA() bool { return d.gpu }

// Ordinal returns the CUDA ordinal, or -1 for the host.
func (d Device) Ordinal() int {
	if !d.gpu {
		return -1
	}
	return d.ordinal
}

// String returns "host" or "cuda:N".
func (d Device) String() string {
	if !d.gpu {
		return "host"
	}
	return "cuda:" + strconv.Itoa(d.ordinal)
}

// ParseDevice parses "host", "cpu" or "cuda:N" (also "gpu:N" and a bare "N").
func ParseDevice(s string) (Device, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	switch s {
	case "host", "cpu":
		return HostDevice, nil
	}
	for _, p := range []string{"cuda:", "gpu:"} {
		s = strings.TrimPrefix(s, p)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return Device{}, fmt.Errorf("parse device %q: %w", s, ErrInvalidArgument)
	}
	return CUDADevice(n), nil
}
