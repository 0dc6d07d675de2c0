package fabric

import (
	"context"
	"fmt"
	"sync"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// The two-sided side channel: small control messages over NIC 0 of the
// main worker. Sends copy into a pool of registered host buffers; receives
// are persistent (a caller's buffer, re-posted after each callback) or
// bouncing (engine buffers, payload copied out, re-posted at once).

type recvSlot struct {
	live   bool
	addr   uint64
	length uint64
	desc   uint64
	onRecv func(n int)
	onData func([]byte)
	onErr  func(error)
	buf    *HostBuffer
}

// Send copies data into a registered send buffer and sends it to the peer
// whose main address is to. It waits for a free buffer (up to ctx); the
// send itself completes through c.
func (e *Engine) Send(ctx context.Context, to Address, data []byte, c Completion) error {
	if e == nil {
		return errNilEngine
	}
	if to.IsZero() {
		return reqErr("send", ErrInvalidArgument, "empty address")
	}
	if len(data) > e.cfg.SendBufferSize {
		return reqErr("send", ErrTooLarge, "%d bytes, buffers hold %d", len(data), e.cfg.SendBufferSize)
	}
	if err := e.initSendPool(); err != nil {
		return err
	}
	var slot int32
	select {
	case slot = <-e.send.pool:
	default:
		select {
		case slot = <-e.send.pool:
		case <-ctx.Done():
			return ctxErr(ctx)
		case <-e.life.closing:
			return ErrClosed
		}
	}
	dst := bytesAt(e.send.buf.Addr()+uintptr(int(slot)*e.cfg.SendBufferSize), len(data))
	copy(dst, data)
	r := request{kind: reqSend, c: c, to: to, slot: slot, bytes: uint64(len(data))}
	if err := e.enqueue(e.main(), &r); err != nil {
		e.releaseSendSlot(slot)
		return err
	}
	return nil
}

func (e *Engine) initSendPool() error {
	e.send.once.Do(func() {
		buf, err := AllocHost(e.cfg.SendBuffers * e.cfg.SendBufferSize)
		if err != nil {
			e.send.err = err
			return
		}
		reg, err := e.Register(buf.Span(), AccessLocal)
		if err != nil {
			_ = buf.Free()
			e.send.err = fmt.Errorf("register send buffers: %w", err)
			return
		}
		e.send.buf, e.send.reg = buf, reg
		e.send.pool = make(chan int32, e.cfg.SendBuffers)
		for i := 0; i < e.cfg.SendBuffers; i++ {
			e.send.pool <- int32(i)
		}
	})
	return e.send.err
}

func (e *Engine) releaseSendSlot(s int32) { e.send.pool <- s }

func (w *worker) acceptSend(r *request) {
	xi := w.newXfer(reqSend, r.c)
	w.pool.xfers[xi].sendSlot = r.slot
	w.pool.xfers[xi].bytes = r.bytes
	ds := w.doms[0]
	p, err := ds.resolve(r.to)
	if err != nil {
		w.finishXfer(xi, fmt.Errorf("send: resolve %s: %w", r.to, err))
		return
	}
	if err := w.usable(p); err != nil {
		w.finishXfer(xi, err)
		return
	}
	w.pool.xfers[xi].peer, w.pool.xfers[xi].peerLosses = p, p.losses
	e := w.e
	ds.sendQ = append(ds.sendQ, rdma.SendOp{
		Local:     uint64(e.send.buf.Addr()) + uint64(r.slot)*uint64(e.cfg.SendBufferSize),
		Length:    r.bytes,
		LocalDesc: e.send.reg.keys[0].Local,
		Peer:      p.id,
		Context:   ctxTagSend | uint64(xi),
	})
}

func (w *worker) postSends(ds *domState) bool {
	call := w.beginCall()
	n, err := ds.d.PostSends(ds.sendQ)
	w.endCall(call)
	ds.posted += n
	ds.stats.Posted.Add(uint64(n))
	ds.stats.InFlight.Add(int64(n))
	for _, s := range ds.sendQ[:n] {
		ds.stats.Bytes.Add(s.Length)
	}
	rest := ds.sendQ[n:]
	refused := -1
	var refusedBy *peerState
	if err != nil && len(rest) > 0 {
		ds.stats.Errors.Add(1)
		refused = int(rest[0].Context & ctxIndexMask)
		refusedBy = ds.byID[rest[0].Peer]
		rest = rest[1:]
		n++
	}
	ds.sendQ = ds.sendQ[:copy(ds.sendQ, rest)]
	if refused >= 0 {
		// The peer is declared lost before the send's failure is
		// reported.
		w.noteOpError(ds, refusedBy, err)
		w.finishXfer(uint32(refused), fmt.Errorf("post send: %w", err))
	}
	return n > 0
}

func (w *worker) sendDone(ds *domState, ev *rdma.Event) {
	xi := uint32(ev.Context & ctxIndexMask)
	if ev.Context&ctxTagMask != ctxTagSend || int(xi) >= len(w.pool.xfers) || w.pool.xfers[xi].kind != reqSend {
		w.unmatched(ds, ev)
		return
	}
	ds.posted--
	ds.stats.InFlight.Add(-1)
	var err error
	ps := w.pool.xfers[xi].peer
	if ev.Errno != 0 {
		ds.stats.Errors.Add(1)
		err = ds.d.DescribeError(*ev)
	} else {
		if ps != nil {
			ps.answered = w.now
		}
		if answeredSince(ps, w.pool.xfers[xi].peerLosses) {
			w.peerBack(ds, ps)
		}
	}
	w.noteOpError(ds, ps, err) // declared before the failure is reported
	w.finishXfer(xi, err)
}

// PostRecv posts a persistent receive into [off, off+n) of r on the main
// worker's NIC 0. onRecv runs on the dispatcher with the received length;
// the buffer is re-posted when it returns. After an error (onErr) the
// receive is not re-posted. At Close, onErr gets ErrClosed.
func (e *Engine) PostRecv(r *MemoryRegion, off, n uint64, onRecv func(n int), onErr func(error)) error {
	if e == nil {
		return errNilEngine
	}
	if !r.validFor(e) {
		if e.life.closed.Load() {
			return ErrClosed
		}
		return reqErr("recv", ErrUnknownRegion, "region not registered with this engine")
	}
	if r.w != e.main() {
		return reqErr("recv", ErrInvalidArgument, "receives use the main worker's memory (device %s)", e.main().dev)
	}
	if off > r.span.Len || n == 0 || n > r.span.Len-off {
		return reqErr("recv", ErrOutOfBounds, "[%d, +%d) of a %d-byte region", off, n, r.span.Len)
	}
	if onRecv == nil {
		return reqErr("recv", ErrInvalidArgument, "nil callback")
	}
	s := recvSlot{live: true, addr: uint64(r.span.Addr) + off, length: n, desc: r.keys[0].Local, onRecv: onRecv, onErr: onErr}
	return e.addRecvSlots([]recvSlot{s})
}

// BouncingRecvs posts count receives of size bytes into engine-owned
// buffers. Each message is copied out and handed to onData on the
// dispatcher; the buffer is re-posted at once. The buffers are unregistered
// and freed at Close.
func (e *Engine) BouncingRecvs(count, size int, onData func([]byte), onErr func(error)) error {
	if e == nil {
		return errNilEngine
	}
	if count <= 0 || size <= 0 || onData == nil {
		return reqErr("bouncing recvs", ErrInvalidArgument, "count %d, size %d", count, size)
	}
	buf, err := AllocHost(count * size)
	if err != nil {
		return err
	}
	reg, err := e.Register(buf.Span(), AccessLocal)
	if err != nil {
		_ = buf.Free()
		return err
	}
	slots := make([]recvSlot, count)
	for i := range slots {
		slots[i] = recvSlot{live: true, addr: uint64(buf.Addr()) + uint64(i*size), length: uint64(size),
			desc: reg.keys[0].Local, onData: onData, onErr: onErr}
	}
	slots[0].buf = buf
	return e.addRecvSlots(slots)
}

func (e *Engine) addRecvSlots(slots []recvSlot) error {
	return e.control(e.main(), func(w *worker) {
		for _, s := range slots {
			w.recvs = append(w.recvs, s)
			w.postRecvSlot(len(w.recvs) - 1)
		}
	})
}

func (w *worker) postRecvSlot(i int) {
	s := &w.recvs[i]
	if !s.live || w.stopping {
		return
	}
	w.doms[0].recvQ = append(w.doms[0].recvQ, rdma.RecvOp{Local: s.addr, Length: s.length, LocalDesc: s.desc, Context: ctxTagRecv | uint64(i)})
}

func (w *worker) postRecvs(ds *domState) bool {
	// Posted receives are not counted in ds.posted: they wait for peers,
	// not for the provider, and Close cancels them with the domain.
	call := w.beginCall()
	n, err := ds.d.PostRecvs(ds.recvQ)
	w.endCall(call)
	ds.stats.Posted.Add(uint64(n))
	rest := ds.recvQ[n:]
	if err != nil && len(rest) > 0 {
		i := int(rest[0].Context & ctxIndexMask)
		w.recvFailed(i, fmt.Errorf("post recv: %w", err))
		rest = rest[1:]
		n++
	}
	ds.recvQ = ds.recvQ[:copy(ds.recvQ, rest)]
	return n > 0
}

func (w *worker) recvFailed(i int, err error) {
	s := &w.recvs[i]
	s.live = false
	if s.onErr != nil {
		w.pending = append(w.pending, dispEvent{kind: dispRecvErr, onErr: s.onErr, err: err})
	}
}

func (w *worker) recvDone(ds *domState, ev *rdma.Event) {
	i := int(ev.Context & ctxIndexMask)
	if ev.Context&ctxTagMask != ctxTagRecv || i >= len(w.recvs) {
		return
	}
	if ev.Errno != 0 {
		ds.stats.Errors.Add(1)
		w.recvFailed(i, ds.d.DescribeError(*ev))
		return
	}
	s := &w.recvs[i]
	n := min(ev.Length, s.length)
	if s.onData != nil {
		data := make([]byte, n)
		copy(data, bytesAt(uintptr(s.addr), int(n)))
		w.postRecvSlot(i)
		w.pending = append(w.pending, dispEvent{kind: dispRecvData, onData: s.onData, data: data})
		return
	}
	w.pending = append(w.pending, dispEvent{kind: dispRecv, onRecv: s.onRecv, n: int(n), slot: int32(i), w: w})
}

// failRecvs reports ErrClosed to every live receive.
func (w *worker) failRecvs(err error) {
	for i := range w.recvs {
		if w.recvs[i].live {
			w.recvFailed(i, err)
		}
	}
}

// freeRecvBuffers releases bouncing buffers after the domains closed.
func (w *worker) freeRecvBuffers() {
	for i := range w.recvs {
		if b := w.recvs[i].buf; b != nil {
			_ = b.Free()
		}
	}
}

// sendChannel is the side channel's send buffers, set up once on first
// use: pool hands out free slots of buf (registered as reg); err is why
// setting them up failed.
type sendChannel struct {
	pool chan int32
	buf  *HostBuffer
	reg  *MemoryRegion
	once sync.Once
	err  error
}
