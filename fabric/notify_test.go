package fabric

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// mailboxFixture is one mailbox in host memory, written as a sending
// engine would (slot = number mod MailboxDepth), read by a boxReader.
type mailboxFixture struct {
	e   *Engine
	buf *HostBuffer
	r   *boxReader
	l   *Lease
}

func newMailboxFixture(t *testing.T) *mailboxFixture {
	buf, err := AllocHost(mailboxSize)
	require.NoError(t, err)
	t.Cleanup(func() { _ = buf.Free() })
	const imm = LeaseBase | 5
	q := &noticeQueue{wake: make(chan struct{}, 1), ctl: (*atomic.Uint32)(unsafe.Pointer(&buf.Bytes()[0]))}
	e := &Engine{}
	l := &Lease{e: e, slot: 4, n: 1, done: make(chan struct{}), q: q}
	return &mailboxFixture{e: e, buf: buf, l: l,
		r: &boxReader{at: buf.Addr() + mailboxCtl, imm: imm, lease: l.First(), q: q}}
}

// send writes notification number seq with payload p into its slot, and
// lets it arrive when arrive is set.
func (f *mailboxFixture) send(seq uint32, p string, arrive bool) {
	s := f.buf.Bytes()[mailboxCtl+int(seq%MailboxDepth)*slotSize:]
	binary.LittleEndian.PutUint32(s, notifyMagic)
	binary.LittleEndian.PutUint32(s[4:], f.r.imm)
	binary.LittleEndian.PutUint32(s[8:], uint32(len(p)))
	binary.LittleEndian.PutUint32(s[12:], seq)
	copy(s[notifyHeader:], p)
	if arrive {
		f.r.arrived(f.e)
	}
}

// next takes the queue's head: a payload, or the losses before it.
func (f *mailboxFixture) next(t *testing.T) (string, uint64) {
	t.Helper()
	n, lost, ok := f.l.q.take()
	require.True(t, ok, "nothing queued")
	return string(n.Payload), lost
}

func (f *mailboxFixture) free() uint32 {
	return binary.LittleEndian.Uint32(f.buf.Bytes())
}

// TestNotifyMailboxReadsInOrder: notifications that landed before the
// engine read any (its dispatcher behind) are read in number order, one
// per arrival, and taking them frees their slots (the control word a
// waiting sender reads).
func TestNotifyMailboxReadsInOrder(t *testing.T) {
	f := newMailboxFixture(t)
	for i := range MailboxDepth {
		f.send(uint32(i), string(rune('a'+i)), false)
	}
	for range MailboxDepth {
		f.r.arrived(f.e)
	}
	for i := range MailboxDepth {
		p, lost := f.next(t)
		require.Zero(t, lost)
		require.Equal(t, string(rune('a'+i)), p)
		require.EqualValues(t, i+1, f.free())
	}
	_, _, ok := f.l.q.take()
	require.False(t, ok)
	require.Zero(t, f.e.notesDropped.Load())
}

// TestNotifyMailboxOverwriteReported: a sender a whole ring ahead of the
// reader (what back-pressure prevents, and a second sender causes)
// overwrites slots: the lost numbers are reported once, in their place,
// counted, and the rest follow in order; no arrival is counted twice.
func TestNotifyMailboxOverwriteReported(t *testing.T) {
	f := newMailboxFixture(t)
	const sent = MailboxDepth + 3
	for i := range sent {
		f.send(uint32(i), string(rune('a'+i)), false)
	}
	for range sent {
		f.r.arrived(f.e)
	}
	_, lost := f.next(t)
	require.EqualValues(t, 3, lost)
	for i := 3; i < sent; i++ {
		p, lost := f.next(t)
		require.Zero(t, lost)
		require.Equal(t, string(rune('a'+i)), p)
	}
	require.EqualValues(t, 3, f.e.notesDropped.Load())

	// A second sender numbers from 0: below what was read, so nothing is
	// found for its arrival, which is reported lost.
	f.send(0, "other", true)
	_, lost = f.next(t)
	require.EqualValues(t, 1, lost)
	require.EqualValues(t, 4, f.e.notesDropped.Load())
	// The first sender goes on.
	f.send(sent, "next", true)
	p, lost := f.next(t)
	require.Zero(t, lost)
	require.Equal(t, "next", p)
}

// TestNotifyQueueBound: a lease's queue holds queuedMax notices; past it
// (reachable only with several senders) arrivals are lost and reported
// after the queued ones, and a waiter gets them as a
// *NotificationsLostError.
func TestNotifyQueueBound(t *testing.T) {
	q := &noticeQueue{wake: make(chan struct{}, 1)}
	for i := range queuedMax {
		require.True(t, q.push(Notice{Payload: []byte{byte(i)}}, uint32(i), 0))
	}
	require.False(t, q.push(Notice{}, queuedMax, 0))
	require.False(t, q.push(Notice{}, queuedMax+1, 1))
	for i := range queuedMax {
		n, lost, ok := q.take()
		require.True(t, ok)
		require.Zero(t, lost)
		require.Equal(t, []byte{byte(i)}, n.Payload)
	}
	_, lost, ok := q.take()
	require.True(t, ok)
	require.EqualValues(t, 3, lost)

	e := &Engine{}
	e.life.closing = make(chan struct{})
	l := &Lease{e: e, n: 1, done: make(chan struct{}), q: q}
	q.lose(2)
	_, err := l.WaitNotification(t.Context())
	var le *NotificationsLostError
	require.True(t, errors.As(err, &le), "%v", err)
	require.ErrorIs(t, err, ErrNotificationsLost)
	require.EqualValues(t, 2, le.Lost)
	// A retired lease's queue no longer frees mailbox slots.
	q.detach()
	require.True(t, q.push(Notice{}, 7, 0))
	_, _, ok = q.take()
	require.True(t, ok)
}
