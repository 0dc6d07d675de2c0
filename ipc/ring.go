package ipc

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A connection page is the shared memory of one initiator-to-target
// connection, created by the target and mapped by both: a ring of
// immediates and a ring of two-sided messages, each with one producer (the
// initiator's worker) and one consumer (the target's worker). Indexes are
// free-running counters; the producer writes entries, then publishes its
// tail with an atomic store, and the consumer loads the tail atomically
// before reading entries, so an immediate is never seen before the bytes
// of its write (which the initiator copied before publishing).
const (
	immCap      = 1 << 14 // immediates in flight per connection
	msgCap      = 1 << 20 // bytes of the message ring
	pageHdrSize = 4096
	immOff      = pageHdrSize
	msgOff      = immOff + immCap*4
	connPageLen = msgOff + msgCap

	pageMagic   = 0x66697063 // "fipc"
	pageVersion = 2

	msgHdr = 8 // message record header: the length (u64); records are 8-aligned
)

// MaxMessage is the largest two-sided message a connection carries.
const MaxMessage = msgCap - msgHdr

// pageHeader is the first page; each index has its own cache line.
type pageHeader struct {
	magic, version uint32
	_              [56]byte
	immTail        atomic.Uint64
	_              [56]byte
	immHead        atomic.Uint64
	_              [56]byte
	msgTail        atomic.Uint64
	_              [56]byte
	msgHead        atomic.Uint64
	_              [56]byte
	sleeping       atomic.Uint32 // the consumer's worker sleeps: wake it after publishing
	_              [60]byte
}

type connPage struct {
	mem []byte
	hdr *pageHeader
	imm *[immCap]uint32
	msg []byte
}

func viewPage(mem []byte) *connPage {
	return &connPage{
		mem: mem,
		hdr: (*pageHeader)(unsafe.Pointer(&mem[0])),
		imm: (*[immCap]uint32)(unsafe.Pointer(&mem[immOff])),
		msg: mem[msgOff : msgOff+msgCap : msgOff+msgCap],
	}
}

func (p *connPage) init() {
	p.hdr.magic, p.hdr.version = pageMagic, pageVersion
}

func (p *connPage) valid() bool {
	return len(p.mem) >= connPageLen && p.hdr.magic == pageMagic && p.hdr.version == pageVersion
}

// producer is the initiator's side of a page; only its worker uses it.
type producer struct {
	pg              *connPage
	wake            int    // the consumer's wake eventfd (our copy)
	immTail, immSee uint64 // our tail, the consumer's head as last seen
	msgTail, msgSee uint64
	dirty           bool // immediates written but not yet published
}

// notify wakes the consumer's worker if it sleeps. It follows a tail
// store: the consumer sets sleeping before it checks the tails one last
// time, and both sides' operations are sequentially consistent, so either
// it sees our entries or we see it asleep. Only one producer of those
// that see it asleep pays for the system call.
func (p *producer) notify() {
	if s := &p.pg.hdr.sleeping; s.Load() != 0 && s.CompareAndSwap(1, 0) {
		_, _ = unix.Write(p.wake, eventOne[:])
	}
}

var eventOne = [8]byte{1}

// immRoom reports whether one more immediate fits.
func (p *producer) immRoom() bool {
	if p.immTail-p.immSee < immCap {
		return true
	}
	p.immSee = p.pg.hdr.immHead.Load()
	return p.immTail-p.immSee < immCap
}

// pushImm writes one immediate; call immRoom first. It becomes visible at
// the next publish.
func (p *producer) pushImm(v uint32) {
	p.pg.imm[p.immTail&(immCap-1)] = v
	p.immTail++
	p.dirty = true
}

func (p *producer) publish() {
	if p.dirty {
		p.dirty = false
		p.pg.hdr.immTail.Store(p.immTail)
		p.notify()
	}
}

func recordLen(n uint64) uint64 { return msgHdr + (n+7)&^7 }

// pushMsg writes one message record and publishes it, or reports false
// when the ring has no room (the consumer has not taken earlier ones).
func (p *producer) pushMsg(b []byte) bool {
	need := recordLen(uint64(len(b)))
	if p.msgTail-p.msgSee+need > msgCap {
		p.msgSee = p.pg.hdr.msgHead.Load()
		if p.msgTail-p.msgSee+need > msgCap {
			return false
		}
	}
	at := p.msgTail & (msgCap - 1) // records are 8-aligned: a header never wraps
	binary.LittleEndian.PutUint64(p.pg.msg[at:], uint64(len(b)))
	ringCopyIn(p.pg.msg, (at+msgHdr)&(msgCap-1), b)
	p.msgTail += need
	p.pg.hdr.msgTail.Store(p.msgTail)
	p.notify()
	return true
}

func ringCopyIn(ring []byte, at uint64, b []byte) {
	n := copy(ring[at:], b)
	copy(ring, b[n:])
}

func ringCopyOut(dst, ring []byte, at uint64) {
	n := copy(dst, ring[at:])
	copy(dst[n:], ring)
}

// consumer is the target's side of a page; only its worker uses it.
type consumer struct {
	pg      *connPage
	immHead uint64
	msgHead uint64
}

// pendingImm returns how many immediates wait, or false when the producer
// published an impossible tail (a broken or hostile peer).
func (c *consumer) pendingImm() (uint64, bool) {
	n := c.pg.hdr.immTail.Load() - c.immHead
	return n, n <= immCap
}

// takeImm returns the next immediate; call pendingImm first.
func (c *consumer) takeImm() uint32 {
	v := c.pg.imm[c.immHead&(immCap-1)]
	c.immHead++
	return v
}

func (c *consumer) releaseImm() { c.pg.hdr.immHead.Store(c.immHead) }

// peekMsg returns the length of the next message, whether there is one,
// and false in bad when the record is impossible.
func (c *consumer) peekMsg() (n uint64, ok, bad bool) {
	avail := c.pg.hdr.msgTail.Load() - c.msgHead
	if avail == 0 {
		return 0, false, false
	}
	if avail > msgCap || avail < msgHdr {
		return 0, false, true
	}
	n = binary.LittleEndian.Uint64(c.pg.msg[c.msgHead&(msgCap-1):])
	if n > MaxMessage || recordLen(n) > avail {
		return 0, false, true
	}
	return n, true, false
}

// takeMsg copies the next message (of length n from peekMsg) into dst, if
// dst is long enough, and frees its record.
func (c *consumer) takeMsg(dst []byte, n uint64) {
	if uint64(len(dst)) >= n {
		ringCopyOut(dst[:n], c.pg.msg, (c.msgHead+msgHdr)&(msgCap-1))
	}
	c.msgHead += recordLen(n)
	c.pg.hdr.msgHead.Store(c.msgHead)
}
