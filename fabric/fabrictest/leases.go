package fabrictest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// runLeases runs the lease and notification scenarios.
func runLeases(t *testing.T, p Params) {
	t.Run("LeaseRetiredDropped", func(t *testing.T) { testLeaseRetired(t, p) })
	t.Run("LeaseReuseNotFedByLateWrites", func(t *testing.T) { testLeaseReuse(t, p) })
	t.Run("NotifyAfterWrites", func(t *testing.T) { testNotifyAfterWrites(t, p) })
	t.Run("NotifyOrder", func(t *testing.T) { testNotifyOrder(t, p) })
	t.Run("NotifyLimit", func(t *testing.T) { testNotifyLimit(t, p) })
	t.Run("NotifyEveryWrite", func(t *testing.T) { testNotifyEveryWrite(t, p) })
	t.Run("NotifyScatter", func(t *testing.T) { testNotifyScatter(t, p) })
	t.Run("NotifyQueued", func(t *testing.T) { testNotifyQueued(t, p) })
}

// waitStat polls get until it reaches want, failing after Timeout.
func waitStat(tb testing.TB, what string, want uint64, get func() uint64) {
	tb.Helper()
	deadline := time.Now().Add(Timeout)
	for get() < want {
		if time.Now().After(deadline) {
			tb.Fatalf("waited for %s to reach %d, it is %d", what, want, get())
		}
		time.Sleep(time.Millisecond)
	}
}

func immTo(env *Env, imm uint32) func(c fabric.Completion) error {
	return func(c fabric.Completion) error {
		return env.A.SubmitImm(fabric.ImmWrite{Imm: imm, Dst: env.Desc}, c)
	}
}

func dropped(e *fabric.Engine) func() uint64 {
	return func() uint64 { return e.Stats().ImmsDropped }
}

// testLeaseRetired: a lease's immediates that arrive before its counter
// are held for it; once retired, its values are dropped and counted (not
// held, not handed to OnImm), and no counter can be registered for them.
func testLeaseRetired(t *testing.T, p Params) {
	env := NewEnv(t, p)
	imms := Collect(env.B)
	l, err := env.B.LeaseImms(3)
	require.NoError(t, err)
	require.Equal(t, 3, l.Len())
	require.GreaterOrEqual(t, l.First(), fabric.LeaseBase)
	for range 3 {
		require.NoError(t, Wait(t, immTo(env, l.First()+1)))
	}
	// Held for the live lease (the writes' completions can come before
	// the target counted their immediates).
	waitStat(t, "unclaimed", 3, func() uint64 { return env.B.Stats().Unclaimed })
	Settle()
	require.EqualValues(t, 3, env.B.Stats().Unclaimed, "held for the live lease")
	require.Zero(t, imms.Count(l.First()+1), "a lease value never goes to OnImm")
	c, err := env.B.ImmCounter(l.First() + 1)
	require.NoError(t, err)
	require.NoError(t, c.Wait(Ctx(t), 3), "what arrived before the counter is its")
	// Held again, then retired: the held ones are dropped.
	require.NoError(t, Wait(t, immTo(env, l.First()+2)))
	waitStat(t, "unclaimed", 1, func() uint64 { return env.B.Stats().Unclaimed })
	require.NoError(t, l.Retire())
	require.NoError(t, l.Retire(), "retire twice")
	require.True(t, l.Retired())
	require.Zero(t, env.B.Stats().Unclaimed)
	require.ErrorIs(t, c.Wait(Ctx(t), 1), fabric.ErrRemoved, "retire removes the lease's counters")
	base := env.B.Stats().ImmsDropped
	require.EqualValues(t, 1, base, "the held immediate was dropped")
	// Late writes to the retired values.
	for i := range 3 {
		require.NoError(t, Wait(t, immTo(env, l.First()+uint32(i))))
	}
	waitStat(t, "dropped", base+3, dropped(env.B))
	Settle()
	require.Equal(t, base+3, env.B.Stats().ImmsDropped)
	require.Zero(t, env.B.Stats().Unclaimed)
	require.Zero(t, imms.n.Load())
	_, err = env.B.ImmCounter(l.First())
	require.ErrorIs(t, err, fabric.ErrNotLeased)
	_, _, err = env.B.ExpectImm(fabric.LeaseBase+5, 1, func() bool { return false })
	require.ErrorIs(t, err, fabric.ErrNotLeased, "a lease-range value picked by hand")
	_, err = l.Mailbox()
	require.ErrorIs(t, err, fabric.ErrNotLeased)
	_, err = env.B.LeaseImms(0)
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
	_, err = env.B.LeaseImms(fabric.MaxLeaseImms + 1)
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
}

