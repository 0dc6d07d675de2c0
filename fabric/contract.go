package fabric

import "github.com/ferryrdma/ferry/fabric/rdma"

// The names of the provider contract (package rdma) that users of the
// engine handle: the same types and values, so a value made with either
// name works with both.

// Address is the opaque endpoint address of one NIC domain (see
// rdma.Address): comparable, usable as a map key, with stable binary and
// text forms.
type Address = rdma.Address

// MaxAddressLen bounds a provider's raw endpoint address.
const MaxAddressLen = rdma.MaxAddressLen

// AddressFromRaw wraps a provider's raw endpoint name.
func AddressFromRaw(b []byte) (Address, error) { return rdma.AddressFromRaw(b) }

// ParseAddress parses the text form of an Address.
func ParseAddress(s string) (Address, error) { return rdma.ParseAddress(s) }

// Device names the memory a region lives in and the worker that owns it: the
// host, or one CUDA device by ordinal. The zero value is the host.
type Device = rdma.Device

// HostDevice is host memory; its worker is the engine's host group.
var HostDevice = rdma.HostDevice

// CUDADevice returns the device for CUDA ordinal i.
func CUDADevice(i int) Device { return rdma.CUDADevice(i) }

// ParseDevice parses "host", "cpu" or "cuda:N" (also "gpu:N" and a bare "N").
func ParseDevice(s string) (Device, error) { return rdma.ParseDevice(s) }

// deviceLess orders devices: the host first, then CUDA devices by ordinal.
// The main worker of an engine is its least device (see Engine.MainDevice).
func deviceLess(d, o Device) bool {
	if d.IsHost() != o.IsHost() {
		return d.IsHost()
	}
	return d.Ordinal() < o.Ordinal()
}

// Access says who may touch a registered region.
type Access = rdma.Access

// The access modes (see rdma.Access).
const (
	AccessLocal       = rdma.AccessLocal
	AccessRemoteWrite = rdma.AccessRemoteWrite
)

// MemorySpan is a range of memory to register. It is never Go heap memory:
// mmap'd host memory, C memory, or GPU memory.
type MemorySpan = rdma.MemorySpan

// DomainInfo describes one NIC endpoint a provider can open.
type DomainInfo = rdma.DomainInfo

// DomainOptions are what opening a domain needs besides its DomainInfo.
type DomainOptions = rdma.DomainOptions

// LibraryInfo names the native library a provider runs on (libfabric).
type LibraryInfo = rdma.LibraryInfo
