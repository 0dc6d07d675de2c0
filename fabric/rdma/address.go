package rdma

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// MaxAddressLen bounds a provider's raw endpoint address.
const MaxAddressLen = 255

// addressVersion is the first byte of an Address's binary form. Version 1
// (no incarnation) is refused: such an address cannot be told from one of
// a later engine on the same endpoint.
const addressVersion = 2

// Address is the opaque endpoint address of one NIC domain: the raw name a
// provider reports (fi_getname on libfabric, GID/LID/QPN/QKey on verbs) and
// the incarnation of the engine that opened it (DomainOptions.Incarnation),
// which tells that engine from a later one given the same raw name (a
// restarted process on a pinned port). It is comparable and usable as a
// map key; the zero value is the empty address.
//
// Its binary form is a version byte, a length byte, the raw bytes and the
// incarnation (little-endian u64); its text form is the binary form in
// lowercase hex. Both are stable across releases of the same version.
type Address struct {
	raw string
	inc uint64
}

// AddressFromRaw wraps a provider's raw endpoint name, with no incarnation.
func AddressFromRaw(b []byte) (Address, error) {
	return NewAddress(b, 0)
}

// NewAddress wraps a provider's raw endpoint name and the incarnation of
// the engine that owns it.
func NewAddress(b []byte, incarnation uint64) (Address, error) {
	if len(b) == 0 || len(b) > MaxAddressLen {
		return Address{}, fmt.Errorf("address of %d bytes: %w", len(b), ErrBadEncoding)
	}
	return Address{raw: string(b), inc: incarnation}, nil
}

// Incarnation is the incarnation of the engine that owns the address (0:
// none given).
func (a Address) Incarnation() uint64 { return a.inc }

// Summary is a short form for messages: the raw name's length and its
// first bytes in hex.
func (a Address) Summary() string {
	r := a.raw
	if len(r) > 12 {
		return fmt.Sprintf("%x..(%d bytes)", r[:12], len(r))
	}
	return fmt.Sprintf("%x", r)
}

// Raw returns a copy of the provider's raw endpoint name.
func (a Address) Raw() []byte { return []byte(a.raw) }

// RawString returns the raw endpoint name as a string (no copy).
func (a Address) RawString() string { return a.raw }

// IsZero reports whether a is the empty address.
func (a Address) IsZero() bool { return a.raw == "" }

// String returns the text form.
func (a Address) String() string {
	b, _ := a.MarshalText()
	return string(b)
}

// AppendBinary appends the binary form to b.
func (a Address) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, addressVersion, byte(len(a.raw)))
	b = append(b, a.raw...)
	return binary.LittleEndian.AppendUint64(b, a.inc), nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (a Address) MarshalBinary() ([]byte, error) {
	return a.AppendBinary(make([]byte, 0, 10+len(a.raw)))
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (a *Address) UnmarshalBinary(b []byte) error {
	v, n, err := DecodeAddress(b)
	if err != nil {
		return err
	}
	if n != len(b) {
		return fmt.Errorf("address: %d trailing bytes: %w", len(b)-n, ErrBadEncoding)
	}
	*a = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (a Address) MarshalText() ([]byte, error) {
	bin, _ := a.MarshalBinary()
	return hex.AppendEncode(nil, bin), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Address) UnmarshalText(t []byte) error {
	bin, err := hex.AppendDecode(nil, t)
	if err != nil {
		return fmt.Errorf("address text: %v: %w", err, ErrBadEncoding)
	}
	return a.UnmarshalBinary(bin)
}

// ParseAddress parses the text form.
func ParseAddress(s string) (Address, error) {
	var a Address
	err := a.UnmarshalText([]byte(s))
	return a, err
}

// DecodeAddress reads one binary address from the front of b and returns
// the number of bytes it used: for formats that embed addresses
// (descriptors, peer groups).
func DecodeAddress(b []byte) (Address, int, error) {
	if len(b) < 2 {
		return Address{}, 0, fmt.Errorf("address: truncated header: %w", ErrBadEncoding)
	}
	if b[0] == 1 {
		return Address{}, 0, fmt.Errorf("address: version 1, written before addresses carried their engine's incarnation: export it again from a current engine: %w", ErrBadEncoding)
	}
	if b[0] != addressVersion {
		return Address{}, 0, fmt.Errorf("address: version %d: %w", b[0], ErrBadEncoding)
	}
	n := int(b[1])
	if n == 0 || len(b) < 10+n {
		return Address{}, 0, fmt.Errorf("address: %d of %d bytes: %w", len(b)-2, n+8, ErrBadEncoding)
	}
	return Address{raw: string(b[2 : 2+n]), inc: binary.LittleEndian.Uint64(b[2+n:])}, 10 + n, nil
}
