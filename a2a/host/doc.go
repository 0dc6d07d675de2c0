// Package host is the host-memory backend of a2a: the dispatch and combine
// protocol run by Go loops over host buffers, with ferry's TransferEngine
// (package fabric) carrying everything between NVLink domains and shared
// memory (NodeMemory) standing in for NVLink inside one.
//
// It exists so the whole protocol, every path class included, runs on
// machines with no GPU: CI runs it over the in-process "mem" provider and
// over libfabric's tcp and shm providers.
//
// Per iteration, in the caller's goroutine (the Context drives it):
//
//	DispatchSend  own count row -> table of every other group (scatter, route tag);
//	              pack rows (stage in the send buffer, or store into a node
//	              peer's receive buffer); node-dispatch signal to node peers;
//	              eager scatter into the private windows (dispatch tag)
//	DispatchRecv  wait G-1 route immediates; PlanRecv over the table;
//	              overflow scatter (sharded by bytes); copy node runs; wait
//	              the planned dispatch immediates; copy remote runs; barrier
//	CombineSend   stage remote results, combine scatter (sharded by bytes),
//	              store node results into every replica's receive buffer;
//	              node-combine signal
//	CombineRecv   wait node and combine immediates; reduce; barrier
//
// Each barrier also waits for the completion of every transfer this rank
// posted, so a buffer is reused only after the NIC is done reading it and
// every peer is done reading what this rank exposed.
//
// The overflow scatter is posted at the start of DispatchRecv, in the
// caller's goroutine: a rank that delays its DispatchRecv delays the
// overflow rows it owes its peers (a worker goroutine that posts it as soon
// as the counts arrive is the next step).
package host
