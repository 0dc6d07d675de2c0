package gpu

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
	_ "github.com/ferryrdma/ferry/memfabric"
)

// hostStore stands in for a cuda.Flag: it records every value stored.
type hostStore struct {
	v      atomic.Uint32
	mu     sync.Mutex
	stores []uint32
}

func (h *hostStore) Set(v uint32) {
	h.mu.Lock()
	h.stores = append(h.stores, v)
	h.mu.Unlock()
	h.v.Store(v)
}

func (h *hostStore) Load() uint32 { return h.v.Load() }

func TestFlagPublishesEpochsInOrder(t *testing.T) {
	st := &hostStore{}
	f := &Flag{st: st}
	var wg sync.WaitGroup
	const setters, each = 4, 1000
	for g := 0; g < setters; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				f.Set()
			}
		}()
	}
	wg.Wait()
	if f.Epoch() != setters*each || st.Load() != setters*each {
		t.Fatalf("epoch %d, flag %d, want %d", f.Epoch(), st.Load(), setters*each)
	}
	for i, v := range st.stores {
		if v != uint32(i+1) {
			t.Fatalf("store %d was %d: epochs published out of order", i, v)
		}
	}
}

func TestNewFlagRefusesZeroFlag(t *testing.T) {
	if _, err := NewFlag(cuda.Flag{}); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("zero flag: %v", err)
	}
	if _, err := NewFlagCounter(nil, 1, cuda.Flag{}); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("zero flag counter: %v", err)
	}
	if _, err := newFlagCounter(nil, 1, &Flag{st: &hostStore{}}); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("nil engine: %v", err)
	}
}

// memPair opens two engines on the in-process "mem" provider and returns
// a descriptor of a region of b that a can address immediates to.
func memPair(t testing.TB) (a, b *fabric.Engine, dst fabric.Descriptor) {
	t.Helper()
	open := func() *fabric.Engine {
		e, err := fabric.Open(context.Background(), fabric.Config{Transport: "mem"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := e.Close(ctx); err != nil {
				t.Error(err)
			}
		})
		return e
	}
	a, b = open(), open()
	buf, err := fabric.AllocHost(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = buf.Free() })
	r, err := b.RegisterHost(buf, fabric.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	dst, err = r.Descriptor()
	if err != nil {
		t.Fatal(err)
	}
	return a, b, dst
}

// sendImms writes n immediates imm from a to dst and waits for the writes.
func sendImms(t testing.TB, a *fabric.Engine, dst fabric.Descriptor, imm uint32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		tr := fabric.NewTransfer()
		if err := a.SubmitImm(fabric.ImmWrite{Imm: imm, Dst: dst}, fabric.Notify(tr)); err != nil {
			t.Fatal(err)
		}
		if err := tr.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func waitFlag(t testing.TB, st *hostStore, want uint32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for st.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("flag %d, want %d", st.Load(), want)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// holdsFlag checks that the flag stays at want for a while (no early Set).
func holdsFlag(t testing.TB, st *hostStore, want uint32) {
	t.Helper()
	time.Sleep(5 * time.Millisecond)
	if v := st.Load(); v != want {
		t.Fatalf("flag %d, want %d", v, want)
	}
}

func TestFlagCounterRounds(t *testing.T) {
	a, b, dst := memPair(t)
	st := &hostStore{}
	fc, err := newFlagCounter(b, 0x77, &Flag{st: st})
	if err != nil {
		t.Fatal(err)
	}
	// One round: the flag rises only with the last immediate.
	if ep, err := fc.Arm(3); err != nil || ep != 1 {
		t.Fatalf("arm: %d %v", ep, err)
	}
	sendImms(t, a, dst, 0x77, 2)
	holdsFlag(t, st, 0)
	sendImms(t, a, dst, 0x77, 1)
	waitFlag(t, st, 1)

	// Two rounds armed before anything arrives stay two rounds.
	e2, _ := fc.Arm(2)
	e3, _ := fc.Arm(2)
	if e2 != 2 || e3 != 3 {
		t.Fatalf("epochs %d %d", e2, e3)
	}
	sendImms(t, a, dst, 0x77, 2)
	waitFlag(t, st, 2)
	holdsFlag(t, st, 2)
	sendImms(t, a, dst, 0x77, 2)
	waitFlag(t, st, 3)

	// Early arrivals carry over: 3 in, then rounds of 2 and 2.
	sendImms(t, a, dst, 0x77, 3)
	holdsFlag(t, st, 3)
	if ep, _ := fc.Arm(2); ep != 4 {
		t.Fatalf("epoch %d", ep)
	}
	waitFlag(t, st, 4) // paid at once by the surplus
	fc.Arm(2)
	holdsFlag(t, st, 4)
	if c := fc.Count(); c != -1 {
		t.Fatalf("count %d, want -1 (one immediate short)", c)
	}
	sendImms(t, a, dst, 0x77, 1)
	waitFlag(t, st, 5)

	// Several rounds paid by one burst publish every epoch in order.
	for i := 0; i < 5; i++ {
		fc.Arm(1)
	}
	sendImms(t, a, dst, 0x77, 5)
	waitFlag(t, st, 10)
	st.mu.Lock()
	for i, v := range st.stores {
		if v != uint32(i+1) {
			t.Fatalf("store %d was %d", i, v)
		}
	}
	st.mu.Unlock()
	if fc.Flag().Epoch() != 10 {
		t.Fatalf("epoch %d", fc.Flag().Epoch())
	}

	if _, err := fc.Arm(0); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("arm 0: %v", err)
	}
	b.RemoveImmCount(0x77)
	if _, err := fc.Arm(1); !errors.Is(err, fabric.ErrRemoved) {
		t.Fatalf("arm after removal: %v", err)
	}
}
