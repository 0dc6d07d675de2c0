package ipc

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func testPage(t *testing.T) *connPage {
	t.Helper()
	pg := viewPage(make([]byte, connPageLen))
	pg.init()
	require.True(t, pg.valid())
	return pg
}

// TestImmRing: immediates arrive in order across many wraps, a full ring
// refuses more until the consumer releases, and an impossible tail is
// detected.
func TestImmRing(t *testing.T) {
	pg := testPage(t)
	p, c := producer{pg: pg}, consumer{pg: pg}
	next, want, left := uint32(0), uint32(0), uint64(0)
	for round := 0; round < 5; round++ {
		for p.immRoom() {
			p.pushImm(next)
			next++
		}
		require.EqualValues(t, immCap, next-want, "the ring holds exactly its capacity")
		n, _ := c.pendingImm()
		require.Equal(t, left, n, "nothing new is visible before publish")
		p.publish()
		n, ok := c.pendingImm()
		require.True(t, ok)
		require.EqualValues(t, immCap, n)
		for i := uint64(0); i < n-3; i++ { // leave a few for the next round
			require.Equal(t, want, c.takeImm())
			want++
		}
		c.releaseImm()
		left = 3
		require.True(t, p.immRoom())
	}
	pg.hdr.immTail.Store(c.immHead + immCap + 1)
	_, ok := c.pendingImm()
	require.False(t, ok, "a tail beyond the capacity is refused")
}

// TestMsgRing: messages of every size class wrap around the ring intact,
// a full ring refuses, and corrupt records are detected.
func TestMsgRing(t *testing.T) {
	pg := testPage(t)
	p, c := producer{pg: pg}, consumer{pg: pg}
	sizes := []int{0, 1, 7, 8, 9, 4096, 100000, msgCap / 3}
	for i := 0; i < 40; i++ {
		msg := bytes.Repeat([]byte{byte(i + 1)}, sizes[i%len(sizes)])
		require.True(t, p.pushMsg(msg), "message %d", i)
		n, ok, bad := c.peekMsg()
		require.True(t, ok)
		require.False(t, bad)
		require.EqualValues(t, len(msg), n)
		got := make([]byte, n)
		c.takeMsg(got, n)
		require.Equal(t, msg, got, "message %d of %d bytes", i, len(msg))
	}
	big := make([]byte, msgCap/2)
	require.True(t, p.pushMsg(big))
	require.False(t, p.pushMsg(big), "a second half-ring message does not fit")
	n, ok, _ := c.peekMsg()
	require.True(t, ok)
	c.takeMsg(nil, n) // too short a buffer: the message is dropped, the ring freed
	require.True(t, p.pushMsg(big))
	require.False(t, p.pushMsg(make([]byte, MaxMessage+1)), "larger than the ring")

	n, _, _ = c.peekMsg()
	c.takeMsg(make([]byte, n), n)
	p.pushMsg([]byte{1, 2, 3})
	at := c.msgHead & (msgCap - 1)
	for _, l := range []uint64{MaxMessage + 1, 1 << 63, 16} {
		pg.msg[at] = 0
		putLen(pg.msg[at:], l)
		_, _, bad := c.peekMsg()
		require.True(t, bad, "record length %d with 16 bytes published", l)
	}
}

func putLen(b []byte, n uint64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(n >> (8 * i))
	}
}
