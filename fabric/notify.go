package fabric

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Notifications. A request (SingleWrite, PagedWrite or ScatterWrite) may
// carry notifications: payloads of up to MaxNotifyPayload bytes for a
// lease's mailbox at the target, handed over there (Lease.WaitNotification)
// only after every write of the request is visible.
//
// How: the engine sends a notification only once all the request's writes
// completed at the initiator, as one write with an immediate (header and
// payload into one slot of the mailbox, the lease's notification value as
// the immediate), and the target reads the mailbox when that immediate
// arrives, after the write's bytes. The request's writes are flagged
// rdma.WriteVisible, so each completes only once its bytes are visible at
// the target, through whichever NIC it went: verbs (RC completes on the
// responder's acknowledgement), ipc and mem (the bytes are copied when it
// completes) and shm (its copy into the target is the write) complete so
// anyway; tcp;ofi_rxm, which completes a write once sent, asks delivery
// completion for these writes only (writes without a notification keep
// the cheaper completion), and so does efa (free for the writes its
// device carries out, which complete on the responder's acknowledgement;
// its writes emulated over sends then use delivery-complete packets).
//
// SubmitNotification sends a notification on its own, after writes the
// caller saw complete: those were not flagged, so on tcp;ofi_rxm and efa
// a write through a NIC other than NIC 0 (which carries notifications, in
// order behind that NIC's writes) may still be in flight; put the
// notification on the request (Notify) instead where that matters.
//
// Order: an engine sends its notifications one at a time, each after the
// previous one was delivered, in the order their requests completed (the
// order of their completions at the initiator), so they arrive in that
// order at any one target. This makes them a control path, not a data
// path: a notification costs one round trip after its request.
//
// Queueing: a mailbox is a ring of MailboxDepth slots and a control word.
// The sending engine numbers its notifications to each mailbox and writes
// number k into slot k mod MailboxDepth; the target reads them in number
// order and queues them on the lease until WaitNotification takes them,
// which frees their slots: the control word holds the number below which
// every slot is free. Back-pressure: a sender that would be MailboxDepth
// notifications ahead of what the target took reads the control word (an
// RDMA READ, posted only then) and waits, retrying with a growing pause,
// until a slot is free or the notification's deadline (its request's
// Completion deadline, else Config.RequestTimeout) passes, which ends the
// request with ErrTimeout. Since an engine sends its notifications one at
// a time, in order, the ones queued behind wait too. So with one sender
// per mailbox nothing is lost. Numbers are per sending engine: a second
// engine sending to the same mailbox (or one restarted for the same lease)
// collides with the first, and what it overwrote or sent under numbers
// already read is lost. A loss is never silent: it is counted in
// Stats.NotificationsDropped and WaitNotification reports it in its place
// with an error wrapping ErrNotificationsLost (a *NotificationsLostError
// with the count); the notifications after it follow.

const (
	// MaxNotifyPayload is the largest notification payload.
	MaxNotifyPayload = 4096
	// MailboxDepth is how many notifications one mailbox holds that the
	// target has not taken yet (Lease.WaitNotification): the slots of its
	// ring. A sender that many ahead waits (see Queueing above).
	MailboxDepth = 8

	notifyHeader = 16
	slotSize     = notifyHeader + MaxNotifyPayload + 48 // a 64-byte multiple
	mailboxCtl   = 64                                   // the control word, alone in its cache line
	mailboxSize  = mailboxCtl + MailboxDepth*slotSize
	queuedMax    = 4 * MailboxDepth // notices queued on a lease (reached only with several senders)
	mailboxCount = 256              // per engine, allocated at the first Mailbox
	notifyMagic  = 0x4e544646       // "FFTN"
)

// mailboxVersion is the first byte of a Mailbox's binary form.
const mailboxVersion = 2

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
// descriptor's binary form. Version 2 is a ring of MailboxDepth slots;
// version 1 (one slot) is refused, its layout differs.
func (m Mailbox) MarshalBinary() ([]byte, error) {
	b := make([]byte, 13, 13+64)
	b[0] = mailboxVersion
	binary.LittleEndian.PutUint32(b[1:], m.Imm)
	binary.LittleEndian.PutUint64(b[5:], m.Offset)
	return m.Dst.AppendBinary(b)
}

