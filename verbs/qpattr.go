package verbs

import "github.com/ferryrdma/ferry/internal/ibv"

// RC transport parameters. Timeout 14 is 4.096 µs·2^14 ≈ 67 ms per try;
// retry count 6 bounds how long a dead peer takes to show up as an error
// completion (7 tries, about half a second). Not 7: rxe reads a retry count
// of 7 as "forever" (it never decrements it), so writes to a vanished peer
// would hang there. RNR retry 7 does mean "retry forever" everywhere, as
// wanted: the receive queues are re-filled by the poller, so a
// receiver-not-ready is always transient.
const (
	rcTimeout     = 14
	rcRetryCnt    = 6
	rcRNRRetry    = 7
	rcMinRNRTimer = 12 // 0.64 ms
	rcHopLimit    = 64
	rcAccess      = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead
)

// pathInfo is what the local side contributes to an RC connection.
type pathInfo struct {
	port      uint8
	mtu       ibv.MTU
	global    bool // GRH needed: always on RoCE
	sgidIndex uint8
	// rdAtomic is how many RDMA READs a queue pair may have outstanding
	// and serve at once: what the device allows (max_qp_init_rd_atom,
	// max_qp_rd_atom), capped at maxRdAtomic; 0 means 1.
	rdAtomic uint8
}

// maxRdAtomic caps the READs in flight per queue pair: enough to keep a
// link busy with large reads, and what common devices allow (mlx5: 16).
const maxRdAtomic = 16

// rdAtomicOf is pathInfo.rdAtomic for a device.
func rdAtomicOf(a ibv.DeviceAttr) uint8 {
	return uint8(max(1, min(a.MaxQPRdAtom, a.MaxQPInitRdAtom, maxRdAtomic)))
}

// rcInitAttr moves a fresh RC queue pair RESET→INIT.
func rcInitAttr(port uint8) ibv.QPAttr {
	return ibv.QPAttr{
		State:  ibv.QPSInit,
		Port:   port,
		Access: rcAccess,
		Mask:   ibv.AttrState | ibv.AttrPKeyIndex | ibv.AttrPort | ibv.AttrAccessFlags,
	}
}

// rcRTRAttr moves it INIT→RTR towards the remote queue pair qpn, whose
// first packet sequence number is psn. The path MTU is the smaller of both
// ends' active MTUs.
func rcRTRAttr(p pathInfo, remote udAddr, remoteMTU ibv.MTU, qpn, psn uint32) ibv.QPAttr {
	mtu := p.mtu
	if remoteMTU != 0 && remoteMTU < mtu {
		mtu = remoteMTU
	}
	a := ibv.QPAttr{
		State:           ibv.QPSRTR,
		PathMTU:         mtu,
		DestQPN:         qpn,
		RQPSN:           psn & 0xffffff,
		MaxDestRdAtomic: max(1, p.rdAtomic),
		MinRNRTimer:     rcMinRNRTimer,
		Port:            p.port,
		DLID:            remote.LID,
		Mask: ibv.AttrState | ibv.AttrAV | ibv.AttrPathMTU | ibv.AttrDestQPN | ibv.AttrRQPSN |
			ibv.AttrMaxDestRdAtomic | ibv.AttrMinRNRTimer,
	}
	if p.global || remote.Link == ibv.LinkEthernet {
		a.IsGlobal = true
		a.DGID = remote.GID
		a.SGIDIndex = p.sgidIndex
		a.HopLimit = rcHopLimit
	}
	return a
}

// rcRTSAttr moves it RTR→RTS sending from psn.
func rcRTSAttr(psn uint32) ibv.QPAttr {
	return ibv.QPAttr{
		State:       ibv.QPSRTS,
		Timeout:     rcTimeout,
		RetryCnt:    rcRetryCnt,
		RNRRetry:    rcRNRRetry,
		SQPSN:       psn & 0xffffff,
		MaxRdAtomic: 1,
		Mask: ibv.AttrState | ibv.AttrTimeout | ibv.AttrRetryCnt | ibv.AttrRNRRetry |
			ibv.AttrSQPSN | ibv.AttrMaxQPRdAtomic,
	}
}

// errAttr moves a queue pair to ERR, which flushes everything posted on it
// as error completions, so every accepted op still yields one event.
func errAttr() ibv.QPAttr { return ibv.QPAttr{State: ibv.QPSErr, Mask: ibv.AttrState} }
