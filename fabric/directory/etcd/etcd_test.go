package etcd_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
	"github.com/ferryrdma/ferry/fabric/directory/etcd"
	"github.com/ferryrdma/ferry/fabric/directory/etcd/etcdtest"
	"github.com/ferryrdma/ferry/internal/testutil"
	_ "github.com/ferryrdma/ferry/ipc" // the ipc transport
)

// ttl is the lease of the tests' publications: the least etcd grants by
// default (it raises shorter ones).
const ttl = 2 * time.Second

// childEnv is the publishing child's spec (see runChild).
const childEnv = "FERRY_DIRECTORY_TEST_CHILD"

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Roles{"publisher": func() error { return testutil.Exit(runChild(os.Getenv(childEnv))) }})
}

// runChild publishes the entry named in spec (endpoint|prefix|name),
// says "ready" on stdout and waits to be killed.
// With a fourth field "ipc" it publishes a real ipc engine and a region
// of it, "buf", instead of a made-up entry.
func runChild(spec string) int {
	parts := strings.Split(spec, "|")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{parts[0]}, Prefix: parts[1], TTL: ttl})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if len(parts) < 4 {
		if _, err := d.Publish(ctx, fakeEntry(parts[2], 1, map[string]string{"role": "prefill"})); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	} else if err := publishEngine(ctx, d, parts[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	time.Sleep(time.Minute) // killed long before
	return 2
}

// fakeEntry is an entry with made-up addresses: what a process that
// publishes but transfers nothing here needs.
func fakeEntry(name string, nics int, labels map[string]string) directory.Entry {
	e := directory.Entry{Name: name, NICs: nics, Labels: labels}
	for i := range nics {
		a, err := fabric.AddressFromRaw([]byte(fmt.Sprintf("%s-nic%d", name, i)))
		if err != nil {
			panic(err)
		}
		e.Addrs = append(e.Addrs, a)
	}
	return e
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, s *etcdtest.Server) *etcd.Directory {
	t.Helper()
	d, err := etcd.Open(ctxFor(t, 20*time.Second), etcd.Config{Endpoints: []string{s.Client}, Prefix: etcdtest.Prefix(t), TTL: ttl})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// next returns the next event other than Rejected, failing after 30 s.
func next(t *testing.T, ch <-chan directory.Event) directory.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "watch channel closed")
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no directory event within 30s")
	}
	return directory.Event{}
}

