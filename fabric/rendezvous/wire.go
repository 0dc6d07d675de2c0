package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Frame layout, big-endian:
//
//	magic "FRDV" | version u8 | kind u8 | reserved u16 (0) | length u32 | payload
//
// The length is checked against the reader's limit before the payload is
// allocated, so a hostile or confused peer cannot make a rank allocate more
// than the limit.
const (
	wireMagic   = "FRDV"
	wireVersion = 1
	headerLen   = 12
	maxToken    = 256
	maxErrMsg   = 1024
)

type kind uint8

const (
	kindHello   kind = iota + 1 // joiner -> rank 0
	kindWelcome                 // rank 0 -> joiner, once every rank joined
	kindContrib                 // rank -> rank 0: its part of a collective
	kindResult                  // rank 0 -> rank: the collective's outcome
	kindError                   // either way: a failure, then the sender stops
)

// Collective operations, carried in contrib frames.
const (
	opAllGather uint8 = iota + 1
	opBroadcast
	opBarrier
)

func opName(op uint8) string {
	switch op {
	case opAllGather:
		return "allgather"
	case opBroadcast:
		return "broadcast"
	case opBarrier:
		return "barrier"
	}
	return fmt.Sprintf("op(%d)", op)
}

type hello struct {
	rank, world uint32
	deadline    int64 // unix nanoseconds, 0 for none
	token       string
}

type contrib struct {
	seq      uint32
	op       uint8
	root     uint32
	deadline int64
	data     []byte
}

type result struct {
	seq   uint32
	parts [][]byte
}

type errMsg struct {
	code    uint8
	missing []uint32
	msg     string
}

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrProtocol)
}

// appendFrame appends one frame with the payload built by body.
func appendFrame(b []byte, k kind, body func([]byte) []byte) []byte {
	start := len(b)
	b = append(b, wireMagic...)
	b = append(b, wireVersion, byte(k), 0, 0, 0, 0, 0, 0)
	b = body(b)
	binary.BigEndian.PutUint32(b[start+8:], uint32(len(b)-start-headerLen))
	return b
}

func (h hello) encode() []byte {
	return appendFrame(nil, kindHello, func(b []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, h.rank)
		b = binary.BigEndian.AppendUint32(b, h.world)
		b = binary.BigEndian.AppendUint64(b, uint64(h.deadline))
		b = binary.BigEndian.AppendUint16(b, uint16(len(h.token)))
		return append(b, h.token...)
	})
}

func encodeWelcome(world uint32) []byte {
	return appendFrame(nil, kindWelcome, func(b []byte) []byte { return binary.BigEndian.AppendUint32(b, world) })
}

func (c contrib) encode() []byte {
	return appendFrame(make([]byte, 0, headerLen+17+len(c.data)), kindContrib, func(b []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, c.seq)
		b = append(b, c.op)
		b = binary.BigEndian.AppendUint32(b, c.root)
		b = binary.BigEndian.AppendUint64(b, uint64(c.deadline))
		return append(b, c.data...)
	})
}

func (r result) encode() []byte {
	n := headerLen + 8
	for _, p := range r.parts {
		n += 4 + len(p)
	}
	return appendFrame(make([]byte, 0, n), kindResult, func(b []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, r.seq)
		b = binary.BigEndian.AppendUint32(b, uint32(len(r.parts)))
		for _, p := range r.parts {
			b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
			b = append(b, p...)
		}
		return b
	})
}

// errFrameLimit is the largest payload of an error frame in a world of
// the given size: its code, the count and list of missing ranks (at most
// every rank) and its text.
func errFrameLimit(world int) int { return 1 + 4 + 4*world + maxErrMsg }

func (e errMsg) encode() []byte {
	msg := e.msg
	if len(msg) > maxErrMsg {
		msg = msg[:maxErrMsg]
	}
	return appendFrame(nil, kindError, func(b []byte) []byte {
		b = append(b, e.code)
		b = binary.BigEndian.AppendUint32(b, uint32(len(e.missing)))
		for _, m := range e.missing {
			b = binary.BigEndian.AppendUint32(b, m)
		}
		return append(b, msg...)
	})
}

