package fabric_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/memfabric"
)

// The range cache on the mem provider: nested ranges share a
// registration, overlaps and wider access do not, every handle is
// unregistered on its own, and the providers see the memory released with
// the last handle.

// subSpan is [off, off+n) of b.
func subSpan(b *fabric.HostBuffer, off, n int) fabric.MemorySpan {
	s := b.Span()
	s.Addr += uintptr(off)
	s.Len = uint64(n)
	return s
}

func TestRegCacheNesting(t *testing.T) {
	a, b := openMem(t, 2), openMem(t, 1)
	buf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer buf.Free()
	src, err := fabric.AllocHost(4096)
	require.NoError(t, err)
	defer src.Free()
	live := memfabric.LiveRegistrations()

	outer, err := a.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	require.EqualValues(t, live+2, memfabric.LiveRegistrations(), "one registration per NIC")
	inner, err := a.Register(subSpan(buf, 8192, 65536), fabric.AccessRemoteWrite)
	require.NoError(t, err)
	innermost, err := a.Register(subSpan(buf, 8192+4096, 100), fabric.AccessLocal)
	require.NoError(t, err)
	require.EqualValues(t, live+2, memfabric.LiveRegistrations(), "nested ranges are lookups")
	st := a.RegistrationStats()
	require.Equal(t, 3, st.Handles)
	require.Equal(t, 1, st.Registrations)
	require.EqualValues(t, 2, st.Hits)
	require.Equal(t, 3, a.Regions())

	// The nested handle describes its own range, with the shared keys.
	od, err := outer.Descriptor()
	require.NoError(t, err)
	id, err := inner.Descriptor()
	require.NoError(t, err)
	require.Equal(t, od.Base+8192, id.Base)
	require.EqualValues(t, 65536, id.Length)
	require.Equal(t, od.NICs, id.NICs)
	require.Equal(t, uintptr(id.Base), inner.Addr())
	_, err = innermost.Descriptor()
	require.ErrorIs(t, err, fabric.ErrInvalidArgument, "a local-only handle has no descriptor, whatever it shares")

	// The outer handle goes first: the nested ones keep the memory
	// registered, and writes through the nested descriptor still land.
	require.NoError(t, a.Unregister(outer))
	require.EqualValues(t, live+2, memfabric.LiveRegistrations())
	sreg, err := b.RegisterHost(src, fabric.AccessLocal)
	require.NoError(t, err)
	copy(src.Bytes(), "nested!")
	writeAndWait(t, b, fabric.SingleWrite{Src: sreg, Length: 7, Dst: id, DstOffset: 100})
	require.Equal(t, "nested!", string(buf.Bytes()[8192+100:8192+107]))
	// Bounds are the nested range's.
	err = b.SubmitSingle(fabric.SingleWrite{Src: sreg, Length: 8, Dst: id, DstOffset: 65536 - 4}, fabric.Notify(fabric.NewTransfer()))
	require.ErrorIs(t, err, fabric.ErrOutOfBounds)

	require.NoError(t, a.Unregister(inner))
	require.EqualValues(t, live+2+1, memfabric.LiveRegistrations(), "innermost still holds it (and b has sreg)")
	require.NoError(t, a.Unregister(innermost))
	require.EqualValues(t, live+1, memfabric.LiveRegistrations(), "released with the last handle")
	require.Zero(t, a.Regions())
	require.Zero(t, a.RegistrationStats().Registrations)
	require.NoError(t, b.Unregister(sreg))
	require.EqualValues(t, live, memfabric.LiveRegistrations())
}