func TestPublishLookupWatch(t *testing.T) {
	testutil.LeakCheck(t)
	s := etcdtest.Start(t)
	d := open(t, s)
	ctx := ctxFor(t, time.Minute)

	pre, err := d.Publish(ctx, fakeEntry("prefill-0", 2, map[string]string{"role": "prefill", "model": "m1"}))
	require.NoError(t, err)
	events, err := d.Watch(ctx)
	require.NoError(t, err)
	ev := next(t, events)
	require.Equal(t, directory.Joined, ev.Kind, "entries present when the watch begins come first")
	require.Equal(t, "prefill-0", ev.Entry.Name)

	dec, err := d.Publish(ctx, fakeEntry("decode-0", 1, map[string]string{"role": "decode"}))
	require.NoError(t, err)
	ev = next(t, events)
	require.Equal(t, directory.Joined, ev.Kind)
	require.Equal(t, "decode-0", ev.Entry.Name)

	_, err = d.Publish(ctx, fakeEntry("decode-0", 1, nil))
	require.ErrorIs(t, err, directory.ErrExists, "one live publication per name")

	got, err := d.Lookup(ctx, "prefill-0")
	require.NoError(t, err)
	require.Equal(t, fakeEntry("prefill-0", 2, map[string]string{"role": "prefill", "model": "m1"}), got)
	_, err = d.Lookup(ctx, "nobody")
	require.ErrorIs(t, err, directory.ErrNotFound)

	sel, err := directory.ParseSelector("role=decode")
	require.NoError(t, err)
	list, err := d.Select(ctx, sel)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "decode-0", list[0].Name)
	list, err = d.Select(ctx, directory.Selector{})
	require.NoError(t, err)
	require.Len(t, list, 2)

	desc := fabric.Descriptor{Base: 4096, Length: 1 << 20, NICs: []fabric.RemoteKey{
		{Addr: pre.Entry().Addrs[0], Key: 7, Mode: fabric.AddrVirtual}, {Addr: pre.Entry().Addrs[1], Key: 8, Mode: fabric.AddrVirtual}}}
	require.NoError(t, pre.PublishRegion(ctx, "kv-cache", desc, map[string]string{"layers": "32"}))
	r, err := d.Region(ctx, "prefill-0", "kv-cache")
	require.NoError(t, err)
	require.Equal(t, desc, r.Desc)
	require.Equal(t, "32", r.Meta["layers"])
	require.NoError(t, pre.WithdrawRegion(ctx, "kv-cache"))
	_, err = d.Region(ctx, "prefill-0", "kv-cache")
	require.ErrorIs(t, err, directory.ErrNotFound)

	require.NoError(t, dec.SetLabels(ctx, map[string]string{"role": "decode", "load": "0.5"}))
	ev = next(t, events)
	require.Equal(t, directory.Updated, ev.Kind)
	require.Equal(t, "0.5", ev.Entry.Labels["load"])
	got, err = d.Lookup(ctx, "decode-0")
	require.NoError(t, err)
	require.Equal(t, "0.5", got.Labels["load"])
	require.ErrorIs(t, dec.SetLabels(ctx, map[string]string{"bad key": "x"}), directory.ErrInvalid)

	require.NoError(t, dec.Close(ctx))
	ev = next(t, events)
	require.Equal(t, directory.Closed, ev.Kind, "an orderly close is Closed, not Lost")
	require.Equal(t, "decode-0", ev.Entry.Name)
	_, err = d.Lookup(ctx, "decode-0")
	require.ErrorIs(t, err, directory.ErrNotFound)
	require.ErrorIs(t, dec.PublishRegion(ctx, "x", desc, nil), directory.ErrClosed)
	require.NoError(t, pre.Close(ctx))
	require.Equal(t, directory.Closed, next(t, events).Kind)
}

// TestLeaseExpiresOnKill: a publishing process killed with SIGKILL is
// reported Lost within about the TTL.
func TestLeaseExpiresOnKill(t *testing.T) {
	s := etcdtest.Start(t)
	d := open(t, s)
	ctx := ctxFor(t, time.Minute)
	events, err := d.Watch(ctx)
	require.NoError(t, err)

	child := testutil.Spawn(t, "publisher", testutil.SpawnOptions{Lines: true,
		Env: []string{childEnv + "=" + s.Client + "|" + etcdtest.Prefix(t) + "|child-0"}})
	require.Equal(t, "ready", child.ReadLine(time.Minute))
	ev := next(t, events)
	require.Equal(t, directory.Joined, ev.Kind)
	require.Equal(t, "child-0", ev.Entry.Name)

	killed := time.Now()
	child.Kill()
	ev = next(t, events)
	seen := time.Since(killed)
	require.Equal(t, directory.Lost, ev.Kind, "a killed publisher is Lost, not Closed")
	require.Equal(t, "child-0", ev.Entry.Name)
	t.Logf("SIGKILL to Lost event: %v (lease TTL %v)", seen.Round(time.Millisecond), ttl)
	_, err = d.Lookup(ctx, "child-0")
	require.ErrorIs(t, err, directory.ErrNotFound)
}

