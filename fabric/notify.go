package fabric

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Notifications. A request (SingleWrite or PagedWrite) may carry a
// Notification: a payload of up to MaxNotifyPayload bytes for a lease's
// mailbox at the target, handed over there (Lease.WaitNotification) only
// after every write of the request is visible.
//
// How: the engine sends the notification only once all the request's
// writes completed at the initiator, as one write with an immediate
// (header and payload into the mailbox, the lease's notification value as
// the immediate), and the target reads the mailbox when that immediate
// arrives, after the write's bytes. The request's writes are flagged
// rdma.WriteVisible, so each completes only once its bytes are visible at
// the target, through whichever NIC it went: verbs (RC completes on the
// responder's acknowledgement), ipc and mem (the bytes are copied when it
// completes) and shm (its copy into the target is the write) complete so
// anyway; tcp;ofi_rxm and efa, which complete a write once sent, ask
// delivery completion for these writes only (writes without a
// notification keep the cheaper completion).
//
// SubmitNotification sends a notification on its own, after writes the
// caller saw complete: those were not flagged, so on tcp;ofi_rxm and efa
// a write through a NIC other than NIC 0 (which carries notifications, in
// order behind that NIC's writes) may still be in flight; put the
// notification on the request (Notify) instead where that matters.
//
// Order: an engine sends its notifications one at a time, each after the
// previous one completed, in the order their requests completed (the
// order of their completions at the initiator), so they arrive in that
// order at any one target. This makes them a control path, not a data
// path: a notification costs one round trip after its request.

const (
	// MaxNotifyPayload is the largest notification payload.
	MaxNotifyPayload = 4096

	notifyHeader  = 16
	mailboxSize   = notifyHeader + MaxNotifyPayload + 48 // a 64-byte multiple
	mailboxCount  = 256                                  // per engine, allocated at the first Mailbox
	notifyMagic   = 0x4e_54_46_46                        // "FFTN"
	noticesQueued = 16                                   // per lease, delivered but not yet taken
)

// Mailbox is where a lease's notification goes: the target's inbox region,
// the offset of the lease's slot in it and the lease's notification value.
// A target gets it from Lease.Mailbox and sends it to the initiator
// (MarshalBinary) with the request; the zero value is no mailbox.
type Mailbox struct {
	Dst    Descriptor
	Offset uint64
	Imm    uint32
}

// IsZero reports whether m is the zero value.
func (m Mailbox) IsZero() bool { return len(m.Dst.NICs) == 0 }

// MarshalBinary encodes m: a version byte, the value, the offset and the
// descriptor's binary form.
func (m Mailbox) MarshalBinary() ([]byte, error) {
	b := make([]byte, 13, 13+64)
	b[0] = 1
	binary.LittleEndian.PutUint32(b[1:], m.Imm)
	binary.LittleEndian.PutUint64(b[5:], m.Offset)
	return m.Dst.AppendBinary(b)
}

// UnmarshalBinary decodes what MarshalBinary wrote; anything else fails
// with ErrBadEncoding.
func (m *Mailbox) UnmarshalBinary(b []byte) error {
	if len(b) < 13 || b[0] != 1 {
		return fmt.Errorf("decode mailbox: %d bytes: %w", len(b), ErrBadEncoding)
	}
	var d Descriptor
	if err := d.UnmarshalBinary(b[13:]); err != nil {
		return fmt.Errorf("decode mailbox: %w", err)
	}
	*m = Mailbox{Dst: d, Offset: binary.LittleEndian.Uint64(b[5:]), Imm: binary.LittleEndian.Uint32(b[1:])}
	return nil
}

// MarshalText encodes m as the hex of its binary form (JSON carries it as
// a string); the zero Mailbox is the empty string.
func (m Mailbox) MarshalText() ([]byte, error) {
	if m.IsZero() {
		return []byte{}, nil
	}
	b, err := m.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return hex.AppendEncode(nil, b), nil
}