func writeAndWait(t *testing.T, e *fabric.Engine, w fabric.SingleWrite) {
	t.Helper()
	x := fabric.NewTransfer()
	require.NoError(t, e.SubmitSingle(w, fabric.Notify(x)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, x.Wait(ctx))
}

// Ranges that are not inside a registration, or want access it lacks (or
// a descriptor granting more than asked), are registered anew.
func TestRegCacheMisses(t *testing.T) {
	a := openMem(t, 1)
	buf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer buf.Free()
	live := memfabric.LiveRegistrations()
	half, err := a.Register(subSpan(buf, 0, 512<<10), fabric.AccessRemoteWrite)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		span   fabric.MemorySpan
		access fabric.Access
	}{
		{"overlap", subSpan(buf, 256<<10, 512<<10), fabric.AccessRemoteWrite},
		{"after", subSpan(buf, 512<<10, 4096), fabric.AccessLocal},
		{"more-access", subSpan(buf, 0, 4096), fabric.AccessRemoteWrite | fabric.AccessRemoteRead},
		{"other-device", func() fabric.MemorySpan { s := subSpan(buf, 0, 4096); s.Device = fabric.CUDADevice(0); return s }(), fabric.AccessLocal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := a.RegistrationStats()
			r, err := a.Register(tc.span, tc.access)
			if tc.name == "other-device" {
				// No group serves cuda:0 here: refused before the cache.
				require.ErrorIs(t, err, fabric.ErrInvalidArgument)
				return
			}
			require.NoError(t, err)
			after := a.RegistrationStats()
			require.Equal(t, before.Misses+1, after.Misses)
			require.Equal(t, before.Hits, after.Hits)
			require.Equal(t, before.Registrations+1, after.Registrations)
			require.NoError(t, a.Unregister(r))
		})
	}
	// A remote-writable span inside a readable one would hand out a
	// descriptor that also reads: registered anew with what was asked.
	rw, err := a.Register(subSpan(buf, 600<<10, 64<<10), fabric.AccessRemoteWrite|fabric.AccessRemoteRead)
	require.NoError(t, err)
	before := a.RegistrationStats()
	wOnly, err := a.Register(subSpan(buf, 600<<10, 4096), fabric.AccessRemoteWrite)
	require.NoError(t, err)
	require.Equal(t, before.Misses+1, a.RegistrationStats().Misses)
	// ... while a local-only one inside it is a lookup.
	loc, err := a.Register(subSpan(buf, 600<<10, 4096), fabric.AccessLocal)
	require.NoError(t, err)
	require.Equal(t, before.Hits+1, a.RegistrationStats().Hits)
	for _, r := range []*fabric.MemoryRegion{loc, wOnly, rw, half} {
		require.NoError(t, a.Unregister(r))
	}
	require.EqualValues(t, live, memfabric.LiveRegistrations())
	require.Zero(t, a.Regions())
}

// A handle is unregistered once: the second time is ErrUnknownRegion and
// leaves the handles sharing its registration alone.
func TestRegCacheDoubleUnregister(t *testing.T) {
	a := openMem(t, 1)
	buf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	defer buf.Free()
	live := memfabric.LiveRegistrations()
	r1, err := a.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	r2, err := a.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	require.NoError(t, a.Unregister(r1))
	for i := 0; i < 3; i++ {
		require.ErrorIs(t, a.Unregister(r1), fabric.ErrUnknownRegion)
	}
	require.EqualValues(t, live+1, memfabric.LiveRegistrations(), "r2's reference was not taken by r1's repeats")
	require.Equal(t, 1, a.Regions())
	// r1 is refused as a source; r2 still works.
	d2, err := r2.Descriptor()
	require.NoError(t, err)
	err = a.SubmitSingle(fabric.SingleWrite{Src: r1, Length: 8, Dst: d2}, fabric.Notify(fabric.NewTransfer()))
	require.ErrorIs(t, err, fabric.ErrUnknownRegion)
	writeAndWait(t, a, fabric.SingleWrite{Src: r2, Length: 8, Dst: d2, DstOffset: 8})
	require.NoError(t, a.Unregister(r2))
	require.ErrorIs(t, a.Unregister(r2), fabric.ErrUnknownRegion)
	require.EqualValues(t, live, memfabric.LiveRegistrations())
}

// Close releases every registration, shared or not, whatever handles are
// still held; the handles are dead afterwards.
func TestRegCacheCloseWithReferences(t *testing.T) {
	live := memfabric.LiveRegistrations()
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: "mem", NICs: 2})
	require.NoError(t, err)
	buf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer buf.Free()
	var held []*fabric.MemoryRegion
	for i := 0; i < 4; i++ {
		r, err := e.Register(subSpan(buf, i*4096, 8192), fabric.AccessRemoteWrite)
		require.NoError(t, err)
		held = append(held, r)
	}
	outer, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	inner, err := e.Register(subSpan(buf, 1<<19, 4096), fabric.AccessRemoteWrite)
	require.NoError(t, err)
	held = append(held, outer, inner)
	require.Equal(t, 6, e.Regions())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.Close(ctx))
	require.Zero(t, e.Regions())
	require.EqualValues(t, live, memfabric.LiveRegistrations(), "every registration released at Close")
	for _, r := range held {
		require.ErrorIs(t, e.Unregister(r), fabric.ErrUnknownRegion)
	}
	_, err = e.RegisterHost(buf, fabric.AccessLocal)
	require.ErrorIs(t, err, fabric.ErrClosed)
}