// TestHostileEntries: values a buggy or hostile writer puts under the
// prefix are refused with typed errors, and do not hide valid entries.
func TestHostileEntries(t *testing.T) {
	s := etcdtest.Start(t)
	d := open(t, s)
	ctx := ctxFor(t, time.Minute)
	good, err := d.Publish(ctx, fakeEntry("good", 2, nil))
	require.NoError(t, err)
	events, err := d.Watch(ctx)
	require.NoError(t, err)
	require.Equal(t, directory.Joined, next(t, events).Kind)

	addr := good.Entry().Addrs[0].String()
	eng := etcdtest.Prefix(t) + "/engines/"
	cases := []struct {
		name, value string
		want        error
	}{
		{"junk", "{not json", directory.ErrInvalid},
		{"nics-count", `{"v":1,"name":"nics-count","nics":3,"addrs":["` + addr + `"],"state":"up"}`, directory.ErrInvalid},
		{"too-many-nics", `{"v":1,"name":"too-many-nics","nics":9,"addrs":["` + addr + `"],"state":"up"}`, directory.ErrInvalid},
		{"bad-addr", `{"v":1,"name":"bad-addr","nics":1,"addrs":["zz"],"state":"up"}`, directory.ErrInvalid},
		{"other-name", `{"v":1,"name":"good","nics":1,"addrs":["` + addr + `"],"state":"up"}`, directory.ErrInvalid},
		{"version", `{"v":2,"name":"version","nics":1,"addrs":["` + addr + `"],"state":"up"}`, directory.ErrInvalid},
		{"huge", `{"v":1,"name":"huge","nics":1,"addrs":["` + addr + `"],"state":"up","labels":{"x":"` + strings.Repeat("a", 20000) + `"}}`, directory.ErrTooLarge},
	}
	for _, c := range cases {
		_, err := d.Client().Put(ctx, eng+c.name, c.value)
		require.NoError(t, err)
		_, err = d.Lookup(ctx, c.name)
		var ee *directory.EntryError
		require.ErrorAs(t, err, &ee, c.name)
		require.ErrorIs(t, err, c.want, c.name)
		ev := next(t, events)
		require.Equal(t, directory.Rejected, ev.Kind, c.name)
		require.ErrorIs(t, ev.Err, c.want, c.name)
	}
	list, err := d.Select(ctx, directory.Selector{})
	require.Len(t, list, 1, "valid entries are still listed")
	require.Equal(t, "good", list[0].Name)
	require.ErrorIs(t, err, directory.ErrInvalid, "and the rejected ones reported")

	// Regions that do not match their engine.
	reg := etcdtest.Prefix(t) + "/regions/good/"
	other, err := fabric.AddressFromRaw([]byte("someone-else"))
	require.NoError(t, err)
	oneNIC := fabric.Descriptor{Base: 1, Length: 64, NICs: []fabric.RemoteKey{{Addr: good.Entry().Addrs[0], Mode: fabric.AddrVirtual}}}
	foreign := fabric.Descriptor{Base: 1, Length: 64, NICs: []fabric.RemoteKey{{Addr: good.Entry().Addrs[0], Mode: fabric.AddrVirtual}, {Addr: other, Mode: fabric.AddrVirtual}}}
	require.ErrorIs(t, good.PublishRegion(ctx, "r", oneNIC, nil), directory.ErrNICMismatch, "checked at publish")
	require.ErrorIs(t, good.PublishRegion(ctx, "r", foreign, nil), directory.ErrNICMismatch)
	for name, desc := range map[string]fabric.Descriptor{"one-nic": oneNIC, "foreign": foreign} {
		v := fmt.Sprintf(`{"v":1,"engine":"good","name":%q,"desc":%q}`, name, desc.String())
		_, err := d.Client().Put(ctx, reg+name, v)
		require.NoError(t, err)
		_, err = d.Region(ctx, "good", name)
		require.ErrorIs(t, err, directory.ErrNICMismatch, name)
	}
	_, err = d.Client().Put(ctx, reg+"garbled", `{"v":1,"engine":"good","name":"garbled","desc":"fd01"}`)
	require.NoError(t, err)
	_, err = d.Region(ctx, "good", "garbled")
	require.ErrorIs(t, err, directory.ErrInvalid)
	require.ErrorIs(t, err, fabric.ErrBadEncoding)
	_, err = d.Client().Delete(ctx, etcdtest.Prefix(t), clientv3.WithPrefix())
	require.NoError(t, err)
}

