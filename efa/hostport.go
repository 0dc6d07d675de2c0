package efa

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// A tcp;ofi_rxm endpoint's address is the socket address it listens on
// (a struct sockaddr_in or sockaddr_in6 as libfabric's tcp provider
// reports it), so it can be written as host:port and back. The other
// transports' addresses cannot: efa and verbs name a device GID and a
// queue pair number, shm a region name; only the hex form carries them.

const (
	afInet      = 2
	afInet6     = 10
	sockaddrIn  = 16
	sockaddrIn6 = 28
)

// TCPAddress turns host:port (an IP address or a name that resolves to
// one) into the address of the tcp;ofi_rxm endpoint listening there.
func TCPAddress(hostport string) (rdma.Address, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return rdma.Address{}, fmt.Errorf("tcp address %q: %v: %w", hostport, err, rdma.ErrInvalidArgument)
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return rdma.Address{}, fmt.Errorf("tcp address %q: port %q: %w", hostport, ps, rdma.ErrInvalidArgument)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ips, lerr := net.LookupIP(host)
		if lerr != nil || len(ips) == 0 {
			return rdma.Address{}, fmt.Errorf("tcp address %q: resolve %s: %v: %w", hostport, host, lerr, rdma.ErrInvalidArgument)
		}
		ip, _ = netip.AddrFromSlice(ips[0])
	}
	ip = ip.Unmap()
	var b []byte
	if ip.Is4() {
		b = make([]byte, sockaddrIn)
		binary.LittleEndian.PutUint16(b[0:], afInet)
		binary.BigEndian.PutUint16(b[2:], uint16(port))
		a4 := ip.As4()
		copy(b[4:], a4[:])
	} else {
		b = make([]byte, sockaddrIn6)
		binary.LittleEndian.PutUint16(b[0:], afInet6)
		binary.BigEndian.PutUint16(b[2:], uint16(port))
		a16 := ip.As16()
		copy(b[8:], a16[:])
	}
	return rdma.AddressFromRaw(b)
}

// TCPHostPort is the inverse of TCPAddress: the host:port of a
// tcp;ofi_rxm address, or false for an address that is not a socket
// address.
func TCPHostPort(a rdma.Address) (string, bool) {
	b := a.Raw()
	if len(b) < 4 {
		return "", false
	}
	port := binary.BigEndian.Uint16(b[2:])
	switch fam := binary.LittleEndian.Uint16(b[0:]); {
	case fam == afInet && len(b) == sockaddrIn:
		ip := netip.AddrFrom4([4]byte(b[4:8]))
		return netip.AddrPortFrom(ip, port).String(), true
	case fam == afInet6 && len(b) == sockaddrIn6:
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		return netip.AddrPortFrom(ip, port).String(), true
	}
	return "", false
}

// HostPortTransport is the one transport whose addresses TCPAddress
// writes; HostPortLimit says why the others have none.
const (
	HostPortTransport = "tcp;ofi_rxm"
	HostPortLimit     = "only tcp;ofi_rxm addresses are socket addresses; efa, verbs, shm and ipc addresses name devices, queue pairs or regions: use the hex address"
)
