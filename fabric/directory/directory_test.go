package directory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
	"github.com/ferryrdma/ferry/internal/testutil"
)

func addrs(name string, n int) []fabric.Address {
	var out []fabric.Address
	for i := range n {
		a, err := fabric.AddressFromRaw([]byte(fmt.Sprintf("%s-%d", name, i)))
		if err != nil {
			panic(err)
		}
		out = append(out, a)
	}
	return out
}

func TestSelector(t *testing.T) {
	e := directory.Entry{Labels: map[string]string{"role": "prefill", "model": "m1"}}
	for s, want := range map[string]bool{
		"": true, "role=prefill": true, "role=decode": false, "role=prefill,model=m1": true,
		"role!=decode": true, "model!=m1": false, "shard": false, "model": true, "gpu!=x": true,
	} {
		sel, err := directory.ParseSelector(s)
		require.NoError(t, err, s)
		require.Equal(t, want, sel.Matches(e), s)
		back, err := directory.ParseSelector(sel.String())
		require.NoError(t, err)
		require.Equal(t, sel, back)
	}
	for _, bad := range []string{"=x", "a b=c", "role=x,", "x/y=1"} {
		_, err := directory.ParseSelector(bad)
		require.ErrorIs(t, err, directory.ErrInvalid, bad)
	}
	require.True(t, directory.SelectorOf(e.Labels).Matches(e))
}

func TestValidate(t *testing.T) {
	ok := directory.Entry{Name: "e-0", NICs: 2, Addrs: addrs("e", 4), Labels: map[string]string{"role": "x"}}
	require.NoError(t, ok.Validate())
	bad := map[string]directory.Entry{
		"no name":      {NICs: 1, Addrs: addrs("e", 1)},
		"slash":        {Name: "a/b", NICs: 1, Addrs: addrs("e", 1)},
		"zero nics":    {Name: "e", NICs: 0, Addrs: addrs("e", 1)},
		"5 nics":       {Name: "e", NICs: 5, Addrs: addrs("e", 5)},
		"not multiple": {Name: "e", NICs: 2, Addrs: addrs("e", 3)},
		"no addrs":     {Name: "e", NICs: 1},
		"empty addr":   {Name: "e", NICs: 1, Addrs: []fabric.Address{{}}},
		"repeated":     {Name: "e", NICs: 2, Addrs: append(addrs("e", 1), addrs("e", 1)...)},
		"label value":  {Name: "e", NICs: 1, Addrs: addrs("e", 1), Labels: map[string]string{"k": strings.Repeat("v", directory.MaxLabelValueLen+1)}},
		"label key":    {Name: "e", NICs: 1, Addrs: addrs("e", 1), Labels: map[string]string{"k=": "v"}},
	}
	for what, e := range bad {
		require.ErrorIs(t, e.Validate(), directory.ErrInvalid, what)
		_, err := directory.EncodeEntry(e)
		require.ErrorIs(t, err, directory.ErrInvalid, what)
	}
	// Many labels, each valid, make an entry over MaxValueSize.
	big := ok.Clone()
	big.Labels = map[string]string{}
	for i := range directory.MaxLabels {
		big.Labels[fmt.Sprintf("k%d", i)] = strings.Repeat("v", 400)
	}
	_, err := directory.EncodeEntry(big)
	require.ErrorIs(t, err, directory.ErrTooLarge)

	b, err := directory.EncodeEntry(ok)
	require.NoError(t, err)
	back, closing, err := directory.DecodeEntry("/p/engines/e-0", b)
	require.NoError(t, err)
	require.False(t, closing)
	require.Equal(t, ok, back)
	_, _, err = directory.DecodeEntry("/p/engines/other", b)
	require.ErrorIs(t, err, directory.ErrInvalid, "an entry under another name's key")
}