// TestEngineLosesPeerOnLeave: engine a transfers to b; b's directory
// client stops renewing (as if its process hung or was cut off), its
// entry expires, and a's transfers to b fail with a *PeerError whose
// cause is the expired entry, without a's own liveness checks.
func TestEngineLosesPeerOnLeave(t *testing.T) {
	testutil.LeakCheck(t)
	s := etcdtest.Start(t)
	ctx := ctxFor(t, time.Minute)
	// A lost peer lets one op through per liveness interval (at least
	// 100 ms, also when the checks are off), and b is alive: the write
	// after the loss must come within that interval to be refused, which a
	// loaded machine's stall can outlast. An interval longer than the
	// test keeps the retry (and a's own check of b) from happening in it.
	a, b, write := memPair(t, 10*time.Minute)
	da, db := open(t, s), open(t, s)
	stop, err := directory.LoseOnLeave(ctx, da, a)
	require.NoError(t, err)
	defer stop()
	eb, err := directory.EntryOf(b, "b", nil)
	require.NoError(t, err)
	_, err = db.Publish(ctx, eb)
	require.NoError(t, err)
	require.NoError(t, write())

	lost := make(chan *fabric.PeerError, 4)
	a.OnPeerLost(func(pe *fabric.PeerError) { lost <- pe })
	require.NoError(t, db.Close()) // renewal stops; the entry stays until its lease runs out
	stopped := time.Now()
	select {
	case pe := <-lost:
		t.Logf("renewal stopped to peer lost in the engine: %v (lease TTL %v)", time.Since(stopped).Round(time.Millisecond), ttl)
		require.Equal(t, eb.Main(), pe.Peer)
		require.ErrorIs(t, pe, directory.ErrEntryLost)
	case <-time.After(30 * time.Second):
		t.Fatal("peer not declared lost within 30s")
	}
	err = write()
	var pe *fabric.PeerError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, directory.ErrEntryLost)
}

