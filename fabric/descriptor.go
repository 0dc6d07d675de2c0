package fabric

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// AddrMode says how a provider forms the remote address of an RDMA write
// into a registered region.
type AddrMode = rdma.AddrMode

// The address modes (see rdma.AddrMode).
const (
	AddrVirtual = rdma.AddrVirtual
	AddrOffset  = rdma.AddrOffset
)

// RemoteKey is what a peer needs to write into a region through one NIC.
type RemoteKey struct {
	Addr Address  // the NIC's endpoint address
	Key  uint64   // the remote key on that NIC
	Mode AddrMode // how remote addresses are formed
}

// Descriptor is the remote-usable description of a registered region: its
// base address in the owner's process, its length, and one RemoteKey per NIC
// of the group that registered it, in NIC order. Exchange it out of band in
// its binary or text form.
//
// Writers check every remote range against Length before posting, because
// some providers (tcp) do not. A descriptor is otherwise trusted: one with a
// wrong key or a length larger than its region (forged, or stale: its region
// was unregistered) cannot be told apart by the writer, and on tcp and shm
// the write can complete successfully while nothing lands and no immediate
// reaches the target, whose wait then ends only by its own timeout. The
// engine refuses what it can see: descriptors no registration produces (no
// NICs, an unknown address mode, an empty address, a wrapping range) at
// submit, and, for descriptors naming an endpoint of this very process, a
// key that is not a live registration there (ErrUnknownRegion) or a range
// outside it (ErrOutOfBounds) when the write is accepted. A descriptor
// whose engine is gone or was replaced is refused with ErrStaleDescriptor
// (see the package documentation).
type Descriptor struct {
	Base   uint64
	Length uint64
	NICs   []RemoteKey
}

// descriptorMagic and descriptorVersion start a descriptor's binary form.
const (
	descriptorMagic = 0xfd
	// descriptorVersion 2 embeds addresses that carry their engine's
	// incarnation; version 1 is refused with a message saying so.
	descriptorVersion = 2
	// MaxNICs is the most NICs a group, and so a descriptor, can have.
	MaxNICs = 4
)

// check reports ErrOutOfBounds unless [off, off+n) lies inside the region.
func (d *Descriptor) check(off, n uint64) bool {
	return off <= d.Length && n <= d.Length-off
}

// AppendBinary appends the binary form: magic, version, base, length (both
// little-endian u64), NIC count, then per NIC the mode, the key (u64) and
// the address in its binary form.
func (d Descriptor) AppendBinary(b []byte) ([]byte, error) {
	if len(d.NICs) == 0 || len(d.NICs) > MaxNICs {
		return nil, fmt.Errorf("descriptor with %d nics: %w", len(d.NICs), ErrInvalidArgument)
	}
	b = append(b, descriptorMagic, descriptorVersion)
	b = binary.LittleEndian.AppendUint64(b, d.Base)
	b = binary.LittleEndian.AppendUint64(b, d.Length)
	b = append(b, byte(len(d.NICs)))
	for _, n := range d.NICs {
		b = append(b, byte(n.Mode))
		b = binary.LittleEndian.AppendUint64(b, n.Key)
		b, _ = n.Addr.AppendBinary(b)
	}
	return b, nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (d Descriptor) MarshalBinary() ([]byte, error) { return d.AppendBinary(nil) }

// UnmarshalBinary implements encoding.BinaryUnmarshaler. It rejects
// truncated, trailing and unknown-version input with ErrBadEncoding.
func (d *Descriptor) UnmarshalBinary(b []byte) error {
	bad := func(what string) error { return fmt.Errorf("descriptor: %s: %w", what, ErrBadEncoding) }
	if len(b) < 19 {
		return bad("truncated header")
	}
	if b[0] != descriptorMagic {
		return bad("bad magic")
	}
	if b[1] == 1 {
		return bad("version 1, written before descriptors carried their engine's incarnation: export it again from a current engine")
	}
	if b[1] != descriptorVersion {
		return bad(fmt.Sprintf("version %d", b[1]))
	}
	var v Descriptor
	v.Base = binary.LittleEndian.Uint64(b[2:])
	v.Length = binary.LittleEndian.Uint64(b[10:])
	n := int(b[18])
	if n == 0 || n > MaxNICs {
		return bad(fmt.Sprintf("%d nics", n))
	}
	b = b[19:]
	v.NICs = make([]RemoteKey, n)
	for i := range v.NICs {
		if len(b) < 9 {
			return bad("truncated nic")
		}
		m := AddrMode(b[0])
		if m != AddrVirtual && m != AddrOffset {
			return bad(fmt.Sprintf("address mode %d", b[0]))
		}
		v.NICs[i].Mode = m
		v.NICs[i].Key = binary.LittleEndian.Uint64(b[1:])
		a, used, err := rdma.DecodeAddress(b[9:])
		if err != nil {
			return fmt.Errorf("descriptor nic %d: %w", i, err)
		}
		v.NICs[i].Addr = a
		b = b[9+used:]
	}
	if len(b) != 0 {
		return bad(fmt.Sprintf("%d trailing bytes", len(b)))
	}
	*d = v
	return nil
}

// MarshalText implements encoding.TextMarshaler (hex of the binary form).
func (d Descriptor) MarshalText() ([]byte, error) {
	bin, err := d.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return hex.AppendEncode(nil, bin), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Descriptor) UnmarshalText(t []byte) error {
	bin, err := hex.AppendDecode(nil, t)
	if err != nil {
		return fmt.Errorf("descriptor text: %v: %w", err, ErrBadEncoding)
	}
	return d.UnmarshalBinary(bin)
}

// ParseDescriptor parses the text form.
func ParseDescriptor(s string) (Descriptor, error) {
	var d Descriptor
	err := d.UnmarshalText([]byte(s))
	return d, err
}

// String returns the text form, as Address.String does: what a peer
// passes to ParseDescriptor. An invalid descriptor (one MarshalText
// refuses) gives its Summary instead.
func (d Descriptor) String() string {
	b, err := d.MarshalText()
	if err != nil {
		return d.Summary()
	}
	return string(b)
}

// Summary returns a readable description for logs: base, length and each
// NIC's address, key and addressing mode.
func (d Descriptor) Summary() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "descriptor{base=%#x len=%d", d.Base, d.Length)
	for i, n := range d.NICs {
		fmt.Fprintf(&sb, " nic%d={addr=%s key=%#x %s}", i, n.Addr, n.Key, n.Mode)
	}
	sb.WriteString("}")
	return sb.String()
}
