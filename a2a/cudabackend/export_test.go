package cudabackend

// Hooks for this directory's external tests (package cuda_test), which
// play the kernels' side of the control protocol.

// Control slots, as the kernels number them.
const (
	SlotRouteDone    = slotRouteDone
	SlotSendDone     = slotSendDone
	SlotDrecvDone    = slotDrecvDone
	SlotCsendDone    = slotCsendDone
	SlotCrecvDone    = slotCrecvDone
	SlotPlanReady    = slotPlanReady
	SlotDispatchFree = slotDispatchFree
)

// Raise publishes epoch it in control slot s, as a kernel does.
func (b *Backend) Raise(s int, it uint32) { b.raise(s, it) }

// Reached reports whether control slot s holds epoch it or later.
func (b *Backend) Reached(s int, it uint32) bool { return int32(b.ctrlWord(s, 0).Load()-it) >= 0 }

// TableWords is the count table, where dispatch-send writes its row.
func (b *Backend) TableWords() []uint32 { return words(b.table) }