// testLeaseReuse: with every other slot taken, a new lease reuses the
// slots of a retired one, under another value; the retired lease's late
// writes are dropped and never counted by the new lease.
func testLeaseReuse(t *testing.T, p Params) {
	env := NewEnv(t, p)
	first, err := env.B.LeaseImms(1)
	require.NoError(t, err)
	c, err := env.B.ImmCounter(first.First())
	require.NoError(t, err)
	require.NoError(t, Wait(t, immTo(env, first.First())))
	require.NoError(t, c.Wait(Ctx(t), 1))
	// Take every other slot.
	var rest []*fabric.Lease
	defer func() {
		for _, l := range rest {
			_ = l.Retire()
		}
	}()
	for size := fabric.MaxLeaseImms; size >= 1; size /= 2 {
		for {
			l, err := env.B.LeaseImms(size)
			if errors.Is(err, fabric.ErrLeasesExhausted) {
				break
			}
			require.NoError(t, err)
			rest = append(rest, l)
		}
	}
	_, err = env.B.LeaseImms(1)
	require.ErrorIs(t, err, fabric.ErrLeasesExhausted)
	require.NoError(t, first.Retire())
	again, err := env.B.LeaseImms(1)
	require.NoError(t, err)
	defer func() { _ = again.Retire() }()
	const slotMask = 1<<16 - 1
	require.Equal(t, first.First()&slotMask, again.First()&slotMask, "the retired lease's slot is the only one free")
	require.NotEqual(t, first.First(), again.First(), "a re-leased slot has another value")
	c2, err := env.B.ImmCounter(again.First())
	require.NoError(t, err)
	base := env.B.Stats().ImmsDropped
	for range 5 {
		require.NoError(t, Wait(t, immTo(env, first.First())))
	}
	require.NoError(t, Wait(t, immTo(env, again.First())))
	require.NoError(t, c2.Wait(Ctx(t), 1))
	waitStat(t, "dropped", base+5, dropped(env.B))
	Settle()
	require.Zero(t, c2.Count(), "late writes of the retired lease fed the new one")
	require.Equal(t, base+5, env.B.Stats().ImmsDropped)
}

