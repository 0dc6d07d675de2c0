package cudabackend

import (
	"encoding/binary"

	"github.com/ferryrdma/ferry/a2a"
)

// Layouts shared with the kernels (kernels/a2a_common.cuh). The probe
// kernel reports the C sizes and offsets, and New refuses a build that
// disagrees with these.
const (
	paramsAddrs  = 16 // 64-bit fields of struct a2a_params
	paramsWords  = 30 // 32-bit fields after them
	paramsSize   = paramsAddrs*8 + paramsWords*4
	stateBarrier = 256  // offset of the grid barrier in struct a2a_state
	stateSize    = 1024 // bytes reserved for struct a2a_state
	runWords     = 8    // struct a2a_run
	slotWords    = 16   // control block: words per slot
	ctrlBytes    = 4096
	syncBytes    = 4096 // sync slots at the tail of the receive buffer: 2*S words
	metaHeader   = 16   // words before tokens per expert
)

// Control block slots (A2A_* in a2a_common.cuh).
const (
	slotRouteDone = iota
	slotSendDone
	slotDrecvDone
	slotCsendDone
	slotCrecvDone
	slotDispatchFree
	slotPlanReady
	slotCombineFree
	slotDispatchRDMA
	slotCombineRDMA
	slotStatus       // + phase
	slotWorkerFailed = slotStatus + 4
)

// Phases, in call order.
const (
	phaseDispatchSend = iota
	phaseDispatchRecv
	phaseCombineSend
	phaseCombineRecv
)

// metaLayout places the receive plan in the metadata block (words).
type metaLayout struct {
	tokens, offsets int // L, L+1 words
	runs, starts    int // maxRuns runs, maxRuns+1 starts
	maxRuns         int
	words           int
}

func newMetaLayout(l *a2a.Layout) metaLayout {
	L := l.LocalExperts
	m := metaLayout{tokens: metaHeader, offsets: metaHeader + L, maxRuns: 2*l.Groups*L + 1}
	m.runs = (metaHeader + 2*L + 1 + 3) &^ 3
	m.starts = m.runs + runWords*m.maxRuns
	m.words = m.starts + m.maxRuns + 1
	return m
}

// recordBytes is the size of the per-copy receive records (16 bytes per
// copy a rank can receive).
func recordBytes(l *a2a.Layout) int { return 16 * (l.RecvRows + 1) }

// addrs are the 64-bit fields of struct a2a_params, in order.
type addrs struct {
	send, recv, peerSend, peerRecv, peerSync, sync, table, ctrl, meta, dmeta, state, mask, prefix, offsets, pos, ranks uint64
}

// encodeParams lays out struct a2a_params.
func encodeParams(l *a2a.Layout, a addrs, ml metaLayout, chunks, threads int) []byte {
	b := make([]byte, 0, paramsSize)
	for _, v := range []uint64{a.send, a.recv, a.peerSend, a.peerRecv, a.peerSync, a.sync, a.table, a.ctrl, a.meta,
		a.dmeta, a.state, a.mask, a.prefix, a.offsets, a.pos, a.ranks} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	r := l.Rank
	base := l.Node(r) * l.NVLinkSize
	for _, v := range []int{
		r, l.WorldSize, l.NVLinkSize, l.ReplicaSize, l.Groups, l.Nodes,
		l.LocalExperts, l.Experts, l.ExpertsPerToken, l.MaxTokens, chunks, l.Hidden,
		l.Private, l.MaxCopiesFrom, l.TokenBytes, l.Scales, l.CombineBytes,
		l.DispatchRow, l.CombineRow,
		int(l.CombineType), l.RowWords, r - base, base, l.Group(r), l.Replica(r),
		ml.maxRuns, ml.runs, ml.starts, 0, threads,
	} {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// Per-rank flags of the kernels (A2A_RANK_* in a2a_common.cuh).
const (
	rankServed = 1
	rankActive = 2
)

// encodeRanks lays out the kernels' per-rank flags for the members m.
func encodeRanks(m *a2a.Members) []byte {
	b := make([]byte, len(m.Active))
	for q := range b {
		if m.Active[q] {
			b[q] |= rankActive
		}
		if m.Serves[q] {
			b[q] |= rankServed
		}
	}
	return b
}