func TestMemory(t *testing.T) {
	testutil.LeakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := directory.NewMemory()
	defer m.Close()
	e := directory.Entry{Name: "p", NICs: 2, Addrs: addrs("p", 2), Labels: map[string]string{"role": "prefill"}}
	pub, err := m.Publish(ctx, e)
	require.NoError(t, err)
	_, err = m.Publish(ctx, e)
	require.ErrorIs(t, err, directory.ErrExists)
	got, err := m.Lookup(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, e, got)
	_, err = m.Lookup(ctx, "q")
	require.ErrorIs(t, err, directory.ErrNotFound)

	desc := fabric.Descriptor{Base: 64, Length: 128, NICs: []fabric.RemoteKey{
		{Addr: e.Addrs[0], Key: 1, Mode: fabric.AddrVirtual}, {Addr: e.Addrs[1], Key: 2, Mode: fabric.AddrVirtual}}}
	require.NoError(t, pub.PublishRegion(ctx, "r", desc, nil))
	r, err := m.Region(ctx, "p", "r")
	require.NoError(t, err)
	require.Equal(t, desc, r.Desc)
	short := desc
	short.NICs = short.NICs[:1]
	require.ErrorIs(t, pub.PublishRegion(ctx, "r", short, nil), directory.ErrNICMismatch)
	foreign := desc
	foreign.NICs = []fabric.RemoteKey{desc.NICs[0], {Addr: addrs("x", 1)[0], Mode: fabric.AddrVirtual}}
	require.ErrorIs(t, pub.PublishRegion(ctx, "r", foreign, nil), directory.ErrNICMismatch)
	badMode := desc
	badMode.NICs = []fabric.RemoteKey{{Addr: e.Addrs[0]}, {Addr: e.Addrs[1]}}
	require.ErrorIs(t, pub.PublishRegion(ctx, "r", badMode, nil), fabric.ErrBadEncoding)
	require.NoError(t, pub.WithdrawRegion(ctx, "r"))
	require.ErrorIs(t, pub.WithdrawRegion(ctx, "r"), directory.ErrNotFound)

	wctx, wcancel := context.WithCancel(ctx)
	events, err := m.Watch(wctx)
	require.NoError(t, err)
	require.Equal(t, directory.Joined, (<-events).Kind)
	require.NoError(t, pub.SetLabels(ctx, map[string]string{"role": "decode"}))
	ev := <-events
	require.Equal(t, directory.Updated, ev.Kind)
	require.Equal(t, "decode", ev.Entry.Labels["role"])
	got, err = m.Lookup(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, "decode", got.Labels["role"])
	require.ErrorIs(t, pub.SetLabels(ctx, map[string]string{"bad key": "x"}), directory.ErrInvalid)
	e = got
	require.NoError(t, m.Expire("p"))
	ev = <-events
	require.Equal(t, directory.Lost, ev.Kind)
	require.Equal(t, e, ev.Entry)
	require.ErrorIs(t, pub.PublishRegion(ctx, "r", desc, nil), directory.ErrNotFound, "an expired publication")
	require.NoError(t, pub.Close(ctx))
	wcancel()
	for range events {
	}
	require.ErrorIs(t, m.Expire("p"), directory.ErrNotFound)
	require.NoError(t, m.Close())
	_, err = m.Publish(ctx, e)
	require.ErrorIs(t, err, directory.ErrClosed)
}

func TestWaitFor(t *testing.T) {
	testutil.LeakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := directory.NewMemory()
	defer m.Close()
	prefill, err := directory.ParseSelector("role=prefill")
	require.NoError(t, err)
	pub := func(name, role string) directory.Publication {
		p, err := m.Publish(ctx, directory.Entry{Name: name, NICs: 1, Addrs: addrs(name, 1), Labels: map[string]string{"role": role}})
		require.NoError(t, err)
		return p
	}
	p1 := pub("p1", "prefill")
	pub("d0", "decode")
	done := make(chan []directory.Entry, 1)
	go func() {
		got, err := directory.WaitFor(ctx, m, prefill, 2)
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	// p1 leaves and two others join: the wait ends with those live.
	require.NoError(t, p1.Close(ctx))
	pub("p0", "prefill")
	pub("p2", "prefill")
	got := <-done
	require.Len(t, got, 2)
	require.Equal(t, "p0", got[0].Name)
	require.Equal(t, "p2", got[1].Name)

	short, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer scancel()
	_, err = directory.WaitFor(short, m, prefill, 3)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = directory.WaitFor(ctx, m, prefill, 0)
	require.ErrorIs(t, err, directory.ErrInvalid)
}