// UnmarshalText decodes what MarshalText wrote.
func (m *Mailbox) UnmarshalText(t []byte) error {
	if len(t) == 0 {
		*m = Mailbox{}
		return nil
	}
	b, err := hex.AppendDecode(nil, t)
	if err != nil {
		return fmt.Errorf("decode mailbox: %w: %w", ErrBadEncoding, err)
	}
	return m.UnmarshalBinary(b)
}

// Notification is a payload for a lease's mailbox, sent after every write
// of the request that carries it (SingleWrite.Notify, PagedWrite.Notify)
// completed at the initiator, as one write with the lease's notification
// value as immediate into the mailbox; the target hands it over when that
// immediate arrives, which is after its bytes. The request's writes are
// all visible at the target by then, over every transport and NIC: they
// complete only once delivered (see the notes at the top of notify.go;
// this costs tcp;ofi_rxm and efa a delivery acknowledgement per write of
// a request that carries a notification). An engine sends its
// notifications one at a time, each after the previous completed, so they
// reach a target in the order their requests completed. A mailbox takes
// one notification in flight: the next may overwrite it before it is read.
// The payload is copied at submit. The request's completion reports the
// end of the writes and of the notification together.
type Notification struct {
	To      Mailbox
	Payload []byte
}

// Notice is a notification as the target receives it.
type Notice struct {
	// Lease is the first value of the lease the notification was sent to.
	Lease uint32
	// Seq numbers the notifications this engine received, from 1, in
	// arrival order (over all leases).
	Seq     uint64
	Payload []byte
}

// Mailbox gives the lease a mailbox in the engine's inbox (once; later
// calls return the same) for the initiator to send a notification to. The
// inbox is allocated and registered at the first call: 256 mailboxes of 4
// KiB, ErrLeasesExhausted when all are taken. A retired lease's mailbox is
// reused last of all free ones.
func (l *Lease) Mailbox() (Mailbox, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return Mailbox{}, fmt.Errorf("mailbox: lease %#x: %w", l.First(), ErrNotLeased)
	}
	e := l.e
	if l.box == 0 {
		if err := e.notes.initInbox(e); err != nil {
			return Mailbox{}, err
		}
		box, ok := e.notes.takeBox()
		if !ok {
			return Mailbox{}, fmt.Errorf("mailbox: %d mailboxes taken: %w", mailboxCount, ErrLeasesExhausted)
		}
		notes := make(chan Notice, noticesQueued)
		imm, base := l.notifyValue(), l.First()
		at := e.notes.inbox.Addr() + uintptr(box*mailboxSize)
		_, _, err := e.ExpectImm(imm, 1, func() bool {
			e.notes.receive(e, at, imm, base, notes)
			return true
		})
		if err != nil {
			e.notes.freeBox(box)
			return Mailbox{}, err
		}
		l.box, l.notes = box+1, notes
	}
	return Mailbox{Dst: e.notes.desc, Offset: uint64((l.box - 1) * mailboxSize), Imm: l.notifyValue()}, nil
}

// noteChannel is the engine's notification state: the inbox of mailboxes
// (free ones in a FIFO, so a retired lease's comes back last), and the
// sending side's queue, of which one is in flight at a time through a
// one-mailbox staging buffer.
type noteChannel struct {
	mu      sync.Mutex
	once    sync.Once
	err     error
	inbox   *HostBuffer
	desc    Descriptor
	free    []int
	seq     uint64 // received, on the dispatcher
	sendMu  sync.Mutex
	stage   *HostBuffer
	stageR  *MemoryRegion
	queue   []*noteJob
	sending bool
}

// noteJob is one notification waiting for its turn to be sent.
type noteJob struct {
	to      Mailbox
	payload []byte
	c       Completion // the request's: finished when the notification is
}

