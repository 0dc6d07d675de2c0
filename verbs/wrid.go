package verbs

import "github.com/ferryrdma/ferry/internal/ibv"

// wrKind is what a work request was, carried in the top byte of its wr_id
// (the C side writes the same layout). Error completions leave wc.opcode
// undefined, so a completion is classified by its wr_id alone.
type wrKind uint8

const (
	wrWrite  wrKind = ibv.WRKindWrite
	wrSend   wrKind = ibv.WRKindSend
	wrRecv   wrKind = ibv.WRKindRecv
	wrImm    wrKind = ibv.WRKindImm
	wrUDRecv wrKind = ibv.WRKindUDRecv
	wrUDSend wrKind = ibv.WRKindUDSend
	wrRead   wrKind = ibv.WRKindRead
)

// wrID packs a kind and a slot index.
func wrID(k wrKind, slot uint32) uint64 { return uint64(k)<<ibv.WRKindShift | uint64(slot) }

// splitWRID undoes wrID.
func splitWRID(id uint64) (wrKind, uint32) { return wrKind(id >> ibv.WRKindShift), uint32(id) }
