package netfault

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"
)

// newTestLink creates a link or skips when this machine cannot (not root,
// no netns or tun).
func newTestLink(t *testing.T, imp Impairments) *Link {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Skip(t, "netns", "network namespaces and TUN devices need root")
	}
	l, err := NewLink(fmt.Sprintf("ferry-nf%d-", os.Getpid()), "fy0", 9000, "10.77.0.1", "10.77.0.2", imp)
	if err != nil {
		testutil.Skip(t, "netns", "cannot build a namespace pair: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close link: %v", err)
		}
	})
	return l
}

// tcpAcross sends n random bytes from namespace A to B over TCP and
// checks they arrive intact; it returns the time taken.
func tcpAcross(t *testing.T, l *Link, n int) time.Duration {
	t.Helper()
	took, err := sendAcross(l, n)
	if err != nil {
		t.Fatal(err)
	}
	return took
}

func sendAcross(l *Link, n int) (time.Duration, error) {
	var ln net.Listener
	if err := inNamespace(l.B.Path(), func() (err error) {
		ln, err = net.Listen("tcp", l.AddrB+":0")
		return err
	}); err != nil {
		return 0, err
	}
	defer ln.Close()
	got := make(chan [32]byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- [32]byte{}
			return
		}
		defer c.Close()
		h := sha256.New()
		_, _ = io.Copy(h, c)
		var s [32]byte
		copy(s[:], h.Sum(nil))
		got <- s
	}()
	var c net.Conn
	if err := inNamespace(l.A.Path(), func() (err error) {
		c, err = net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		return err
	}); err != nil {
		return 0, err
	}
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	start := time.Now()
	if _, err := io.Copy(c, bytes.NewReader(data)); err != nil {
		return 0, err
	}
	c.Close()
	select {
	case s := <-got:
		took := time.Since(start)
		if s != sha256.Sum256(data) {
			return took, errors.New("bytes changed across the link")
		}
		return took, nil
	case <-time.After(60 * time.Second):
		return 0, errors.New("transfer across the link did not finish")
	}
}

// TestLinkImpairments: TCP carries every byte intact across the relay
// with each impairment, and the relay did what it was asked.
func TestLinkImpairments(t *testing.T) {
	l := newTestLink(t, Impairments{Seed: 7})
	took := tcpAcross(t, l, 32<<20)
	t.Logf("clean: 32 MiB in %v (%.0f MB/s)", took, 32/took.Seconds())
	for name, imp := range map[string]Impairments{
		"loss":      {Seed: 1, Loss: 0.01},
		"delay":     {Seed: 2, Delay: 5 * time.Millisecond, Jitter: 2 * time.Millisecond},
		"reorder":   {Seed: 3, Reorder: 0.05, ReorderGap: 3 * time.Millisecond},
		"duplicate": {Seed: 4, Duplicate: 0.05},
		"corrupt":   {Seed: 5, Corrupt: 0.01},
	} {
		before := l.Relay.Stats()
		l.Relay.SetImpairments(imp)
		took := tcpAcross(t, l, 8<<20)
		s := l.Relay.Stats()
		t.Logf("%s: 8 MiB in %v; relay %+v", name, took, s)
		switch name {
		case "loss":
			if s.Dropped == before.Dropped {
				t.Error("no packet was dropped")
			}
		case "delay":
			if s.Delayed == before.Delayed {
				t.Error("no packet was delayed")
			}
		case "reorder":
			if s.Reordered == before.Reordered {
				t.Error("no packet was reordered")
			}
		case "duplicate":
			if s.Duplicated == before.Duplicated {
				t.Error("no packet was duplicated")
			}
		case "corrupt":
			if s.Corrupted == before.Corrupted {
				t.Error("no packet was corrupted")
			}
		}
	}
	l.Relay.SetImpairments(Impairments{})
	l.Relay.SetDown(true)
	done := make(chan error, 1)
	go func() { _, err := sendAcross(l, 1<<20); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("a transfer ended (%v) across a link that is down", err)
	case <-time.After(500 * time.Millisecond):
	}
	l.Relay.SetDown(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the link did not come back")
	}
}
