package main

import (
	"context"
	"encoding/binary"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
)

// stage is what every mode shares on one rank: the model, the rank's
// registered memory and the descriptors of every rank's inbox.
type stage struct {
	c      config
	m      model
	r      *job.Rank
	inbox  *job.Buffer // rings, gather slots, all-reduce slots, probe area
	work   *job.Buffer // send sources: one slot per ring slot, then partials
	descs  []fabric.Descriptor
	lay    inboxLayout
	sent   []*fabric.Transfer // per work slot: its last send
	busy   []bool
	scr    []uint16 // scratch for the model
	nics   int
	tokens []int // tokens this rank has seen, in order
}

// inboxLayout places the rings in every rank's inbox region (the same
// offsets on every rank, computed from the configuration).
type inboxLayout struct {
	ring, gather ring
	reduce       int // offset of the all-reduce slots: [2 parities][ranks][slotBytes]
	probe        int
	size         int
}

func newLayout(c config) inboxLayout {
	act := c.Chunk * c.Hidden * 2 // one prefill chunk
	l := inboxLayout{ring: ring{kind: kindRing, slots: c.Slots, slotBytes: act}}
	l.gather = ring{kind: kindGather, slots: c.Slots, slotBytes: c.Hidden * 2, base: l.ring.base + c.Slots*act}
	l.reduce = l.gather.base + c.Slots*c.Hidden*2
	l.probe = l.reduce + 2*c.Ranks*act
	l.size = l.probe + c.ProbeBytes
	return l
}

// workSlot returns work slot i's memory once its previous send has read
// it.
func (s *stage) workSlot(ctx context.Context, i int) ([]byte, error) {
	if s.busy[i] {
		if err := s.sent[i].Wait(ctx); err != nil {
			return nil, err
		}
		s.busy[i] = false
	}
	n := s.lay.ring.slotBytes
	return s.work.Bytes()[i*n : (i+1)*n], nil
}

// drain waits until every send from a work slot has completed.
func (s *stage) drain(ctx context.Context) error {
	for i, busy := range s.busy {
		if busy {
			if err := s.sent[i].Wait(ctx); err != nil {
				return err
			}
			s.busy[i] = false
		}
	}
	return nil
}

// sendFrom sends n bytes of work slot i on o and marks the slot busy until
// the send has read it.
func (s *stage) sendFrom(ctx context.Context, o *outbox, i, n int) error {
	s.busy[i] = true
	return o.send(ctx, s.work.Region, i*s.lay.ring.slotBytes, n, fabric.Notify(s.sent[i]))
}

// compute runs layers [from, to) on x and pads the time out to the
// simulated compute time per layer.
func (s *stage) compute(x []uint16, from, to int, perLayer time.Duration) time.Duration {
	start := time.Now()
	s.m.layers(from, to, x, s.scr)
	time.Sleep(time.Until(start.Add(time.Duration(to-from) * perLayer)))
	return time.Since(start)
}

// acts views activation bytes as 2-byte elements.
func acts(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

func putToken(b []byte, t int) { binary.LittleEndian.PutUint32(b, uint32(t)) }
func getToken(b []byte) int    { return int(binary.LittleEndian.Uint32(b)) }
