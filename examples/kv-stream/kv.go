package main

import (
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
)

// The side channel carries two messages from the decode to the prefill:
// a request (its page table) and quit. Both fit in one send buffer.
const (
	maxMessage = 64 << 10 // the engine's default send buffer size
	msgRequest = 1
	msgQuit    = 2
)

// request is what the decode asks of the prefill: prefill prompt number
// ID and write layer l's page j into the decode's pool page Table[j],
// each page of layer l carrying the immediate Imm+l (the decode leased
// Imm..Imm+layers-1 for this request, so a late page of a cancelled
// request is dropped instead of counted for a later one), then notify
// Mailbox once every layer is written.
type request struct {
	ID      uint32
	Stream  bool
	Imm     uint32
	Mailbox fabric.Mailbox
	Table   []uint32
}

func (q request) marshal() ([]byte, error) {
	mb, err := q.Mailbox.MarshalBinary()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 20+len(mb)+4*len(q.Table))
	b = append(b, msgRequest, 0, 0, 0)
	if q.Stream {
		b[1] = 1
	}
	b = binary.LittleEndian.AppendUint32(b, q.ID)
	b = binary.LittleEndian.AppendUint32(b, q.Imm)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(q.Table)))
	for _, p := range q.Table {
		b = binary.LittleEndian.AppendUint32(b, p)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(mb)))
	return append(b, mb...), nil
}

func parseRequest(b []byte) (request, error) {
	if len(b) < 20 || b[0] != msgRequest {
		return request{}, fmt.Errorf("bad request message (%d bytes)", len(b))
	}
	q := request{Stream: b[1] == 1, ID: binary.LittleEndian.Uint32(b[4:]), Imm: binary.LittleEndian.Uint32(b[8:])}
	n := int(binary.LittleEndian.Uint32(b[12:]))
	if len(b) < 20+4*n {
		return request{}, fmt.Errorf("request of %d pages in %d bytes", n, len(b))
	}
	q.Table = make([]uint32, n)
	for i := range q.Table {
		q.Table[i] = binary.LittleEndian.Uint32(b[16+4*i:])
	}
	rest := b[16+4*n:]
	if m := int(binary.LittleEndian.Uint32(rest)); len(rest) != 4+m {
		return request{}, fmt.Errorf("request mailbox of %d bytes in %d", m, len(rest)-4)
	}
	if err := q.Mailbox.UnmarshalBinary(rest[4:]); err != nil {
		return request{}, err
	}
	return q, nil
}

// doneNote is the notification the prefill sends when every layer of request
// id is written: the id and the prefill's compute time, so the decode can
// tell which request finished and how long the prefill took.
func doneNote(id uint32, compute time.Duration) []byte {
	b := binary.LittleEndian.AppendUint32(nil, id)
	return binary.LittleEndian.AppendUint64(b, uint64(compute))
}

// fillPage writes the contents the prefill computes for page j of layer
// l of request req: every 8-byte word depends on all four and on its
// position, so a page landing in the wrong place, late or twice is caught.
func fillPage(p []byte, seed uint64, req uint32, layer, j int) {
	base := pageSeed(seed, req, layer, j)
	w := words(p)
	for i := range w {
		w[i] = mix(base + uint64(i))
	}
}

// checkPage returns the index of the first wrong byte of p, or -1.
func checkPage(p []byte, seed uint64, req uint32, layer, j int) int {
	base := pageSeed(seed, req, layer, j)
	for i, w := range words(p) {
		if w != mix(base+uint64(i)) {
			return 8 * i
		}
	}
	return -1
}

func pageSeed(seed uint64, req uint32, layer, j int) uint64 {
	return mix(seed ^ uint64(req)<<40 ^ uint64(layer)<<20 ^ uint64(j))
}

// mix is a 64-bit finalizer (splitmix64's): cheap and sensitive to every bit.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// words views page memory as 8-byte words. Registered memory comes from
// mmap, so it is page aligned, and pages are multiples of 8 bytes.
func words(p []byte) []uint64 {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&p[0])), len(p)/8)
}