func (n *noteChannel) initInbox(e *Engine) error {
	n.once.Do(func() {
		buf, err := AllocHost(mailboxCount * mailboxSize)
		if err != nil {
			n.err = fmt.Errorf("mailbox: %w", err)
			return
		}
		reg, err := e.RegisterHost(buf, AccessRemoteWrite)
		if err != nil {
			_ = buf.Free()
			n.err = fmt.Errorf("mailbox: register inbox: %w", err)
			return
		}
		d, err := reg.Descriptor()
		if err != nil {
			_ = e.Unregister(reg)
			_ = buf.Free()
			n.err = fmt.Errorf("mailbox: %w", err)
			return
		}
		n.mu.Lock()
		n.inbox, n.desc = buf, d
		for i := range mailboxCount {
			n.free = append(n.free, i)
		}
		n.mu.Unlock()
	})
	return n.err
}

func (n *noteChannel) takeBox() (int, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.free) == 0 {
		return 0, false
	}
	b := n.free[0]
	n.free = n.free[1:]
	return b, true
}

func (n *noteChannel) freeBox(b int) {
	n.mu.Lock()
	n.free = append(n.free, b)
	n.mu.Unlock()
}

// receive reads a mailbox whose notification value just arrived (on the
// dispatcher: the write that carried it has landed) and queues the
// notice. A header that names another value (a retired lease's late
// notification overwrote the mailbox) or a full queue drops it, counted
// in Stats.NotificationsDropped.
func (n *noteChannel) receive(e *Engine, at uintptr, imm, base uint32, out chan Notice) {
	h := bytesAt(at, notifyHeader)
	size := binary.LittleEndian.Uint32(h[8:])
	if binary.LittleEndian.Uint32(h) != notifyMagic || binary.LittleEndian.Uint32(h[4:]) != imm || size > MaxNotifyPayload {
		e.notesDropped.Add(1)
		return
	}
	p := make([]byte, size)
	copy(p, bytesAt(at+notifyHeader, int(size)))
	n.seq++
	select {
	case out <- Notice{Lease: base, Seq: n.seq, Payload: p}:
	default:
		e.notesDropped.Add(1)
	}
}

// SubmitNotification sends n on its own, in order with the engine's other
// notifications: for a request made of several writes, submit it once
// their completions were reported, and the target hands it over after them
// (where a completion means delivery: verbs, ipc, mem, shm, and libfabric
// writes through NIC 0; a tcp;ofi_rxm or efa write through another NIC
// completes when sent, which only a notification carried by the request
// itself accounts for, see Notification). c reports when the notification was
// delivered into the mailbox.
func (e *Engine) SubmitNotification(n Notification, c Completion) error {
	if e == nil {
		return errNilEngine
	}
	w := e.main()
	job, err := e.newNoteJob("notification", &n, w, c)
	if err != nil {
		return err
	}
	if e.life.closed.Load() {
		c.abort()
		return ErrClosed
	}
	e.queueNote(job)
	return nil
}

// newNoteJob checks a notification and begins its completion c.
func (e *Engine) newNoteJob(op string, nt *Notification, w *worker, c Completion) (*noteJob, error) {
	if len(nt.Payload) > MaxNotifyPayload {
		return nil, reqErr(op, ErrNotifyTooLarge, "%d bytes, at most %d", len(nt.Payload), MaxNotifyPayload)
	}
	to := nt.To
	if err := checkDesc(op+" notification", &to.Dst, len(w.doms)); err != nil {
		return nil, err
	}
	if to.Imm < LeaseBase {
		return nil, reqErr(op, ErrInvalidArgument, "notification value %#x is not a lease's", to.Imm)
	}
	if !to.Dst.check(to.Offset, mailboxSize) {
		return nil, reqErr(op, ErrOutOfBounds, "mailbox [%d, +%d) of %d bytes", to.Offset, mailboxSize, to.Dst.Length)
	}
	if err := c.begin(); err != nil {
		return nil, err
	}
	if t := c.t; t != nil {
		t.abandon.Store(&w.abandon)
	}
	return &noteJob{to: to, payload: append([]byte(nil), nt.Payload...), c: c}, nil
}