// TestEtcdRestart: the server is killed and restarted mid-run. While it
// is down the engines keep transferring and nothing is declared lost;
// afterwards the publication is still there (renewed again), a watch
// started before still reports, and new regions publish.
func TestEtcdRestart(t *testing.T) {
	testutil.LeakCheck(t)
	s := etcdtest.Start(t)
	ctx := ctxFor(t, 2*time.Minute)
	a, b, write := memPair(t, -1)
	da, db := open(t, s), open(t, s)
	stop, err := directory.LoseOnLeave(ctx, da, a)
	require.NoError(t, err)
	defer stop()
	events, err := da.Watch(ctx)
	require.NoError(t, err)
	eb, err := directory.EntryOf(b, "b", nil)
	require.NoError(t, err)
	pb, err := db.Publish(ctx, eb)
	require.NoError(t, err)
	require.Equal(t, directory.Joined, next(t, events).Kind)
	require.NoError(t, write())

	s.Kill()
	// Down for longer than the TTL: the client's renewal gives up and
	// the publication asks again until the server is back.
	downUntil := time.Now().Add(2 * ttl)
	writes := 0
	for time.Now().Before(downUntil) {
		require.NoError(t, write(), "transfers go on while the directory is down")
		writes++
		time.Sleep(20 * time.Millisecond)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = da.Lookup(short, "b")
	cancel()
	require.Error(t, err, "a lookup while the server is down fails by its deadline")
	t.Logf("%d writes while etcd was down", writes)

	s.Start()
	require.Eventually(t, func() bool {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := da.Lookup(c, "b")
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "entry is back after the restart")
	// Past a TTL the entry must still be there: renewed, not a leftover.
	time.Sleep(2 * ttl)
	_, err = da.Lookup(ctx, "b")
	require.NoError(t, err, "entry renewed after the restart")
	require.NoError(t, a.PeerStatus(eb.Main()), "no loss declared for the outage")
	require.NoError(t, write())

	desc, err := fabric.ParseDescriptor(regionDesc(t, b, eb))
	require.NoError(t, err)
	require.NoError(t, pb.PublishRegion(ctx, "after", desc, nil))
	_, err = da.Region(ctx, "b", "after")
	require.NoError(t, err)

	_, err = db.Publish(ctx, fakeEntry("c", 1, nil))
	require.NoError(t, err)
	for {
		ev := next(t, events)
		if ev.Kind == directory.Joined && ev.Entry.Name == "c" {
			break
		}
		require.NotEqual(t, directory.Lost, ev.Kind, "nothing lost across the restart: %v", ev)
	}
}

// TestEtcdRestartEmpty: the server comes back with no data (a new
// cluster): publications notice their lease is gone and publish again,
// and watches notice the server is not the one they followed.
func TestEtcdRestartEmpty(t *testing.T) {
	s := etcdtest.Start(t)
	ctx := ctxFor(t, 2*time.Minute)
	d := open(t, s)
	p, err := d.Publish(ctx, fakeEntry("p", 1, nil))
	require.NoError(t, err)
	desc := fabric.Descriptor{Base: 1, Length: 64, NICs: []fabric.RemoteKey{{Addr: p.Entry().Addrs[0], Mode: fabric.AddrVirtual}}}
	require.NoError(t, p.PublishRegion(ctx, "r", desc, nil))
	watcher := open(t, s)
	events, err := watcher.Watch(ctx)
	require.NoError(t, err)
	require.Equal(t, directory.Joined, next(t, events).Kind)
	s.Kill()
	require.NoError(t, os.RemoveAll(s.DataDir))
	s.Start()
	probe := open(t, s)
	require.Eventually(t, func() bool {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := probe.Region(c, "p", "r")
		return err == nil
	}, 60*time.Second, 100*time.Millisecond, "entry and region published again")
	require.NoError(t, p.Close(ctx))
	_, err = probe.Lookup(ctx, "p")
	require.ErrorIs(t, err, directory.ErrNotFound)
	// The watch begun before follows the new server: it sees the close,
	// whatever the new server's revisions. It notices the new server
	// either by its watch being canceled while the server had no leader,
	// or by the periodic check (lostData); here the first usually wins.
	for {
		ev := next(t, events)
		if ev.Kind == directory.Closed {
			require.Equal(t, "p", ev.Entry.Name)
			break
		}
		require.Equal(t, directory.Joined, ev.Kind, "only the entry published again before: %v", ev)
	}
}

func TestParseURL(t *testing.T) {
	cfg, err := etcd.ParseURL("etcd://127.0.0.1:2379,127.0.0.1:2380/serving/a")
	require.NoError(t, err)
	require.Equal(t, []string{"http://127.0.0.1:2379", "http://127.0.0.1:2380"}, cfg.Endpoints)
	require.Equal(t, "/serving/a", cfg.Prefix)
	cfg, err = etcd.ParseURL("etcd://h:1")
	require.NoError(t, err)
	require.Equal(t, "/ferry", cfg.Prefix)
	for _, bad := range []string{"http://h:1/x", "etcd:///x", "::"} {
		_, err := etcd.ParseURL(bad)
		require.ErrorIs(t, err, directory.ErrInvalid, bad)
	}
	_, err = etcd.Open(context.Background(), etcd.Config{Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "x"})
	require.ErrorIs(t, err, directory.ErrInvalid)
}

// publishEngine opens an ipc engine, registers a buffer and publishes
// both: the killed target of TestKilledEngineLost.
func publishEngine(ctx context.Context, d *etcd.Directory, name string) error {
	eng, err := fabric.Open(ctx, fabric.Config{Transport: "ipc"})
	if err != nil {
		return err
	}
	buf, err := fabric.AllocHost(1 << 16)
	if err != nil {
		return err
	}
	r, err := eng.RegisterHost(buf, fabric.AccessRemoteWrite)
	if err != nil {
		return err
	}
	desc, err := r.Descriptor()
	if err != nil {
		return err
	}
	e, err := directory.EntryOf(eng, name, map[string]string{"role": "prefill"})
	if err != nil {
		return err
	}
	pub, err := d.Publish(ctx, e)
	if err != nil {
		return err
	}
	return pub.PublishRegion(ctx, "buf", desc, nil)
}

// targetChild starts a child publishing an ipc engine and its region
// "buf", and returns it with a's write of 4 KiB into that region.
func targetChild(t *testing.T, ctx context.Context, s *etcdtest.Server, d *etcd.Directory, a *fabric.Engine) (*testutil.Child, func() error) {
	t.Helper()
	child := testutil.Spawn(t, "publisher", testutil.SpawnOptions{Lines: true,
		Env: []string{childEnv + "=" + s.Client + "|" + etcdtest.Prefix(t) + "|target|ipc"}})
	require.Equal(t, "ready", child.ReadLine(time.Minute))

	r, err := d.Region(ctx, "target", "buf")
	require.NoError(t, err)
	sbuf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sbuf.Free() })
	src, err := a.RegisterHost(sbuf, fabric.AccessLocal)
	require.NoError(t, err)
	return child, func() error {
		tr := fabric.NewTransfer()
		if err := a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: r.Desc}, fabric.Notify(tr)); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return tr.Wait(wctx)
	}
}

