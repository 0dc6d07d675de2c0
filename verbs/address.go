package verbs

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ibv"
)

// udAddr is a domain's public address: where its UD queue pair, the
// connection-management channel, can be reached. Peers need nothing else to
// start a handshake.
type udAddr struct {
	Link ibv.LinkLayer
	GID  [16]byte
	QPN  uint32
	LID  uint16
}

const (
	udAddrVersion = 1
	udAddrLen     = 24 // version, link layer, GID, QPN, LID
)

// appendTo appends the raw form: version, link layer, GID (16), QPN
// (big-endian u32), LID (big-endian u16).
func (a udAddr) appendTo(b []byte) []byte {
	b = append(b, udAddrVersion, byte(a.Link))
	b = append(b, a.GID[:]...)
	b = binary.BigEndian.AppendUint32(b, a.QPN)
	return binary.BigEndian.AppendUint16(b, a.LID)
}

func (a udAddr) key() string { return string(a.appendTo(make([]byte, 0, udAddrLen))) }

// address returns the fabric form.
func (a udAddr) address() rdma.Address {
	fa, _ := rdma.AddressFromRaw(a.appendTo(make([]byte, 0, udAddrLen)))
	return fa
}

func (a udAddr) String() string {
	return fmt.Sprintf("%s/qpn=%d/lid=%d", net.IP(a.GID[:]), a.QPN, a.LID)
}

// parseUDAddr decodes the raw form; anything else is ErrBadEncoding.
func parseUDAddr(b []byte) (udAddr, error) {
	if len(b) != udAddrLen || b[0] != udAddrVersion {
		return udAddr{}, fmt.Errorf("verbs address of %d bytes: %w", len(b), rdma.ErrBadEncoding)
	}
	var a udAddr
	a.Link = ibv.LinkLayer(b[1])
	if a.Link != ibv.LinkInfiniBand && a.Link != ibv.LinkEthernet {
		return udAddr{}, fmt.Errorf("verbs address: link layer %d: %w", b[1], rdma.ErrBadEncoding)
	}
	copy(a.GID[:], b[2:18])
	a.QPN = binary.BigEndian.Uint32(b[18:])
	a.LID = binary.BigEndian.Uint16(b[22:])
	if a.QPN == 0 || a.QPN >= 1<<24 {
		return udAddr{}, fmt.Errorf("verbs address: qpn %d: %w", a.QPN, rdma.ErrBadEncoding)
	}
	return a, nil
}
