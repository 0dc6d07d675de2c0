package netfault

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

// pipeDev is an in-memory packet device: what is written to one end is
// read from the other.
type pipeDev struct {
	in     chan []byte
	out    chan []byte
	closed chan struct{}
	once   sync.Once
}

func pipePair() (*pipeDev, *pipeDev) {
	a2b, b2a := make(chan []byte, 1024), make(chan []byte, 1024)
	ca, cb := make(chan struct{}), make(chan struct{})
	return &pipeDev{in: b2a, out: a2b, closed: ca}, &pipeDev{in: a2b, out: b2a, closed: cb}
}

func (p *pipeDev) Read(b []byte) (int, error) {
	select {
	case pkt := <-p.in:
		return copy(b, pkt), nil
	case <-p.closed:
		return 0, os.ErrClosed
	}
}

func (p *pipeDev) Write(b []byte) (int, error) {
	p.out <- append([]byte(nil), b...)
	return len(b), nil
}

func (p *pipeDev) Close() error { p.once.Do(func() { close(p.closed) }); return nil }

// side is the far end of a device the relay serves: tests write packets
// into it and read what came through.
type side struct{ send, recv chan []byte }

// newTestRelay puts a relay between two in-memory devices and returns the
// ends the test uses: packets written to a arrive at b.
func newTestRelay(t *testing.T, imp Impairments) (r *Relay, a, b side) {
	devA, farA := pipePair()
	devB, farB := pipePair()
	r = NewRelay(devA, devB, imp)
	t.Cleanup(func() { _ = r.Close() })
	return r, side{send: farA.out, recv: farA.in}, side{send: farB.out, recv: farB.in}
}

// packet is a fake IPv4 packet with a 20-byte header and n payload bytes.
func packet(seq byte, n int) []byte {
	p := make([]byte, 20+n)
	p[0] = 0x45
	for i := 20; i < len(p); i++ {
		p[i] = seq
	}
	return p
}

func collect(ch chan []byte, want int, wait time.Duration) [][]byte {
	var got [][]byte
	deadline := time.After(wait)
	for len(got) < want {
		select {
		case p := <-ch:
			got = append(got, p)
		case <-deadline:
			return got
		}
	}
	return got
}

// TestRelayImpairments: each impairment does what it says, the same way
// for the same seed, and a link that is down passes nothing.
func TestRelayImpairments(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		_, a, b := newTestRelay(t, Impairments{})
		for i := 0; i < 100; i++ {
			a.send <- packet(byte(i), 10)
		}
		got := collect(b.recv, 100, 5*time.Second)
		if len(got) != 100 {
			t.Fatalf("%d of 100 packets arrived", len(got))
		}
		for i, p := range got {
			if p[20] != byte(i) {
				t.Fatalf("packet %d out of order (carries %d)", i, p[20])
			}
		}
	})
	t.Run("loss", func(t *testing.T) {
		r, a, b := newTestRelay(t, Impairments{Seed: 3, Loss: 0.5})
		for i := 0; i < 400; i++ {
			a.send <- packet(byte(i), 10)
		}
		got := collect(b.recv, 400, 300*time.Millisecond)
		if s := r.Stats(); len(got) < 100 || len(got) > 300 || int(s.Dropped)+len(got) != 400 {
			t.Fatalf("%d of 400 arrived with 50%% loss, stats %+v", len(got), s)
		}
	})
	t.Run("duplicate", func(t *testing.T) {
		_, a, b := newTestRelay(t, Impairments{Seed: 1, Duplicate: 1})
		for i := 0; i < 10; i++ {
			a.send <- packet(byte(i), 10)
		}
		if got := collect(b.recv, 20, 5*time.Second); len(got) != 20 {
			t.Fatalf("%d packets for 10 sent, all duplicated", len(got))
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		_, a, b := newTestRelay(t, Impairments{Seed: 1, Corrupt: 1})
		a.send <- packet(7, 64)
		got := collect(b.recv, 1, 5*time.Second)
		if len(got) != 1 {
			t.Fatal("corrupted packet not delivered")
		}
		diff := 0
		for i, c := range got[0] {
			if c != packet(7, 64)[i] {
				if i < 20 {
					t.Fatalf("byte %d of the IP header changed", i)
				}
				diff++
			}
		}
		if diff != 1 {
			t.Fatalf("%d bytes changed, want 1", diff)
		}
	})
	t.Run("delay and reorder", func(t *testing.T) {
		_, a, b := newTestRelay(t, Impairments{Seed: 5, Delay: 20 * time.Millisecond, Reorder: 0.3, ReorderGap: 30 * time.Millisecond})
		start := time.Now()
		for i := 0; i < 50; i++ {
			a.send <- packet(byte(i), 10)
		}
		got := collect(b.recv, 50, 5*time.Second)
		if len(got) != 50 {
			t.Fatalf("%d of 50 arrived", len(got))
		}
		if el := time.Since(start); el < 20*time.Millisecond {
			t.Fatalf("delivered after %v, delay 20ms", el)
		}
		inOrder := true
		for i, p := range got {
			inOrder = inOrder && p[20] == byte(i)
		}
		if inOrder {
			t.Fatal("30% reordering left every packet in order")
		}
	})
	t.Run("down", func(t *testing.T) {
		r, a, b := newTestRelay(t, Impairments{})
		r.SetDown(true)
		a.send <- packet(1, 10)
		if got := collect(b.recv, 1, 100*time.Millisecond); len(got) != 0 {
			t.Fatal("a packet crossed a link that is down")
		}
		r.SetDown(false)
		a.send <- packet(2, 10)
		if got := collect(b.recv, 1, 5*time.Second); len(got) != 1 || got[0][20] != 2 {
			t.Fatal("the link did not come back")
		}
		if r.Stats().DroppedDown != 1 {
			t.Fatalf("stats %+v", r.Stats())
		}
	})
}

// TestRelayClose: Close ends the relay's goroutines even with packets
// waiting in the delay queue.
func TestRelayClose(t *testing.T) {
	devA, farA := pipePair()
	devB, _ := pipePair()
	r := NewRelay(devA, devB, Impairments{Delay: time.Hour})
	farA.out <- packet(1, 10)
	time.Sleep(10 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, os.ErrClosed) {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs")
	}
}