// writeUntilFail writes every 20 ms until a write fails or 30 s pass, and
// returns the time taken, the writes that succeeded and the error.
func writeUntilFail(write func() error) (took time.Duration, writes int, err error) {
	start := time.Now()
	for time.Since(start) < 30*time.Second {
		if err = write(); err != nil {
			break
		}
		writes++
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start), writes, err
}

// ipcWriter opens the writing engine: ipc, checking its peers itself every
// liveness interval (negative: never), tied to d by LoseOnLeave.
func ipcWriter(t *testing.T, ctx context.Context, d *etcd.Directory, liveness time.Duration) *fabric.Engine {
	a, err := fabric.Open(ctx, fabric.Config{Transport: "ipc", LivenessInterval: liveness})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close(context.Background())) })
	stop, err := directory.LoseOnLeave(ctx, d, a)
	require.NoError(t, err)
	t.Cleanup(stop)
	return a
}

// TestKilledEngineLost: an engine in another process, found through the
// directory and written to over ipc, is SIGKILLed: writes to it fail with
// ErrPeerLost. ipc sees a dead process itself, at once; the directory's
// Lost follows within the TTL.
func TestKilledEngineLost(t *testing.T) {
	s := etcdtest.Start(t)
	ctx := ctxFor(t, time.Minute)
	d := open(t, s)
	a := ipcWriter(t, ctx, d, -1)
	child, write := targetChild(t, ctx, s, d, a)
	require.NoError(t, write())
	child.Kill()
	took, writes, err := writeUntilFail(write)
	require.ErrorIs(t, err, fabric.ErrPeerLost)
	t.Logf("SIGKILL to the first failed write: %v (%d writes before): %v", took.Round(time.Millisecond), writes, err)
}

// TestStoppedEngineLost: the target process is stopped (SIGSTOP: hung, as
// far as anyone can tell) rather than killed. ipc writes into its memory
// go on completing, since nothing of the target takes part in them; once
// its lease runs out the directory reports it Lost, and the writer's
// writes fail with a *fabric.PeerError whose cause is the expired entry.
// Continued, the target publishes again, and writes to it succeed again.
func TestStoppedEngineLost(t *testing.T) {
	s := etcdtest.Start(t)
	ctx := ctxFor(t, time.Minute)
	d := open(t, s)
	// A lost peer refuses writes for a liveness interval (at least
	// 100 ms, also with the checks off), then lets one through, which
	// succeeds here (the stopped target's memory takes it) and brings the
	// peer back: the write after the loss must come within the interval
	// to fail, which a loaded machine's stall of 100 ms outlasted. 3 s
	// leaves no such stall, and is still short for the way back below.
	// a's own checks every 3 s find the stopped process alive; the loss
	// must still be the directory's (its cause is checked).
	a := ipcWriter(t, ctx, d, 3*time.Second)
	events, err := d.Watch(ctx)
	require.NoError(t, err)
	child, write := targetChild(t, ctx, s, d, a)
	require.Equal(t, directory.Joined, next(t, events).Kind)
	require.NoError(t, write())

	require.NoError(t, child.Signal(syscall.SIGSTOP))
	took, writes, err := writeUntilFail(write)
	var pe *fabric.PeerError
	require.ErrorAs(t, err, &pe, "writes to a hung engine must fail once its lease ran out")
	require.ErrorIs(t, err, directory.ErrEntryLost)
	require.Equal(t, directory.Lost, next(t, events).Kind)
	t.Logf("SIGSTOP to the first failed write: %v (%d writes completed meanwhile; lease TTL %v)", took.Round(time.Millisecond), writes, ttl)

	require.NoError(t, child.Signal(syscall.SIGCONT))
	ev := next(t, events)
	require.Equal(t, directory.Joined, ev.Kind, "the continued target publishes again")
	require.Equal(t, "target", ev.Entry.Name)
	require.Eventually(t, func() bool { return write() == nil }, 30*time.Second, 100*time.Millisecond,
		"writes to it succeed again (one let through as a probe completes)")
}