// Registration and deregistration run beside the worker: while the
// provider is inside a registration (held there on purpose), writes of the
// same group go on and complete. With Config.RegisterOnWorker they run on
// the worker, as before.
func TestRegisterBesideWorker(t *testing.T) {
	a, b := openMem(t, 2), openMem(t, 1)
	require.Equal(t, []fabric.RegistrationMode{fabric.RegisterBeside}, a.RegistrationStats().Modes)
	dst, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	defer dst.Free()
	src, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	defer src.Free()
	big, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer big.Free()
	dreg, err := b.RegisterHost(dst, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, _ := dreg.Descriptor()
	sreg, err := a.RegisterHost(src, fabric.AccessLocal)
	require.NoError(t, err)

	block := make(chan struct{})
	unblock := sync.OnceFunc(func() { close(block) })
	defer unblock()
	for _, d := range a.Info().Groups[0].Domains {
		require.NoError(t, memfabric.Inject(d.Address, memfabric.Faults{BlockRegister: block}))
	}
	type result struct {
		r   *fabric.MemoryRegion
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := a.RegisterHost(big, fabric.AccessRemoteWrite)
		done <- result{r, err}
	}()
	// Writes of the registering group complete while it registers.
	for i := 0; i < 50; i++ {
		writeAndWait(t, a, fabric.SingleWrite{Src: sreg, Length: 64, Dst: desc, DstOffset: uint64(i * 64)})
	}
	select {
	case res := <-done:
		t.Fatalf("registration returned while the provider held it: %v", res.err)
	default:
	}
	unblock()
	res := <-done
	require.NoError(t, res.err)

	// The same for deregistration: Unregister waits in the provider,
	// writes go on.
	block2 := make(chan struct{})
	unblock2 := sync.OnceFunc(func() { close(block2) })
	defer unblock2()
	for _, d := range a.Info().Groups[0].Domains {
		require.NoError(t, memfabric.Inject(d.Address, memfabric.Faults{BlockRegister: block2}))
	}
	unreg := make(chan error, 1)
	go func() { unreg <- a.Unregister(res.r) }()
	for i := 0; i < 50; i++ {
		writeAndWait(t, a, fabric.SingleWrite{Src: sreg, Length: 64, Dst: desc, DstOffset: uint64(i * 64)})
	}
	select {
	case err := <-unreg:
		t.Fatalf("unregistration returned while the provider held it: %v", err)
	default:
	}
	unblock2()
	require.NoError(t, <-unreg)
	require.NoError(t, a.Unregister(sreg))
	require.NoError(t, b.Unregister(dreg))
}

func TestRegisterOnWorkerConfig(t *testing.T) {
	live := memfabric.LiveRegistrations()
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: "mem", NICs: 4, RegisterOnWorker: true})
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, e.Close(ctx))
		require.EqualValues(t, live, memfabric.LiveRegistrations())
	}()
	require.Equal(t, []fabric.RegistrationMode{fabric.RegisterOnWorker}, e.RegistrationStats().Modes)
	buf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	defer buf.Free()
	r1, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	r2, err := e.Register(subSpan(buf, 4096, 4096), fabric.AccessRemoteWrite)
	require.NoError(t, err)
	require.EqualValues(t, 1, e.RegistrationStats().Hits)
	require.NoError(t, e.Unregister(r1))
	require.NoError(t, e.Unregister(r2))
	require.Zero(t, e.RegistrationStats().Registrations)
}

// Many goroutines registering and unregistering overlapping and nested
// ranges of one buffer at once, with writes from the registered ranges
// in flight: nothing leaks, every handle ends, counts come back to zero.
func TestRegCacheConcurrent(t *testing.T) {
	a := openMem(t, 2)
	buf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer buf.Free()
	dst, err := a.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, _ := dst.Descriptor()
	live := memfabric.LiveRegistrations()
	const goroutines, rounds = 6, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				off := ((g*rounds + i) * 4096) % (1<<20 - 16384)
				// Odd goroutines ask for remote read, which dst's
				// registration lacks: registrations of their own, shared
				// among them where their ranges nest.
				acc := fabric.AccessLocal
				if g%2 == 1 {
					acc = fabric.AccessRemoteWrite | fabric.AccessRemoteRead
				}
				r, err := a.Register(subSpan(buf, off, 8192+4096*(i%3)), acc)
				if err != nil {
					errs <- err
					return
				}
				x := fabric.NewTransfer()
				if err := a.SubmitSingle(fabric.SingleWrite{Src: r, Length: 256, Dst: desc, DstOffset: uint64(off)}, fabric.Notify(x)); err != nil {
					errs <- err
					return
				}
				// Unregister with the write possibly still in flight:
				// it waits for it.
				if err := a.Unregister(r); err != nil {
					errs <- err
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err = x.Wait(ctx)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("write from a handle being unregistered: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, live, memfabric.LiveRegistrations(), "every nested registration released (the outer one stays)")
	require.Equal(t, 1, a.Regions())
	st := a.RegistrationStats()
	require.Equal(t, 1, st.Registrations)
	require.Positive(t, st.Hits, "the local ranges lie inside dst's registration")
	require.Positive(t, st.Misses, "the readable ones need their own")
	require.NoError(t, a.Unregister(dst))
	require.ErrorIs(t, a.Unregister(dst), fabric.ErrUnknownRegion)
}