// testNotifyAfterWrites: when the notification is handed over, every byte
// of its request is in place at the target (checked right then), for a
// sharded single write, a paged write and a request that also carries
// immediates; the payload arrives intact.
func testNotifyAfterWrites(t *testing.T, p Params) {
	env := NewEnv(t, p)
	src, dst := env.Src.Bytes(), env.Dst.Bytes()
	type req struct {
		name   string
		submit func(n *fabric.Notification, l *fabric.Lease, c fabric.Completion) error
		check  func() bool
		imms   int
	}
	const size = 3<<20 + 17
	idx := []uint32{5, 0, 3, 1}
	reqs := []req{
		{"single", func(n *fabric.Notification, _ *fabric.Lease, c fabric.Completion) error {
			return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, SrcOffset: 7, Length: size, Dst: env.Desc,
				DstOffset: 3, Notify: n}, c)
		}, func() bool { return bytes.Equal(src[7:7+size], dst[3:3+size]) }, 0},
		{"paged", func(n *fabric.Notification, _ *fabric.Lease, c fabric.Completion) error {
			return env.A.SubmitPaged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: idx, SrcStride: 65536, Dst: env.Desc,
				DstPages: idx, DstStride: 65536, DstOffset: 11, Length: 65536, Notify: n}, c)
		}, func() bool {
			for _, i := range idx {
				o := int(i) * 65536
				if !bytes.Equal(src[o:o+65536], dst[o+11:o+11+65536]) {
					return false
				}
			}
			return true
		}, 0},
		{"single with immediates", func(n *fabric.Notification, l *fabric.Lease, c fabric.Completion) error {
			return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, SrcOffset: 100, Length: 1 << 20, Dst: env.Desc,
				DstOffset: 200, Imm: fabric.Immediate(l.First()), Route: fabric.Sharded(0), Notify: n}, c)
		}, func() bool { return bytes.Equal(src[100:100+1<<20], dst[200:200+1<<20]) },
			fabric.ExpectedImms(fabric.SingleShape(fabric.Sharded(0)), p.NICs, p.targetNICs())},
	}
	for _, r := range reqs {
		clear(dst)
		l, err := env.B.LeaseImms(1)
		require.NoError(t, err)
		mb, err := l.Mailbox()
		require.NoError(t, err)
		// The mailbox travels to the initiator encoded.
		enc, err := mb.MarshalBinary()
		require.NoError(t, err)
		var got fabric.Mailbox
		require.NoError(t, got.UnmarshalBinary(enc))
		payload := []byte("done: " + r.name)
		tr := fabric.NewTransfer()
		require.NoError(t, r.submit(&fabric.Notification{To: got, Payload: payload}, l, fabric.Notify(tr)), r.name)
		n, err := l.WaitNotification(Ctx(t))
		require.NoError(t, err, r.name)
		require.True(t, r.check(), "%s: bytes not all in place when the notification arrived", r.name)
		require.Equal(t, payload, n.Payload, r.name)
		require.Equal(t, l.First(), n.Lease)
		require.NoError(t, tr.Wait(Ctx(t)), r.name)
		if r.imms > 0 {
			c, err := env.B.ImmCounter(l.First())
			require.NoError(t, err)
			require.NoError(t, c.Wait(Ctx(t), int64(r.imms)), "%s: the request's immediates", r.name)
		}
		require.NoError(t, l.Retire())
		_, err = l.WaitNotification(Ctx(t))
		require.ErrorIs(t, err, fabric.ErrNotLeased)
	}
	// A notification to a retired lease is dropped at the target.
	l, err := env.B.LeaseImms(1)
	require.NoError(t, err)
	mb, err := l.Mailbox()
	require.NoError(t, err)
	require.NoError(t, l.Retire())
	base := env.B.Stats().ImmsDropped
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 64, Dst: env.Desc,
			Notify: &fabric.Notification{To: mb, Payload: []byte("late")}}, c)
	}))
	waitStat(t, "dropped", base+1, dropped(env.B))
}

// testNotifyOrder: notifications reach the target in the order their
// requests completed at the initiator, over many leases in flight at once.
func testNotifyOrder(t *testing.T, p Params) {
	env := NewEnv(t, p)
	const n = 24
	leases := make([]*fabric.Lease, n)
	var mu sync.Mutex
	var completed []int
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range leases {
		l, err := env.B.LeaseImms(1)
		require.NoError(t, err)
		leases[i] = l
		t.Cleanup(func() { _ = l.Retire() })
		mb, err := l.Mailbox()
		require.NoError(t, err)
		// Sizes vary so that requests finish out of submission order on
		// transports that allow it.
		size := uint64(1+(i*7919)%17) << 14
		err = env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: size, Dst: env.Desc,
			DstOffset: uint64(i) * 65536, Route: fabric.Sharded(0),
			Notify: &fabric.Notification{To: mb, Payload: fmt.Appendf(nil, "%d", i)}},
			fabric.OnDone(func(err error) {
				if err == nil {
					mu.Lock()
					completed = append(completed, i)
					mu.Unlock()
				}
				wg.Done()
			}))
		require.NoError(t, err)
	}
	got := make([]fabric.Notice, n)
	for i, l := range leases {
		var err error
		got[i], err = l.WaitNotification(Ctx(t))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), string(got[i].Payload))
	}
	wg.Wait()
	slices.SortFunc(got, func(a, b fabric.Notice) int { return int(a.Seq) - int(b.Seq) })
	arrived := make([]int, n)
	for i, g := range got {
		_, err := fmt.Sscan(string(g.Payload), &arrived[i])
		require.NoError(t, err)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, completed, arrived, "arrival order at the target against completion order at the initiator")
}

