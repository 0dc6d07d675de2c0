package rendezvous

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tok = "server-test-token"

// startServer runs a bare store for world ranks and returns its address.
func startServer(t *testing.T, world, limit int) (*server, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := newServer(ln, world, tok, limit)
	t.Cleanup(s.close)
	return s, ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	return c
}

// expectError reads frames until an error frame and returns it.
func expectError(t *testing.T, c net.Conn) errMsg {
	t.Helper()
	for {
		k, p, err := readFrame(c, 1<<20)
		require.NoError(t, err)
		if k == kindError {
			m, err := decodeError(p)
			require.NoError(t, err)
			return m
		}
	}
}

func registered(s *server, rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.conns[rank]
	return ok
}

func TestServerRefusesDuplicateRank(t *testing.T) {
	s, addr := startServer(t, 3, 1024)
	c1 := dial(t, addr)
	_, err := c1.Write(hello{rank: 1, world: 3, token: tok}.encode())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return registered(s, 1) }, 5*time.Second, 5*time.Millisecond)
	c2 := dial(t, addr)
	_, err = c2.Write(hello{rank: 1, world: 3, token: tok}.encode())
	require.NoError(t, err)
	m := expectError(t, c2)
	assert.Equal(t, codeRejected, m.code)
	assert.Contains(t, m.msg, "rank 1 has already joined")
	c3 := dial(t, addr)
	_, err = c3.Write(hello{rank: 7, world: 3, token: tok}.encode())
	require.NoError(t, err)
	assert.Contains(t, expectError(t, c3).msg, "rank 7 outside a world of 3")
	assert.True(t, registered(s, 1), "the first rank 1 is untouched")
}

func TestServerRefusesMalformedHello(t *testing.T) {
	_, addr := startServer(t, 2, 1024)
	for name, tc := range map[string]struct {
		raw  []byte
		code uint8
	}{
		"bad magic":     {[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), codeProtocol},
		"bad version":   {append([]byte("FRDV\x09\x01\x00\x00"), 0, 0, 0, 0), codeProtocol},
		"reserved bits": {append([]byte("FRDV\x01\x01\x00\x01"), 0, 0, 0, 0), codeProtocol},
		"unknown kind":  {append([]byte("FRDV\x01\x63\x00\x00"), 0, 0, 0, 0), codeProtocol},
		"oversized":     {append([]byte("FRDV\x01\x01\x00\x00"), 0x40, 0, 0, 0), codeTooLarge},
		"short hello":   {appendFrame(nil, kindHello, func(b []byte) []byte { return append(b, 1, 2, 3) }), codeProtocol},
		"contrib first": {contrib{op: opBarrier}.encode(), codeProtocol},
		"token overrun": {appendFrame(nil, kindHello, func(b []byte) []byte {
			b = binary.BigEndian.AppendUint32(b, 1)
			b = binary.BigEndian.AppendUint32(b, 2)
			b = binary.BigEndian.AppendUint64(b, 0)
			return binary.BigEndian.AppendUint16(b, 200) // 200 announced, none sent
		}), codeProtocol},
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, addr)
			_, err := c.Write(tc.raw)
			require.NoError(t, err)
			m := expectError(t, c)
			assert.Equal(t, tc.code, m.code, m.msg)
			_, _, err = readFrame(c, 1024)
			assert.Error(t, err, "the connection is closed after the error")
		})
	}
}

func TestServerTruncatedHello(t *testing.T) {
	_, addr := startServer(t, 2, 1024)
	c := dial(t, addr)
	frame := hello{rank: 1, world: 2, token: tok}.encode()
	_, err := c.Write(frame[:len(frame)-3])
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	m := expectError(t, c)
	assert.Equal(t, codeProtocol, m.code)
	assert.Contains(t, m.msg, "truncated")
}

// joinRaw joins rank 1 by hand next to a real rank 0 and returns the
// connection once the welcome arrived.
func joinRaw(t *testing.T, limit int) (*Group, net.Conn, chan error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	type joined struct {
		g   *Group
		err error
	}
	ch := make(chan joined, 1)
	go func() {
		g, err := Join(ctx, Config{Rank: 0, WorldSize: 2, Token: tok, Listener: ln, MaxMessage: limit})
		ch <- joined{g, err}
	}()
	c := dial(t, ln.Addr().String())
	_, err = c.Write(hello{rank: 1, world: 2, token: tok}.encode())
	require.NoError(t, err)
	k, _, err := readFrame(c, 1024)
	require.NoError(t, err)
	require.Equal(t, kindWelcome, k)
	j := <-ch
	require.NoError(t, j.err)
	t.Cleanup(func() { j.g.Close() })
	res := make(chan error, 1)
	go func() { _, err := j.g.AllGather(ctx, []byte("zero")); res <- err }()
	return j.g, c, res
}

