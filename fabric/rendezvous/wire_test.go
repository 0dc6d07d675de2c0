package rendezvous

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWireRoundTrip(t *testing.T) {
	h := hello{rank: 3, world: 8, deadline: 1234567890, token: "tok"}
	k, p, err := readFrame(bytes.NewReader(h.encode()), 1024)
	require.NoError(t, err)
	require.Equal(t, kindHello, k)
	got, err := decodeHello(p)
	require.NoError(t, err)
	assert.Equal(t, h, got)

	r := result{seq: 9, parts: [][]byte{[]byte("a"), {}, []byte("ccc")}}
	_, p, err = readFrame(bytes.NewReader(r.encode()), 1024)
	require.NoError(t, err)
	gotR, err := decodeResult(p)
	require.NoError(t, err)
	assert.Equal(t, r.seq, gotR.seq)
	assert.Equal(t, [][]byte{[]byte("a"), {}, []byte("ccc")}, gotR.parts)

	e := errMsg{code: codeTimeout, missing: []uint32{2, 5}, msg: "late"}
	_, p, err = readFrame(bytes.NewReader(e.encode()), 1024)
	require.NoError(t, err)
	gotE, err := decodeError(p)
	require.NoError(t, err)
	assert.Equal(t, e, gotE)
	assert.ErrorIs(t, gotE.asError("barrier", 1), ErrTimeout)
}

func TestWireRejects(t *testing.T) {
	_, _, err := readFrame(bytes.NewReader([]byte("FRDV\x01")), 1024)
	assert.ErrorIs(t, err, ErrProtocol, "truncated header")
	_, _, err = readFrame(bytes.NewReader(nil), 1024)
	assert.EqualError(t, err, "EOF", "a clean end of stream is io.EOF")
	_, _, err = readFrame(bytes.NewReader([]byte("FRDV\x01\x01\x00\x00\x00\x00\x04\x01")), 1024)
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = decodeHello(append(make([]byte, 16), 0x01, 0x01)) // 257-byte token
	assert.ErrorIs(t, err, ErrProtocol)
	_, err = decodeContrib(make([]byte, 17)) // op 0
	assert.ErrorIs(t, err, ErrProtocol)
	_, err = decodeResult([]byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}) // 4G parts, no bytes
	assert.ErrorIs(t, err, ErrProtocol)
	_, err = decodeError([]byte{99, 0, 0, 0, 0})
	assert.ErrorIs(t, err, ErrProtocol, "unknown code")
	_, err = decodeWelcome([]byte{0, 0, 0, 2, 0})
	assert.ErrorIs(t, err, ErrProtocol, "trailing byte")
}

// FuzzDecode feeds arbitrary bytes to the frame reader and every payload
// decoder: none may panic or allocate past the limit, and whatever decodes
// must encode back to a frame that decodes the same.
func FuzzDecode(f *testing.F) {
	f.Add(hello{rank: 1, world: 2, token: "t"}.encode())
	f.Add(encodeWelcome(4))
	f.Add(contrib{seq: 1, op: opBroadcast, root: 1, data: []byte("xyz")}.encode())
	f.Add(result{seq: 2, parts: [][]byte{[]byte("a"), nil}}.encode())
	f.Add(errMsg{code: codeAuth, missing: []uint32{1}, msg: "no"}.encode())
	f.Add([]byte("FRDV\x01\x04\x00\x00\x00\x00\x00\x08\x00\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 16
		k, p, err := readFrame(bytes.NewReader(data), limit)
		if err != nil {
			return
		}
		if len(p) > limit {
			t.Fatalf("payload of %d bytes past the limit", len(p))
		}
		var again []byte
		switch k {
		case kindHello:
			if h, err := decodeHello(p); err == nil {
				again = h.encode()
			}
		case kindWelcome:
			if w, err := decodeWelcome(p); err == nil {
				again = encodeWelcome(w)
			}
		case kindContrib:
			if c, err := decodeContrib(p); err == nil {
				again = c.encode()
			}
		case kindResult:
			if r, err := decodeResult(p); err == nil {
				again = r.encode()
			}
		case kindError:
			if e, err := decodeError(p); err == nil {
				again = e.encode()
			}
		}
		if again != nil && !bytes.Equal(again, data[:headerLen+len(p)]) {
			t.Fatalf("re-encoding changed the frame:\n%x\n%x", data[:headerLen+len(p)], again)
		}
	})
}
