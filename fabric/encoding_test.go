package fabric_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

func sampleDescriptor(t testing.TB) fabric.Descriptor {
	a1, err := fabric.AddressFromRaw(bytes.Repeat([]byte{0xab}, 32))
	require.NoError(t, err)
	a2, err := fabric.AddressFromRaw([]byte("fi_shm://1234:5"))
	require.NoError(t, err)
	return fabric.Descriptor{Base: 0x7f0000001000, Length: 256 << 20, NICs: []fabric.RemoteKey{
		{Addr: a1, Key: 0x1234, Mode: fabric.AddrVirtual}, {Addr: a2, Key: 7, Mode: fabric.AddrOffset}}}
}

func TestDescriptorRoundTrip(t *testing.T) {
	d := sampleDescriptor(t)
	bin, err := d.MarshalBinary()
	require.NoError(t, err)
	var back fabric.Descriptor
	require.NoError(t, back.UnmarshalBinary(bin))
	require.Equal(t, d, back)
	txt, err := d.MarshalText()
	require.NoError(t, err)
	back2, err := fabric.ParseDescriptor(string(txt))
	require.NoError(t, err)
	require.Equal(t, d, back2)
	_, err = fabric.Descriptor{}.MarshalBinary()
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
}

func TestAddressRoundTripAndEquality(t *testing.T) {
	raw := bytes.Repeat([]byte{1, 2, 3, 4}, 8) // 32 bytes, like EFA
	a, err := fabric.AddressFromRaw(raw)
	require.NoError(t, err)
	s := a.String()
	b, err := fabric.ParseAddress(s)
	require.NoError(t, err)
	c, err := fabric.ParseAddress(s)
	require.NoError(t, err)
	require.Equal(t, a, b)
	set := map[fabric.Address]bool{b: true, c: true}
	require.Len(t, set, 1, "equal addresses collapse in a set")
	require.Equal(t, raw, b.Raw())
	for _, bad := range []string{"", "0", "zz", "01", "0105aa"} {
		_, err := fabric.ParseAddress(bad)
		require.ErrorIs(t, err, fabric.ErrBadEncoding, bad)
	}
	_, err = fabric.AddressFromRaw(nil)
	require.ErrorIs(t, err, fabric.ErrBadEncoding)
}

func FuzzDescriptorDecode(f *testing.F) {
	bin, _ := sampleDescriptor(f).MarshalBinary()
	f.Add(bin)
	f.Add([]byte{})
	f.Add([]byte{0xfd, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var d fabric.Descriptor
		if err := d.UnmarshalBinary(b); err != nil {
			require.ErrorIs(t, err, fabric.ErrBadEncoding)
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		again, err := d.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, b, again)
	})
}

func FuzzAddressDecode(f *testing.F) {
	a, _ := fabric.AddressFromRaw([]byte{1, 2, 3})
	bin, _ := a.MarshalBinary()
	f.Add(bin)
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var a fabric.Address
		if err := a.UnmarshalBinary(b); err != nil {
			require.ErrorIs(t, err, fabric.ErrBadEncoding)
			return
		}
		again, err := a.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, b, again)
		txt, _ := a.MarshalText()
		back, err := fabric.ParseAddress(string(txt))
		require.NoError(t, err)
		require.Equal(t, a, back)
	})
}
