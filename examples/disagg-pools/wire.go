package main

import (
	"encoding/binary"
	"fmt"
)

// request is what a decode sends a prefill over the side channel: stream
// request id's KV into the decode's region "kv" at slot, chunk by chunk,
// with immediate imm on each chunk.
type request struct {
	ID, Slot, Imm, Chunks, ChunkBytes uint32
	Decode                            string // the decode engine's directory name
}

func (r request) encode() []byte {
	b := make([]byte, 20, 21+len(r.Decode))
	for i, v := range []uint32{r.ID, r.Slot, r.Imm, r.Chunks, r.ChunkBytes} {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	b = append(b, byte(len(r.Decode)))
	return append(b, r.Decode...)
}

func decodeRequest(b []byte) (request, error) {
	if len(b) < 21 || len(b) != 21+int(b[20]) {
		return request{}, fmt.Errorf("request of %d bytes: malformed", len(b))
	}
	var r request
	for i, p := range []*uint32{&r.ID, &r.Slot, &r.Imm, &r.Chunks, &r.ChunkBytes} {
		*p = binary.LittleEndian.Uint32(b[4*i:])
	}
	r.Decode = string(b[21:])
	return r, nil
}

// fill writes the KV bytes of chunk c of request id: what any prefill
// engine computes for that request, so the decode can check them whoever
// served it.
func fill(b []byte, id, c uint32) {
	x := id*2654435761 + c*40503 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

// check compares b with chunk c of request id.
func check(b, scratch []byte, id, c uint32) error {
	fill(scratch[:len(b)], id, c)
	for i := range b {
		if b[i] != scratch[i] {
			return fmt.Errorf("request %d chunk %d byte %d: got %#x, want %#x: %w", id, c, i, b[i], scratch[i], errBadData)
		}
	}
	return nil
}