// testNotifyLimit: a payload of MaxNotifyPayload bytes arrives intact; one
// byte more is refused at submit with ErrNotifyTooLarge, and so is a
// mailbox that is not a lease's.
func testNotifyLimit(t *testing.T, p Params) {
	env := NewEnv(t, p)
	l, mb := leaseMailbox(t, env.B)
	big := env.Src.Bytes()[:fabric.MaxNotifyPayload+1]
	err := env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 1, Dst: env.Desc,
		Notify: &fabric.Notification{To: mb, Payload: big}}, fabric.Completion{})
	require.ErrorIs(t, err, fabric.ErrNotifyTooLarge)
	bad := mb
	bad.Imm = 5
	err = env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 1, Dst: env.Desc,
		Notify: &fabric.Notification{To: bad}}, fabric.Completion{})
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 1, Dst: env.Desc,
			Notify: &fabric.Notification{To: mb, Payload: big[:fabric.MaxNotifyPayload]}}, c)
	}))
	n, err := l.WaitNotification(Ctx(t))
	require.NoError(t, err)
	require.Equal(t, big[:fabric.MaxNotifyPayload], n.Payload)
	// An empty payload is a notification too.
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 1, Dst: env.Desc,
			Notify: &fabric.Notification{To: mb}}, c)
	}))
	n, err = l.WaitNotification(Ctx(t))
	require.NoError(t, err)
	require.Empty(t, n.Payload)
}

// testNotifyEveryWrite: over many requests striped over every NIC, each
// request's bytes are all in place when its notification is handed over
// (checked right then, before anything else runs at the target). On a
// multi-NIC tcp;ofi_rxm group this fails unless the request's writes ask
// for delivery completion: tcp completes a write once sent, and the
// notification, which travels through NIC 0, would overtake a write
// through another NIC.
func testNotifyEveryWrite(t *testing.T, p Params) {
	env := NewEnv(t, p)
	src, dst := env.Src.Bytes(), env.Dst.Bytes()
	const size = 1 << 20
	rounds := 64
	if testing.Short() {
		rounds = 16
	}
	l, mb := leaseMailbox(t, env.B)
	for i := range rounds {
		slot := i % (BufSize / size)
		from := (i * 4099) % (BufSize - size)
		to := dst[slot*size : slot*size+size]
		clear(to)
		// Alternate sharded single writes and paged writes, whose pages
		// are spread over the NICs.
		var submit func(c fabric.Completion) error
		want := src[from : from+size]
		if i%2 == 0 {
			submit = func(c fabric.Completion) error {
				return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, SrcOffset: uint64(from), Length: size,
					Dst: env.Desc, DstOffset: uint64(slot * size), Route: fabric.Sharded(0),
					Notify: &fabric.Notification{To: mb, Payload: fmt.Appendf(nil, "%d", i)}}, c)
			}
		} else {
			const page = 16 << 10
			idx := make([]uint32, size/page)
			for j := range idx {
				idx[j] = uint32(j)
			}
			submit = func(c fabric.Completion) error {
				return env.A.SubmitPaged(fabric.PagedWrite{Src: env.SrcReg, SrcOffset: uint64(from), SrcPages: idx,
					SrcStride: page, Dst: env.Desc, DstOffset: uint64(slot * size), DstPages: idx, DstStride: page,
					Length: page, Notify: &fabric.Notification{To: mb, Payload: fmt.Appendf(nil, "%d", i)}}, c)
			}
		}
		tr := fabric.NewTransfer()
		require.NoError(t, submit(fabric.Notify(tr)))
		n, err := l.WaitNotification(Ctx(t))
		require.NoError(t, err)
		if !bytes.Equal(want, to) {
			first := 0
			for first < size && want[first] == to[first] {
				first++
			}
			t.Fatalf("request %d: byte %d of %d not in place when its notification arrived", i, first, size)
		}
		require.Equal(t, fmt.Sprint(i), string(n.Payload))
		require.NoError(t, tr.Wait(Ctx(t)))
	}
}

