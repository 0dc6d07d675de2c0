//go:build linux

package nodeshare_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/a2a/internal/nodeshare"
	"github.com/ferryrdma/ferry/internal/shm"
)

// memfds maps peers' memory files and counts what it holds.
type memfds struct {
	mu   sync.Mutex
	live int
}

func (m *memfds) Import(fd, size int) ([]byte, error) {
	if err := shm.CheckSealed(fd, uint64(size)); err != nil {
		return nil, err
	}
	b, err := shm.Map(fd, 0, size)
	if err == nil {
		m.mu.Lock()
		m.live++
		m.mu.Unlock()
	}
	return b, err
}

func (m *memfds) Release(b []byte) error {
	m.mu.Lock()
	m.live--
	m.mu.Unlock()
	return shm.Unmap(b)
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// member makes node rank i's member of a world of one node of size, with
// fresh memory files whose first byte is tag.
func member(t *testing.T, imp *memfds, i, size int, tag byte) (*nodeshare.Member[[]byte], [2][]byte) {
	t.Helper()
	const bytes = 8192
	var fds [2]int
	var own [2][]byte
	for k := range fds {
		fd, err := shm.Create("ferry-nodeshare-test", bytes)
		if err != nil {
			t.Fatal(err)
		}
		fds[k] = fd
		if own[k], err = shm.Map(fd, 0, bytes); err != nil {
			t.Fatal(err)
		}
		own[k][0] = tag
		t.Cleanup(func() { _ = shm.Unmap(own[k]) })
	}
	spec := nodeshare.Spec{World: size, Rank: i, Index: i, Size: size, Asked: [2]uint64{bytes, bytes},
		Exported: [2]uint64{bytes, bytes}}
	m, err := nodeshare.New(spec, fds, nodeshare.Importer[[]byte](imp))
	if err != nil {
		t.Fatal(err)
	}
	return m, own
}

// TestShareAndRejoin: three members share; member 2 restarts (a new
// member with new files) and the two others take it back by the rejoin
// rule: they map its new buffers in place of the old incarnation's, which
// they release. Member 1 is then left out of a reshare and released. No
// mapping and no descriptor is left once every member closed.
func TestShareAndRejoin(t *testing.T) {
	// Warm the network poller, whose descriptors live with the process.
	if m, _ := member(t, &memfds{}, 0, 1, 0); m != nil {
		_, _ = m.Offer()
		_ = m.Close()
	}
	before := openFDs(t)
	imp := &memfds{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x := a2atest.NewExchange(3)
	ms := make([]*nodeshare.Member[[]byte], 3)
	for i := range ms {
		ms[i], _ = member(t, imp, i, 3, byte(10+i))
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, m := range ms {
		wg.Go(func() { errs[i] = m.Share(ctx, x.Member(i)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		for j := range ms {
			s, r, ok := m.Peer(j)
			if ok != (i != j) || ok && (s[0] != byte(10+j) || r[0] != byte(10+j)) {
				t.Fatalf("member %d sees member %d: mapped %v", i, j, ok)
			}
		}
	}
	if imp.live != 12 {
		t.Fatalf("%d mappings after sharing, want 12", imp.live)
	}

	// Member 2 restarts.
	if err := ms[2].Close(); err != nil {
		t.Fatal(err)
	}
	ms[2], _ = member(t, imp, 2, 3, 42)
	offers := make([][]byte, 3)
	for i, m := range ms {
		var err error
		if offers[i], err = m.Offer(); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range ms {
		wg.Go(func() { errs[i] = m.Reshare(ctx, offers) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if s, _, ok := ms[i].Peer(2); !ok || s[0] != 42 {
			t.Fatalf("member %d does not map the restarted member's buffers", i)
		}
	}
	if s, _, ok := ms[2].Peer(0); !ok || s[0] != 10 {
		t.Fatal("the restarted member does not map member 0's buffers")
	}
	if imp.live != 12 {
		t.Fatalf("%d mappings after the rejoin, want 12 (the old incarnation's released)", imp.live)
	}

	// Member 1 leaves: the others release what they mapped of it.
	offers = make([][]byte, 3)
	for _, i := range []int{0, 2} {
		offers[i], _ = ms[i].Offer()
	}
	for _, i := range []int{0, 2} {
		wg.Go(func() { errs[i] = ms[i].Reshare(ctx, offers) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := ms[0].Peer(1); ok {
		t.Fatal("member 0 still maps the member that left")
	}
	for _, m := range ms {
		if err := errors.Join(m.Close(), m.Close()); err != nil {
			t.Fatal(err)
		}
	}
	if imp.live != 0 {
		t.Fatalf("%d mappings left after closing", imp.live)
	}
	if after := openFDs(t); after > before {
		t.Fatalf("%d descriptors open after closing, %d before", after, before)
	}
}

// TestReshareTimesOut: a member whose peer never comes fails with
// a2a.ErrTimeout naming it, keeping what it mapped before.
func TestReshareTimesOut(t *testing.T) {
	imp := &memfds{}
	a, _ := member(t, imp, 0, 2, 1)
	b, _ := member(t, imp, 1, 2, 2)
	defer a.Close()
	defer b.Close()
	oa, err := a.Offer()
	if err != nil {
		t.Fatal(err)
	}
	ob, err := b.Offer() // b never reshares
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = a.Reshare(ctx, [][]byte{oa, ob})
	if !errors.Is(err, a2a.ErrTimeout) {
		t.Fatalf("reshare without the peer: %v, want ErrTimeout", err)
	}
	if _, _, ok := a.Peer(1); ok || imp.live != 0 {
		t.Fatalf("a failed reshare left %d mappings", imp.live)
	}
	if err := b.Reshare(ctx, nil); err != nil {
		t.Fatalf("withdraw: %v", err)
	}
	if err := a.Reshare(context.Background(), [][]byte{oa, ob}); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("reshare with a spent offer: %v, want ErrInvalidArgument", err)
	}
}