// submitNotified enqueues q, a write carrying nt, to w: q's completion is
// replaced by one that queues the notification once the writes succeeded;
// the caller's completion c ends with the notification (or the first
// error).
func (e *Engine) submitNotified(op string, nt *Notification, w *worker, q *request) error {
	c := q.c
	job, err := e.newNoteJob(op, nt, w, c)
	if err != nil {
		return err
	}
	// The request's writes complete only once visible at the target
	// (providers that complete a write once sent ask for delivery), so
	// that the notification, sent after them, never overtakes one.
	q.flags |= rdma.WriteVisible
	q.c = Completion{deadline: c.deadline, ctx: c.ctx, fn: func(err error) {
		if err != nil {
			job.finish(err)
			return
		}
		e.queueNote(job)
	}}
	if err := e.enqueue(w, q); err != nil {
		c.abort()
		return err
	}
	return nil
}

// finish ends the caller's completion. It runs on the dispatcher, or in a
// submitter's goroutine when the notification was refused there.
func (j *noteJob) finish(err error) {
	j.c.finishDirect(err)
	if j.c.fn != nil {
		j.c.fn(err)
	}
}

// queueNote queues a notification whose writes completed, and sends it if
// none is in flight.
func (e *Engine) queueNote(j *noteJob) {
	n := &e.notes
	n.sendMu.Lock()
	n.queue = append(n.queue, j)
	if n.sending {
		n.sendMu.Unlock()
		return
	}
	n.sending = true
	n.sendMu.Unlock()
	e.sendNextNote()
}

// sendNextNote sends the queue's head; its completion sends the next. A
// notification refused at submit ends its request with the error and the
// next is tried at once.
func (e *Engine) sendNextNote() {
	n := &e.notes
	for {
		n.sendMu.Lock()
		if len(n.queue) == 0 {
			n.sending = false
			n.sendMu.Unlock()
			return
		}
		j := n.queue[0]
		n.queue[0] = nil
		n.queue = n.queue[1:]
		n.sendMu.Unlock()
		err := e.initStage()
		if err == nil {
			b := n.stage.Bytes()
			binary.LittleEndian.PutUint32(b, notifyMagic)
			binary.LittleEndian.PutUint32(b[4:], j.to.Imm)
			binary.LittleEndian.PutUint32(b[8:], uint32(len(j.payload)))
			binary.LittleEndian.PutUint32(b[12:], 0)
			copy(b[notifyHeader:], j.payload)
			// The mailbox was checked at submit; the write is asked to
			// complete only once delivered, so that the next notification
			// is sent after this one arrived, on any transport.
			q := request{kind: reqSingle, imm: j.to.Imm, hasImm: true, flags: rdma.WriteDelivered,
				route: Pinned(0), src: n.stageR, length: uint64(notifyHeader + len(j.payload)),
				dst: j.to.Dst, dstOff: j.to.Offset,
				c: Completion{deadline: j.c.deadline, ctx: j.c.ctx, fn: func(err error) {
					j.finish(err)
					e.sendNextNote()
				}}}
			if !n.stageR.validFor(e) {
				err = e.srcErr("notification")
			} else if err = e.enqueue(n.stageR.w, &q); err == nil {
				return
			}
			err = fmt.Errorf("send notification: %w", err)
		}
		j.finish(err)
	}
}

// initStage allocates the send side's staging mailbox on first use.
func (e *Engine) initStage() error {
	n := &e.notes
	if n.stageR != nil {
		return nil
	}
	buf, err := AllocHost(mailboxSize)
	if err != nil {
		return err
	}
	reg, err := e.RegisterHost(buf, AccessLocal)
	if err != nil {
		_ = buf.Free()
		return fmt.Errorf("register notification staging: %w", err)
	}
	n.stage, n.stageR = buf, reg
	return nil
}

// freeBuffers frees the inbox and staging buffers after the main worker
// closed its domains (Close).
func (n *noteChannel) freeBuffers() {
	if n.inbox != nil {
		_ = n.inbox.Free()
	}
	if n.stage != nil {
		_ = n.stage.Free()
	}
}