// testNotifyScatter: a scatter to two target engines carries one
// notification per target engine; each target finds all of its ranges in
// place when its notification is handed over, over both routings that
// spread a scatter over the NICs.
func testNotifyScatter(t *testing.T, p Params) {
	env := NewEnv(t, p)
	dst2, err := fabric.AllocHost(BufSize)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dst2.Free() })
	c := OpenEngine(t, p.target())
	reg2, err := c.RegisterHost(dst2, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc2, err := reg2.Descriptor()
	require.NoError(t, err)
	src := env.Src.Bytes()
	const size = 512 << 10
	type peer struct {
		dst  []byte
		desc fabric.Descriptor
		e    *fabric.Engine
	}
	peers := []peer{{env.Dst.Bytes(), env.Desc, env.B}, {dst2.Bytes(), desc2, c}}
	for round, route := range []fabric.ScatterRouting{fabric.ShardPeers(), fabric.ShardBytes(), fabric.ShardPeers(), fabric.ShardBytes()} {
		var ts []fabric.ScatterTarget
		var nts []fabric.Notification
		leases := make([]*fabric.Lease, len(peers))
		for i, pr := range peers {
			clear(pr.dst)
			l, err := pr.e.LeaseImms(1)
			require.NoError(t, err)
			leases[i] = l
			mb, err := l.Mailbox()
			require.NoError(t, err)
			nts = append(nts, fabric.Notification{To: mb, Payload: fmt.Appendf(nil, "%d/%d", round, i)})
			// Three ranges per peer, from distinct parts of the source.
			for k := range 3 {
				ts = append(ts, fabric.ScatterTarget{Dst: pr.desc, Length: size,
					SrcOffset: uint64((i*3+k)*size/2 + round*4099), DstOffset: uint64(k * size)})
			}
		}
		tr := fabric.NewTransfer()
		require.NoError(t, env.A.SubmitScatter(fabric.ScatterWrite{Src: env.SrcReg, Targets: ts, Route: route,
			Notify: nts}, fabric.Notify(tr)))
		var wg sync.WaitGroup
		errs := make([]error, len(peers))
		for i, pr := range peers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := leases[i].WaitNotification(Ctx(t))
				if err != nil {
					errs[i] = err
					return
				}
				for _, tg := range ts[i*3 : i*3+3] {
					if !bytes.Equal(src[tg.SrcOffset:tg.SrcOffset+tg.Length], pr.dst[tg.DstOffset:tg.DstOffset+tg.Length]) {
						errs[i] = fmt.Errorf("round %d peer %d: range at %d not in place when the notification arrived", round, i, tg.DstOffset)
						return
					}
				}
				if want := fmt.Sprintf("%d/%d", round, i); string(n.Payload) != want {
					errs[i] = fmt.Errorf("payload %q, want %q", n.Payload, want)
				}
			}()
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		require.NoError(t, tr.Wait(Ctx(t)))
		for _, l := range leases {
			require.NoError(t, l.Retire())
		}
	}
	// A bad notification refuses the whole scatter at submit.
	_, mb := leaseMailbox(t, env.B)
	err = env.A.SubmitScatter(fabric.ScatterWrite{Src: env.SrcReg,
		Targets: []fabric.ScatterTarget{{Dst: env.Desc, Length: 1}},
		Notify:  []fabric.Notification{{To: mb}, {To: mb, Payload: make([]byte, fabric.MaxNotifyPayload+1)}}}, fabric.Completion{})
	require.ErrorIs(t, err, fabric.ErrNotifyTooLarge)
}

