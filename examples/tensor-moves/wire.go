package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
)

// Every control message is one fixed-size msg on the engine's side
// channel (Engine.Send into the peer's BouncingRecvs). What each field
// means depends on Kind.
type msg struct {
	Kind   uint8
	Client uint8
	Flag   uint8 // create: sharded; done: status
	_      uint8
	From   uint32 // sender's rank
	Op     uint32 // the op's number, echoed in the reply and the acks
	A, B   uint32 // requests: the operands' tensor ids
	C      uint32 // requests: the result's tensor id
	Imm    uint32 // commands: the immediate the data of this step carries
	Count  uint32 // immediates to wait for before computing
	Mask   uint64 // cmdMove: destination workers (bit w), bit 63 the dispatcher
	Off    [3]uint64
	N      uint64 // elements (bytes for cmdMove)
	Seed   uint64
	Sum    uint64 // checksums in replies and acks
}

// Message kinds.
const (
	// client -> dispatcher
	reqCreate   = iota + 1 // C: N elements from Seed; Flag 1: sharded over the workers
	reqMove                // A: move the whole tensor to the next worker
	reqAdd                 // C = A + B (whole tensors)
	reqMatmul              // C = A (sharded) times a k x k matrix, gathered on every worker
	reqReduce              // C = the elementwise sum of A's shards, on one worker
	reqFree                // A
	reqPhaseEnd            // every client of this phase is done
	// dispatcher -> client
	repDone // Op, Sum; Flag: status
	// dispatcher -> worker
	cmdFill     // N elements at Off[0] from Seed, the first being element Off[1]; ack the sum
	cmdMove     // write N bytes at Off[0] to Off[1] on every worker in Mask (or the dispatcher's staging), Imm
	cmdAdd      // wait Count x Imm; Off[2] = Off[0] + Off[1], N elements; ack the sum
	cmdMatmul   // Off[1] = Off[0] (N elements, rows of k) times the matrix of Seed
	cmdReduce   // wait Count x Imm; Off[2] = Off[0] + the Count shards at Off[1] (stride N); ack the sum
	cmdChecksum // wait Count x Imm; ack the sum of N elements at Off[0]
	cmdPhaseEnd
	// worker -> dispatcher
	ackDone // Op, Sum
)

// Status of a reply.
const (
	statusOK       = 0
	statusMismatch = 1 // the workers disagreed about a replicated result
	statusNoMemory = 2
)

// maskDispatcher in a cmdMove mask means the dispatcher's staging buffer.
const maskDispatcher = 1 << 63

var msgSize = binary.Size(msg{})

func (m *msg) encode() []byte {
	b, err := binary.Append(make([]byte, 0, msgSize), binary.LittleEndian, m)
	if err != nil {
		panic(err) // msg is fixed-size: cannot fail
	}
	return b
}

func decode(b []byte) (msg, error) {
	var m msg
	if len(b) != msgSize {
		return m, fmt.Errorf("control message of %d bytes, want %d: %w", len(b), msgSize, fabric.ErrBadEncoding)
	}
	err := binary.Read(bytes.NewReader(b), binary.LittleEndian, &m)
	return m, err
}

// mailbox queues the messages the engine's dispatcher hands over. It
// never blocks the engine: a callback that blocked would hold up every
// other callback and completion of the engine.
type mailbox struct {
	mu    sync.Mutex
	queue [][]byte
	ready chan struct{}
	bytes int64 // control bytes received
}

func newMailbox(r *job.Rank) (*mailbox, error) {
	mb := &mailbox{ready: make(chan struct{}, 1)}
	err := r.Engine.BouncingRecvs(32, msgSize, func(b []byte) {
		mb.mu.Lock()
		mb.queue = append(mb.queue, b)
		mb.bytes += int64(len(b))
		mb.mu.Unlock()
		select {
		case mb.ready <- struct{}{}:
		default:
		}
	}, nil)
	return mb, err
}

// next returns the next message.
func (mb *mailbox) next(ctx context.Context) (msg, error) {
	for {
		mb.mu.Lock()
		if len(mb.queue) > 0 {
			b := mb.queue[0]
			mb.queue = mb.queue[1:]
			mb.mu.Unlock()
			return decode(b)
		}
		mb.mu.Unlock()
		select {
		case <-mb.ready:
		case <-ctx.Done():
			return msg{}, fmt.Errorf("waiting for a control message: %w", ctx.Err())
		}
	}
}

// sender sends control messages and counts their bytes.
type sender struct {
	r     *job.Rank
	bytes int64
	n     int64
	sent  fabric.TransferCounter
}

// drain waits until every message sent has completed, so no send is in
// flight when the engines close.
func (s *sender) drain(ctx context.Context) error {
	if err := s.sent.Wait(ctx, s.n); err != nil {
		return err
	}
	return s.sent.Err()
}

func (s *sender) send(ctx context.Context, to int, m msg) error {
	if err := s.sent.Err(); err != nil {
		return fmt.Errorf("a control message failed: %w", err)
	}
	m.From = uint32(s.r.ID)
	b := m.encode()
	if err := s.r.Engine.Send(ctx, s.r.Peers[to], b, fabric.Count(&s.sent)); err != nil {
		return err
	}
	s.bytes += int64(len(b))
	s.n++
	return nil
}