func TestServerOversizedContribution(t *testing.T) {
	_, c, res := joinRaw(t, 1024)
	// Announce 1 MiB: refused from the header, before it is read.
	hdr := []byte("FRDV\x01\x03\x00\x00\x00\x10\x00\x00")
	_, err := c.Write(hdr)
	require.NoError(t, err)
	m := expectError(t, c)
	assert.Equal(t, codeTooLarge, m.code)
	err = <-res
	assert.ErrorIs(t, err, ErrTooLarge, "rank 0 hears why rank 1 left")
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, []int{1}, re.Missing)
}

func TestServerOversizedContributionWithPayload(t *testing.T) {
	// The whole oversized frame is sent: the error must still arrive, not
	// be lost to a reset from closing over unread input.
	_, c, res := joinRaw(t, 1024)
	big := contrib{op: opAllGather, data: make([]byte, 256<<10)}.encode()
	go c.Write(big)
	assert.Equal(t, codeTooLarge, expectError(t, c).code)
	assert.ErrorIs(t, <-res, ErrTooLarge)
}

func TestServerContributionOverLimitInPayload(t *testing.T) {
	_, c, res := joinRaw(t, 16)
	_, err := c.Write(contrib{op: opAllGather, data: bytes.Repeat([]byte{1}, 40)}.encode())
	require.NoError(t, err)
	assert.Equal(t, codeTooLarge, expectError(t, c).code)
	assert.ErrorIs(t, <-res, ErrTooLarge)
}

func TestServerMismatchedCollective(t *testing.T) {
	_, c, res := joinRaw(t, 1024)
	_, err := c.Write(contrib{op: opBarrier}.encode())
	require.NoError(t, err)
	m := expectError(t, c)
	assert.Equal(t, codeProtocol, m.code)
	assert.Contains(t, m.msg, "barrier")
	assert.Contains(t, m.msg, "allgather")
	assert.ErrorIs(t, <-res, ErrProtocol)
}

func TestServerTruncatedContribution(t *testing.T) {
	_, c, res := joinRaw(t, 1024)
	frame := contrib{op: opAllGather, data: []byte("one")}.encode()
	_, err := c.Write(frame[:len(frame)-2])
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	assert.Equal(t, codeProtocol, expectError(t, c).code)
	assert.ErrorIs(t, <-res, ErrProtocol)
}

// fakeRankZero accepts one joiner, welcomes it, reads one contribution and
// answers with reply.
func fakeRankZero(t *testing.T, reply []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, _, err := readFrame(c, 1024); err != nil {
			return
		}
		c.Write(encodeWelcome(2))
		if _, _, err := readFrame(c, 1<<20); err != nil {
			return
		}
		c.Write(reply)
		c.(*net.TCPConn).CloseWrite()
		c.Read(make([]byte, 1)) // until the client hangs up
	}()
	return ln.Addr().String()
}

func TestClientRejectsBadAnswers(t *testing.T) {
	good := result{seq: 0, parts: [][]byte{[]byte("a"), []byte("b")}}.encode()
	for name, tc := range map[string]struct {
		reply []byte
		want  error
	}{
		"garbage":        {[]byte("HTTP/1.1 400 Bad Request\r\n\r\n"), ErrProtocol},
		"truncated":      {good[:len(good)-1], ErrProtocol},
		"oversized":      {[]byte("FRDV\x01\x04\x00\x00\x7f\x00\x00\x00"), ErrTooLarge},
		"part overrun":   {appendFrame(nil, kindResult, func(b []byte) []byte { return append(b, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9) }), ErrProtocol},
		"wrong sequence": {result{seq: 7, parts: [][]byte{nil, nil}}.encode(), ErrProtocol},
		"wrong count":    {result{seq: 0, parts: [][]byte{nil}}.encode(), ErrProtocol},
		"welcome again":  {encodeWelcome(2), ErrProtocol},
		"empty stream":   {nil, ErrPeerLost},
		"remote error":   {errMsg{code: codeTimeout, missing: []uint32{1}, msg: "late"}.encode(), ErrTimeout},
	} {
		t.Run(name, func(t *testing.T) {
			addr := fakeRankZero(t, tc.reply)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			g, err := Join(ctx, Config{Rank: 1, WorldSize: 2, Master: addr, Token: tok})
			require.NoError(t, err)
			defer g.Close()
			_, err = g.AllGather(ctx, []byte("b"))
			require.ErrorIs(t, err, tc.want)
			var re *Error
			require.True(t, errors.As(err, &re))
			_, again := g.AllGather(ctx, nil)
			assert.Equal(t, err, again, "a broken group stays broken")
		})
	}
}
