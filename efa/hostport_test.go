package efa_test

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric/rdma"
)

// TestTCPHostPort: host:port and the tcp endpoint's raw socket address
// convert both ways, for IPv4 (the form fabric-debug serve prints) and
// IPv6; bad input is refused with ErrInvalidArgument.
func TestTCPHostPort(t *testing.T) {
	// struct sockaddr_in: family 2 (little endian), port 46447 and
	// 127.0.0.1 (network order), zero padding.
	raw, err := hex.DecodeString("0200b56f7f0000010000000000000000")
	require.NoError(t, err)
	want, err := rdma.AddressFromRaw(raw)
	require.NoError(t, err)
	require.Zero(t, want.Incarnation(), "host:port names no engine incarnation")
	got, err := efa.TCPAddress("127.0.0.1:46447")
	require.NoError(t, err)
	require.Equal(t, want, got)
	hp, ok := efa.TCPHostPort(got)
	require.True(t, ok)
	require.Equal(t, "127.0.0.1:46447", hp)

	v6, err := efa.TCPAddress("[::1]:9000")
	require.NoError(t, err)
	hp, ok = efa.TCPHostPort(v6)
	require.True(t, ok)
	require.Equal(t, "[::1]:9000", hp)

	for _, bad := range []string{"127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", ":x"} {
		_, err := efa.TCPAddress(bad)
		require.ErrorIs(t, err, rdma.ErrInvalidArgument, bad)
	}
	shm, err := rdma.AddressFromRaw([]byte("fi_shm://1234:0"))
	require.NoError(t, err)
	_, ok = efa.TCPHostPort(shm)
	require.False(t, ok)
}