// UnmarshalBinary decodes what MarshalBinary wrote; anything else fails
// with ErrBadEncoding.
func (m *Mailbox) UnmarshalBinary(b []byte) error {
	if len(b) < 13 || b[0] != mailboxVersion {
		if len(b) > 0 && b[0] == 1 {
			return fmt.Errorf("decode mailbox: version 1 (a one-slot mailbox of an older engine): %w", ErrBadEncoding)
		}
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
// of the request that carries it (SingleWrite.Notify, PagedWrite.Notify,
// ScatterWrite.Notify) completed at the initiator, as one write with the
// lease's notification value as immediate into the mailbox; the target
// hands it over when that immediate arrives, which is after its bytes. The
// request's writes are all visible at the target by then, over every
// transport and NIC: they complete only once delivered (see the notes at
// the top of notify.go; this costs tcp;ofi_rxm and efa a delivery
// acknowledgement per write of a request that carries a notification). An
// engine sends its notifications one at a time, each after the previous
// was delivered, so they reach a target in the order their requests
// completed. A mailbox queues up to MailboxDepth not yet taken; a sender
// MailboxDepth ahead of what the target took waits (back-pressure, up to
// the request's deadline). The payload is copied at submit. The request's
// completion reports the end of the writes and of the notifications
// together.
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

// NotificationsLostError is what WaitNotification returns in place of
// notifications that were lost (see Queueing at the top of notify.go). It
// wraps ErrNotificationsLost.
type NotificationsLostError struct {
	Lease uint32 // the lease's first value
	Lost  uint64 // how many were lost at this point of the sequence
}

func (e *NotificationsLostError) Error() string {
	return fmt.Sprintf("wait notification: lease %#x: %d lost before the next: %v", e.Lease, e.Lost, ErrNotificationsLost)
}

func (e *NotificationsLostError) Unwrap() error { return ErrNotificationsLost }

// Mailbox gives the lease a mailbox in the engine's inbox (once; later
// calls return the same) for the initiator to send notifications to. The
// inbox is allocated and registered at the first call: 256 mailboxes of
// MailboxDepth slots of 4 KiB (8.1 MiB, remotely writable and readable),
// ErrLeasesExhausted when all are taken. A retired lease's mailbox is
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
		imm, base := l.notifyValue(), l.First()
		at := e.notes.inbox.Addr() + uintptr(box*mailboxSize)
		// A new lease starts from number 0: every slot free. (Slots still
		// holding an earlier lease's notifications name its value.)
		ctl := (*atomic.Uint32)(unsafe.Pointer(&bytesAt(at, 4)[0]))
		ctl.Store(0)
		q := &noticeQueue{wake: make(chan struct{}, 1), ctl: ctl}
		rx := &boxReader{at: at + mailboxCtl, imm: imm, lease: base, q: q}
		_, _, err := e.ExpectImm(imm, 1, func() bool {
			rx.arrived(e)
			return true
		})
		if err != nil {
			e.notes.freeBox(box)
			return Mailbox{}, err
		}
		l.box, l.q = box+1, q
	}
	return Mailbox{Dst: e.notes.desc, Offset: uint64((l.box - 1) * mailboxSize), Imm: l.notifyValue()}, nil
}

// noticeQueue holds a lease's notifications read from its mailbox and not
// yet taken, with the losses in their places: lost[i] notifications were
// lost before items[i], tail after the last item. Taking one frees the
// mailbox's slots up to its number (ctl, the mailbox's control word).
type noticeQueue struct {
	mu    sync.Mutex
	items []Notice
	seqs  []uint32
	lost  []uint64
	tail  uint64
	wake  chan struct{} // a token after each push, for a waiter
	ctl   *atomic.Uint32
}