// testNotifyQueued: a mailbox queues notifications: MailboxDepth sent
// before the target takes any come back in order; the sender waits with
// the next ones (back-pressure) until the target takes some, then they
// follow, in order, nothing lost, also when the target's dispatcher was
// held up while they landed; one that waits past its deadline ends with
// ErrTimeout. A second engine sending to the same mailbox collides with
// the first: what it sent is reported lost (ErrNotificationsLost with the
// count), never dropped silently.
func testNotifyQueued(t *testing.T, p Params) {
	env := NewEnv(t, p)
	l, mb := leaseMailbox(t, env.B)
	var done atomic.Int64
	var mu sync.Mutex
	var errs []error
	submit := func(from *fabric.Engine, src *fabric.MemoryRegion, i int, c fabric.Completion) error {
		return from.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: env.Desc,
			DstOffset: uint64(i%1000) * 64, Notify: &fabric.Notification{To: mb, Payload: fmt.Appendf(nil, "%d", i)}}, c)
	}
	async := func(i int) {
		require.NoError(t, submit(env.A, env.SrcReg, i, fabric.OnDone(func(err error) {
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			done.Add(1)
		})))
	}
	send := func(i int) {
		require.NoError(t, Wait(t, func(c fabric.Completion) error { return submit(env.A, env.SrcReg, i, c) }))
	}
	take := func(want int) {
		t.Helper()
		n, err := l.WaitNotification(Ctx(t))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(want), string(n.Payload))
	}
	waitDone := func(n int64) {
		t.Helper()
		waitStat(t, "notified requests done", uint64(n), func() uint64 { return uint64(done.Load()) })
	}
	noErrs := func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		require.NoError(t, errors.Join(errs...))
	}
	dropped0 := env.B.Stats().NotificationsDropped

	// A full mailbox holds its sender back.
	const extra = 3
	for i := range fabric.MailboxDepth + extra {
		async(i)
	}
	waitDone(fabric.MailboxDepth)
	Settle()
	require.EqualValues(t, fabric.MailboxDepth, done.Load(), "notifications past a full mailbox went out")
	for i := range fabric.MailboxDepth + extra {
		take(i)
	}
	waitDone(fabric.MailboxDepth + extra)
	noErrs()

	// One that waits past its deadline ends with ErrTimeout, and takes no
	// slot: the next one arrives after those queued.
	for i := range fabric.MailboxDepth {
		send(100 + i)
	}
	tr := fabric.NewTransfer()
	require.NoError(t, submit(env.A, env.SrcReg, 199, fabric.Notify(tr).WithDeadline(time.Now().Add(100*time.Millisecond))))
	require.ErrorIs(t, tr.Wait(Ctx(t)), fabric.ErrTimeout)
	for i := range fabric.MailboxDepth {
		take(100 + i)
	}
	send(200)
	take(200)

	// The target's dispatcher held up (a callback of its own that blocks)
	// while more than a mailbox's worth is sent: nothing is lost.
	const hold = 77
	entered, release := make(chan struct{}), make(chan struct{})
	_, _, err := env.B.ExpectImm(hold, 1, func() bool {
		close(entered)
		<-release
		return false
	})
	require.NoError(t, err)
	require.NoError(t, Wait(t, immTo(env, hold)))
	<-entered
	done.Store(0)
	const landed = fabric.MailboxDepth + 2
	for i := range landed {
		async(300 + i)
	}
	waitDone(fabric.MailboxDepth)
	close(release)
	for i := range landed {
		take(300 + i)
	}
	waitDone(landed)
	noErrs()
	require.Equal(t, dropped0, env.B.Stats().NotificationsDropped)

	// A second sender to the same mailbox numbers from 0 again: its
	// notification is reported lost.
	c := OpenEngine(t, p)
	csrc, err := c.RegisterHost(env.Aux, fabric.AccessLocal)
	require.NoError(t, err)
	require.NoError(t, Wait(t, func(cc fabric.Completion) error { return submit(c, csrc, 400, cc) }))
	_, err = l.WaitNotification(Ctx(t))
	require.ErrorIs(t, err, fabric.ErrNotificationsLost)
	var le *fabric.NotificationsLostError
	require.ErrorAs(t, err, &le)
	require.EqualValues(t, 1, le.Lost)
	require.Equal(t, l.First(), le.Lease)
	require.Equal(t, dropped0+1, env.B.Stats().NotificationsDropped)
	send(401)
	take(401)
}

// leaseMailbox leases one immediate on e, retired when the test ends
// (before its engines close), and returns the lease and its mailbox.
func leaseMailbox(t *testing.T, e *fabric.Engine) (*fabric.Lease, fabric.Mailbox) {
	t.Helper()
	l, err := e.LeaseImms(1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Retire() })
	mb, err := l.Mailbox()
	require.NoError(t, err)
	return l, mb
}