// readFrame reads one frame whose payload may be at most limit bytes. A
// clean end of stream before a header is io.EOF; anything else that is
// wrong wraps ErrProtocol or ErrTooLarge.
func readFrame(r io.Reader, limit int) (kind, []byte, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, protoErr("truncated header")
		}
		return 0, nil, err
	}
	k, n, err := parseHeader(h[:], limit)
	if err != nil {
		return 0, nil, err
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, protoErr("truncated %d-byte payload", n)
		}
		return 0, nil, err
	}
	return k, p, nil
}

func parseHeader(h []byte, limit int) (kind, int, error) {
	if string(h[:4]) != wireMagic {
		return 0, 0, protoErr("bad magic %q", h[:4])
	}
	if h[4] != wireVersion {
		return 0, 0, protoErr("wire version %d, this build speaks %d", h[4], wireVersion)
	}
	k := kind(h[5])
	if k < kindHello || k > kindError {
		return 0, 0, protoErr("unknown message kind %d", k)
	}
	if h[6] != 0 || h[7] != 0 {
		return 0, 0, protoErr("reserved header bits set")
	}
	n := binary.BigEndian.Uint32(h[8:])
	if uint64(n) > uint64(limit) {
		return 0, 0, fmt.Errorf("%d-byte message, limit %d: %w", n, limit, ErrTooLarge)
	}
	return k, int(n), nil
}

// reader walks a payload; the first short read sticks as err.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		if r.err == nil {
			r.err = protoErr("payload too short")
		}
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = protoErr("%d trailing bytes", len(r.b))
	}
	return r.err
}

func decodeHello(p []byte) (hello, error) {
	r := &reader{b: p}
	h := hello{rank: r.u32(), world: r.u32(), deadline: int64(r.u64())}
	n := int(r.u16())
	if r.err == nil && n > maxToken {
		return hello{}, protoErr("%d-byte token, limit %d", n, maxToken)
	}
	h.token = string(r.take(n))
	return h, r.done()
}

func decodeWelcome(p []byte) (uint32, error) {
	r := &reader{b: p}
	w := r.u32()
	return w, r.done()
}

func decodeContrib(p []byte) (contrib, error) {
	r := &reader{b: p}
	c := contrib{seq: r.u32(), op: r.u8(), root: r.u32(), deadline: int64(r.u64())}
	if r.err == nil && (c.op < opAllGather || c.op > opBarrier) {
		return contrib{}, protoErr("unknown collective %d", c.op)
	}
	c.data = r.b
	r.b = nil
	return c, r.done()
}

func decodeResult(p []byte) (result, error) {
	r := &reader{b: p}
	res := result{seq: r.u32()}
	n := r.u32()
	// Each part costs at least 4 bytes: this bounds n by the payload size
	// before anything is allocated.
	if r.err == nil && uint64(n)*4 > uint64(len(r.b)) {
		return result{}, protoErr("%d parts in %d bytes", n, len(r.b))
	}
	res.parts = make([][]byte, 0, n)
	for range n {
		l := r.u32()
		if r.err == nil && uint64(l) > uint64(len(r.b)) {
			return result{}, protoErr("part of %d bytes, %d left", l, len(r.b))
		}
		res.parts = append(res.parts, r.take(int(l)))
	}
	return res, r.done()
}

func decodeError(p []byte) (errMsg, error) {
	r := &reader{b: p}
	e := errMsg{code: r.u8()}
	n := r.u32()
	if r.err == nil && uint64(n)*4 > uint64(len(r.b)) {
		return errMsg{}, protoErr("%d missing ranks in %d bytes", n, len(r.b))
	}
	for range n {
		e.missing = append(e.missing, r.u32())
	}
	if r.err == nil && len(r.b) > maxErrMsg {
		return errMsg{}, protoErr("%d-byte error text, limit %d", len(r.b), maxErrMsg)
	}
	e.msg = string(r.b)
	r.b = nil
	if _, ok := codeErrs[e.code]; r.err == nil && !ok {
		return errMsg{}, protoErr("unknown error code %d", e.code)
	}
	return e, r.done()
}

// asError turns a received error frame into an *Error for rank.
func (e errMsg) asError(op string, rank int) error {
	missing := make([]int, len(e.missing))
	for i, m := range e.missing {
		missing[i] = int(m)
	}
	return &Error{Op: op, Rank: rank, Missing: missing, Msg: "rank 0 reports: " + e.msg, Err: codeErrs[e.code]}
}

func deadlineOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