// push queues n, number seq, after lost losses; a full queue (several
// senders) loses n too, reported after the queued items.
func (q *noticeQueue) push(n Notice, seq uint32, lost uint64) (ok bool) {
	q.mu.Lock()
	if len(q.items) >= queuedMax {
		q.tail += lost + 1
		ok = false
	} else {
		q.items = append(q.items, n)
		q.seqs = append(q.seqs, seq)
		q.lost = append(q.lost, q.tail+lost)
		q.tail = 0
		ok = true
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return ok
}

// detach stops take from freeing the mailbox's slots: the lease retired
// and the mailbox may go to another.
func (q *noticeQueue) detach() {
	q.mu.Lock()
	q.ctl = nil
	q.mu.Unlock()
}

// lose records n losses after the queued items.
func (q *noticeQueue) lose(n uint64) {
	q.mu.Lock()
	q.tail += n
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns the head: a notice, or the losses before it (then lost > 0
// and the notice stays queued).
func (q *noticeQueue) take() (n Notice, lost uint64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) > 0 {
		if q.lost[0] > 0 {
			lost, q.lost[0] = q.lost[0], 0
			return Notice{}, lost, true
		}
		n = q.items[0]
		q.items[0] = Notice{}
		// Its slot and every one before it are free now.
		if free := q.seqs[0] + 1; q.ctl != nil && int32(free-q.ctl.Load()) > 0 {
			q.ctl.Store(free)
		}
		q.items, q.seqs, q.lost = q.items[1:], q.seqs[1:], q.lost[1:]
		if len(q.items) == 0 {
			q.items, q.seqs, q.lost = nil, nil, nil
		}
		return n, 0, true
	}
	if q.tail > 0 {
		lost, q.tail = q.tail, 0
		return Notice{}, lost, true
	}
	return Notice{}, 0, false
}

// boxReader reads one lease's mailbox on the dispatcher, once per arrival
// of the lease's notification value: the slot holding the lowest number
// not read yet is the next notification (numbers skipped were lost: their
// slot was overwritten before it was read, or their write failed).
type boxReader struct {
	at       uintptr // the mailbox's first slot
	imm      uint32
	lease    uint32
	q        *noticeQueue
	next     uint32 // the number expected next
	arrivals uint64 // immediates that arrived
	settled  uint64 // notifications read or counted lost
}

func (r *boxReader) arrived(e *Engine) {
	r.arrivals++
	best, bestSeq := -1, uint32(0)
	for s := range MailboxDepth {
		h := bytesAt(r.at+uintptr(s*slotSize), notifyHeader)
		if binary.LittleEndian.Uint32(h) != notifyMagic || binary.LittleEndian.Uint32(h[4:]) != r.imm ||
			binary.LittleEndian.Uint32(h[8:]) > MaxNotifyPayload {
			continue // empty, or a retired lease's
		}
		seq := binary.LittleEndian.Uint32(h[12:])
		if int32(seq-r.next) >= 0 && (best < 0 || int32(seq-bestSeq) < 0) {
			best, bestSeq = s, seq
		}
	}
	if best < 0 {
		// Read already (its slot was found for an earlier arrival), or
		// overwritten by another sender's: lost unless accounted for.
		if r.settled < r.arrivals {
			n := r.arrivals - r.settled
			r.settled = r.arrivals
			e.notesDropped.Add(n)
			r.q.lose(n)
		}
		return
	}
	at := r.at + uintptr(best*slotSize)
	size := binary.LittleEndian.Uint32(bytesAt(at+8, 4))
	p := make([]byte, size)
	copy(p, bytesAt(at+notifyHeader, int(size)))
	gap := uint64(bestSeq - r.next)
	r.next = bestSeq + 1
	r.settled += gap + 1
	if binary.LittleEndian.Uint32(bytesAt(at+12, 4)) != bestSeq {
		// Overwritten while copied: the sender is a whole ring ahead.
		e.notesDropped.Add(gap + 1)
		r.q.lose(gap + 1)
		return
	}
	e.notesDropped.Add(gap)
	e.notes.seq++
	if !r.q.push(Notice{Lease: r.lease, Seq: e.notes.seq, Payload: p}, bestSeq, gap) {
		e.notesDropped.Add(1)
	}
}

// noteChannel is the engine's notification state: the inbox of mailboxes
// (free ones in a FIFO, so a retired lease's comes back last), and the
// sending side's queue, of which one is in flight at a time through a
// one-slot staging buffer, with the number each mailbox it sent to
// expects next.
type noteChannel struct {
	mu     sync.Mutex
	once   sync.Once
	err    error
	inbox  *HostBuffer
	desc   Descriptor
	free   []int
	seq    uint64 // received, on the dispatcher
	sendMu sync.Mutex
	stage  *HostBuffer
	stageR *MemoryRegion
	// stageMu orders the staging buffer's use against freeBuffers: a
	// retry after a pause runs on a timer, which Close does not wait for.
	stageMu sync.Mutex
	freed   bool
	queue   []*noteJob
	sending bool
	numbers map[boxKey]*boxNumber // on the sending side, under sendMu
}

// boxKey names a mailbox: its engine's NIC 0 address, its inbox and its
// offset there.
type boxKey struct {
	addr   Address
	base   uint64
	offset uint64
}

// boxNumber is the number of the next notification to a mailbox, for the
// lease whose value imm is (a new lease in the same mailbox starts again
// from 0), and the mailbox's control word as last read: every slot below
// number free is free.
type boxNumber struct {
	imm  uint32
	next uint32
	free uint32
}

// full reports whether the next number's slot may still hold a
// notification the target has not taken.
func (b *boxNumber) full() bool { return b.next-b.free >= MailboxDepth }

// noteJob is one notification waiting for its turn to be sent.
type noteJob struct {
	to      Mailbox
	payload []byte
	g       *noteGroup
	// While its mailbox is full: when it began waiting (nanotime) and the
	// pause before the next look at the control word.
	waitFrom int64
	pause    time.Duration
}

// noteGroup ends the caller's completion once every notification of its
// request was sent (or failed), with the first error.
type noteGroup struct {
	c    Completion
	left atomic.Int32
	err  atomic.Pointer[error]
}

func (n *noteChannel) initInbox(e *Engine) error {
	n.once.Do(func() {
		buf, err := AllocHost(mailboxCount * mailboxSize)
		if err != nil {
			n.err = fmt.Errorf("mailbox: %w", err)
			return
		}
		// Readable, so that senders can look at a mailbox's control word
		// (every provider reads; a group that cannot leaves its senders
		// without back-pressure, see sendNextNote).
		access := AccessRemoteWrite
		if checkReads("mailbox", e.main()) == nil {
			access |= AccessRemoteRead
		}
		reg, err := e.RegisterHost(buf, access)
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

// SubmitNotification sends n on its own, in order with the engine's other
// notifications: for a request made of several writes, submit it once
// their completions were reported, and the target hands it over after them
// (where a completion means delivery: verbs, ipc, mem, shm, and libfabric
// writes through NIC 0; a tcp;ofi_rxm or efa write through another NIC
// completes when sent, which only a notification carried by the request
// itself accounts for, see Notification). c reports when the notification
// was delivered into the mailbox.
func (e *Engine) SubmitNotification(n Notification, c Completion) error {
	if e == nil {
		return errNilEngine
	}
	w := e.main()
	jobs, err := e.newNoteJobs("notification", []Notification{n}, w, c)
	if err != nil {
		return err
	}
	if e.life.closed.Load() {
		c.abort()
		return ErrClosed
	}
	e.queueNotes(jobs)
	return nil
}

// newNoteJobs checks notifications and begins their request's completion
// c, which ends once all were sent.
func (e *Engine) newNoteJobs(op string, nts []Notification, w *worker, c Completion) ([]*noteJob, error) {
	for i := range nts {
		nt := &nts[i]
		if len(nt.Payload) > MaxNotifyPayload {
			return nil, reqErr(op, ErrNotifyTooLarge, "notification %d: %d bytes, at most %d", i, len(nt.Payload), MaxNotifyPayload)
		}
		to := nt.To
		if err := checkDesc(op+" notification", &to.Dst, len(w.doms)); err != nil {
			return nil, err
		}
		if to.Imm < LeaseBase {
			return nil, reqErr(op, ErrInvalidArgument, "notification %d: value %#x is not a lease's", i, to.Imm)
		}
		if !to.Dst.check(to.Offset, mailboxSize) {
			return nil, reqErr(op, ErrOutOfBounds, "notification %d: mailbox [%d, +%d) of %d bytes", i, to.Offset, mailboxSize, to.Dst.Length)
		}
	}
	if err := c.begin(); err != nil {
		return nil, err
	}
	if t := c.t; t != nil {
		t.abandon.Store(&w.abandon)
	}
	g := &noteGroup{c: c}
	g.left.Store(int32(len(nts)))
	jobs := make([]*noteJob, len(nts))
	for i := range nts {
		jobs[i] = &noteJob{to: nts[i].To, payload: append([]byte(nil), nts[i].Payload...), g: g}
	}
	return jobs, nil
}

// submitNotified enqueues q, a write carrying the notifications nts, to w:
// q's completion is replaced by one that queues the notifications once the
// writes succeeded; the caller's completion c ends with the last
// notification (or the first error).
func (e *Engine) submitNotified(op string, nts []Notification, w *worker, q *request) error {
	c := q.c
	jobs, err := e.newNoteJobs(op, nts, w, c)
	if err != nil {
		return err
	}
	// The request's writes complete only once visible at the target
	// (providers that complete a write once sent ask for delivery), so
	// that the notifications, sent after them, never overtake one.
	q.flags |= rdma.WriteVisible
	q.c = Completion{deadline: c.deadline, ctx: c.ctx, fn: func(err error) {
		if err != nil {
			for _, j := range jobs {
				j.finish(err)
			}
			return
		}
		e.queueNotes(jobs)
	}}
	if err := e.enqueue(w, q); err != nil {
		c.abort()
		return err
	}
	return nil
}

// finish ends one notification; the group's last ends the caller's
// completion. It runs on the dispatcher, or in a submitter's goroutine
// when the notification was refused there.
func (j *noteJob) finish(err error) {
	g := j.g
	if err != nil {
		g.err.CompareAndSwap(nil, &err)
	}
	if g.left.Add(-1) != 0 {
		return
	}
	if p := g.err.Load(); p != nil {
		err = *p
	}
	g.c.finishDirect(err)
	if g.c.fn != nil {
		g.c.fn(err)
	}
}

// queueNotes queues notifications whose writes completed, and sends the
// first if none is in flight.
func (e *Engine) queueNotes(jobs []*noteJob) {
	n := &e.notes
	n.sendMu.Lock()
	n.queue = append(n.queue, jobs...)
	if n.sending {
		n.sendMu.Unlock()
		return
	}
	n.sending = true
	n.sendMu.Unlock()
	e.sendNextNote()
}

// box returns the sending state of j's mailbox. Called with sendMu held.
func (n *noteChannel) box(to *Mailbox) *boxNumber {
	k := boxKey{addr: to.Dst.NICs[0].Addr, base: to.Dst.Base, offset: to.Offset}
	if n.numbers == nil {
		n.numbers = make(map[boxKey]*boxNumber)
	}
	b := n.numbers[k]
	if b == nil {
		b = &boxNumber{}
		n.numbers[k] = b
	}
	if b.imm != to.Imm {
		*b = boxNumber{imm: to.Imm}
	}
	return b
}

// sendNextNote sends the queue's head; its completion sends the next. A
// notification refused at submit ends with the error and the next is
// tried at once. A head whose mailbox is full as far as this engine knows
// stays at the head while the mailbox's control word is read (and read
// again after a pause while it stays full), up to its deadline.
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
		b := n.box(&j.to)
		if b.full() && checkReads("notification", e.main()) == nil {
			n.sendMu.Unlock()
			err := e.noteWaitErr(j)
			if err == nil {
				if err = e.readFree(j, b); err == nil {
					return
				}
			}
			n.sendMu.Lock()
			n.queue[0] = nil
			n.queue = n.queue[1:]
			n.sendMu.Unlock()
			j.finish(err)
			continue
		}
		n.queue[0] = nil
		n.queue = n.queue[1:]
		seq := b.next
		b.next++
		n.sendMu.Unlock()
		err := e.initStage()
		if err == nil {
			n.stageMu.Lock()
			if n.freed {
				err = ErrClosed
			} else {
				s := n.stage.Bytes()
				binary.LittleEndian.PutUint32(s, notifyMagic)
				binary.LittleEndian.PutUint32(s[4:], j.to.Imm)
				binary.LittleEndian.PutUint32(s[8:], uint32(len(j.payload)))
				binary.LittleEndian.PutUint32(s[12:], seq)
				copy(s[notifyHeader:], j.payload)
			}
			n.stageMu.Unlock()
		}
		if err == nil {
			// The mailbox was checked at submit; the write is asked to
			// complete only once delivered, so that the next notification
			// is sent after this one arrived, on any transport.
			q := request{kind: reqSingle, imm: j.to.Imm, hasImm: true, flags: rdma.WriteDelivered,
				route: Pinned(0), src: n.stageR, length: uint64(notifyHeader + len(j.payload)),
				dst: j.to.Dst, dstOff: j.to.Offset + mailboxCtl + uint64(seq%MailboxDepth)*slotSize,
				c: Completion{deadline: j.g.c.deadline, ctx: j.g.c.ctx, fn: func(err error) {
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

// noteWaitErr says why j, whose mailbox is full, must stop waiting: its
// deadline passed or its context ended; nil while it may wait.
func (e *Engine) noteWaitErr(j *noteJob) error {
	now := nanotime()
	if j.waitFrom == 0 {
		j.waitFrom = now
	}
	c := &j.g.c
	if c.ctx != nil && c.ctx.Err() != nil {
		return fmt.Errorf("send notification: mailbox full: %w", ctxErr(c.ctx))
	}
	deadline := c.deadline
	if deadline == 0 {
		deadline = j.waitFrom + int64(e.cfg.RequestTimeout)
	}
	if deadline != noDeadline && now >= deadline {
		return fmt.Errorf("send notification: mailbox full (%d not taken by the target) until the deadline: %w",
			MailboxDepth, ErrTimeout)
	}
	return nil
}

// readFree reads the control word of j's mailbox into the staging buffer;
// its completion records it and sends the head again, at once when a slot
// is free, else after a pause (growing from 50 µs to 5 ms).
func (e *Engine) readFree(j *noteJob, b *boxNumber) error {
	n := &e.notes
	if err := e.initStage(); err != nil {
		return err
	}
	if !n.stageR.validFor(e) {
		return e.srcErr("notification")
	}
	q := request{kind: reqSingle, flags: rdma.WriteRead, route: Pinned(0), src: n.stageR, srcOff: slotSize,
		dst: j.to.Dst, dstOff: j.to.Offset, length: 4,
		c: Completion{deadline: j.g.c.deadline, ctx: j.g.c.ctx, fn: func(err error) {
			if err != nil {
				n.sendMu.Lock()
				n.queue[0] = nil
				n.queue = n.queue[1:]
				n.sendMu.Unlock()
				j.finish(fmt.Errorf("send notification: read the mailbox's free slots: %w", err))
				e.sendNextNote()
				return
			}
			n.stageMu.Lock()
			free := b.free
			if !n.freed {
				free = binary.LittleEndian.Uint32(n.stage.Bytes()[slotSize:])
			}
			n.stageMu.Unlock()
			n.sendMu.Lock()
			if int32(free-b.free) > 0 && int32(b.next-free) >= 0 {
				b.free = free
			}
			full := b.full()
			n.sendMu.Unlock()
			if !full {
				j.pause = 0
				e.sendNextNote()
				return
			}
			j.pause = min(max(2*j.pause, 50*time.Microsecond), 5*time.Millisecond)
			time.AfterFunc(j.pause, e.sendNextNote)
		}}}
	if err := e.enqueue(n.stageR.w, &q); err != nil {
		return fmt.Errorf("send notification: read the mailbox's free slots: %w", err)
	}
	return nil
}

// initStage allocates the send side's staging slot on first use.
func (e *Engine) initStage() error {
	n := &e.notes
	if n.stageR != nil {
		return nil
	}
	// A slot to send from, and room for a mailbox's control word.
	buf, err := AllocHost(slotSize + 64)
	if err != nil {
		return err
	}
	reg, err := e.RegisterHost(buf, AccessLocal)
	if err != nil {
		_ = buf.Free()
		return fmt.Errorf("register notification staging: %w", err)
	}
	n.stageMu.Lock()
	defer n.stageMu.Unlock()
	if n.freed {
		_ = buf.Free()
		return ErrClosed
	}
	n.stage, n.stageR = buf, reg
	return nil
}

// freeBuffers frees the inbox and staging buffers after the main worker
// closed its domains (Close).
func (n *noteChannel) freeBuffers() {
	n.stageMu.Lock()
	defer n.stageMu.Unlock()
	n.freed = true
	if n.inbox != nil {
		_ = n.inbox.Free()
	}
	if n.stage != nil {
		_ = n.stage.Free()
	}
}
