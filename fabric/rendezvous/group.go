package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// Group is this process's membership in a job: its connection to rank 0's
// store and, on rank 0, the store itself.
type Group struct {
	cfg  Config
	conn net.Conn // nil for a world of 1
	srv  *server  // rank 0 only

	mu     sync.Mutex // one collective at a time; guards the fields below
	seq    uint32
	broken error
	closed bool
}

// Rank returns this process's rank.
func (g *Group) Rank() int { return g.cfg.Rank }

// WorldSize returns the number of ranks.
func (g *Group) WorldSize() int { return g.cfg.WorldSize }

// LocalRank returns this process's rank on its machine.
func (g *Group) LocalRank() int { return g.cfg.LocalRank }

// Config returns the configuration the group was joined with.
func (g *Group) Config() Config { c := g.cfg; c.Listener = nil; return c }

// Join connects to the job: rank 0 starts the store and every rank,
// rank 0 included, connects to it and presents the token. Join returns when
// every rank has joined, or fails when ctx ends or cfg.JoinTimeout passes
// first with an *Error wrapping ErrTimeout that names the ranks that never
// arrived. Rejections wrap ErrAuth or ErrRejected; a bad cfg,
// ErrInvalidConfig. While it waits it tells cfg.Progress what it waits for.
func Join(ctx context.Context, cfg Config) (*Group, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, &Error{Op: "join", Rank: cfg.Rank, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.JoinTimeout)
	defer cancel()
	g := &Group{cfg: cfg}
	if cfg.WorldSize == 1 {
		if cfg.Listener != nil {
			cfg.Listener.Close() // no store to serve
		}
		return g, nil
	}
	addr := cfg.Master
	if cfg.Rank == 0 {
		ln, err := listen(cfg)
		if err != nil {
			return nil, &Error{Op: "join", Rank: 0, Msg: "start the store", Err: err}
		}
		addr = ln.Addr().String()
		g.srv = newServer(ln, cfg.WorldSize, cfg.Token, cfg.MaxMessage)
	}
	if cfg.Progress != nil {
		stop := g.reportProgress(ctx, addr)
		defer stop()
	}
	if err := g.connect(ctx, addr); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// progressEvery is how often a waiting Join reports what it waits for.
var progressEvery = 5 * time.Second

// reportProgress tells cfg.Progress, every progressEvery until stopped,
// which ranks have not joined (rank 0) or which store this rank is still
// waiting for (the others).
func (g *Group) reportProgress(ctx context.Context, addr string) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(exited)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			left := ""
			if dl, ok := ctx.Deadline(); ok {
				left = fmt.Sprintf(", %s left", time.Until(dl).Round(time.Second))
			}
			waited := time.Since(start).Round(time.Second)
			if g.srv != nil {
				missing := g.srv.notJoined()
				g.cfg.Progress(fmt.Sprintf("rendezvous: rank 0 waited %s for rank(s) %v of %d to join%s",
					waited, missing, g.cfg.WorldSize, left))
			} else {
				g.cfg.Progress(fmt.Sprintf("rendezvous: rank %d waited %s for the job to assemble at rank 0's store %s%s",
					g.cfg.Rank, waited, addr, left))
			}
		}
	}()
	return func() { close(done); <-exited }
}

func listen(cfg Config) (net.Listener, error) {
	if cfg.Listener != nil {
		return cfg.Listener, nil
	}
	if cfg.ListenFD > 0 {
		f := os.NewFile(uintptr(cfg.ListenFD), "rendezvous-listener")
		ln, err := net.FileListener(f)
		f.Close() // FileListener duplicated it
		if err != nil {
			return nil, fmt.Errorf("inherited listener fd %d: %v: %w", cfg.ListenFD, err, ErrInvalidConfig)
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", cfg.Master)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %v: %w", cfg.Master, err, ErrInvalidConfig)
	}
	return ln, nil
}

// connect dials rank 0 (retrying while it is not listening yet), sends the
// hello and waits for the welcome.
func (g *Group) connect(ctx context.Context, addr string) error {
	var d net.Dialer
	backoff := 20 * time.Millisecond
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			g.conn = c
			break
		}
		var ne net.Error
		// The dialer may see the deadline a moment before ctx reports it.
		if ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
			return &Error{Op: "join", Rank: g.cfg.Rank, Missing: []int{0},
				Msg: fmt.Sprintf("rank 0's store at %s never answered (%v)", addr, err), Err: ErrTimeout}
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return &Error{Op: "join", Rank: g.cfg.Rank, Msg: "dial " + addr, Err: fmt.Errorf("%v: %w", err, ErrPeerLost)}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
	h := hello{rank: uint32(g.cfg.Rank), world: uint32(g.cfg.WorldSize), token: g.cfg.Token, deadline: serverDeadline(ctx)}
	k, p, err := g.exchange(ctx, "join", h.encode(), 64)
	if err != nil {
		return err
	}
	if k != kindWelcome {
		return &Error{Op: "join", Rank: g.cfg.Rank, Err: protoErr("expected a welcome, got message kind %d", k)}
	}
	if w, err := decodeWelcome(p); err != nil || int(w) != g.cfg.WorldSize {
		return &Error{Op: "join", Rank: g.cfg.Rank, Err: protoErr("bad welcome (world %d): %v", w, err)}
	}
	return nil
}

// lateReportGrace bounds how long past its deadline a call waits for rank
// 0's report of the missing ranks (a variable for tests).
var lateReportGrace = 200 * time.Millisecond

// delayInterrupt, when set (by tests), runs first in the callback that
// interrupts a call's read when its context ends: a callback started late,
// as on a loaded machine.
var delayInterrupt func()

// serverDeadline is the deadline rank 0 applies on this rank's behalf:
// slightly before ctx's, so that the report of missing ranks arrives
// while this rank is still waiting for it.
func serverDeadline(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	margin := min(time.Until(dl)/5, 500*time.Millisecond)
	return deadlineOf(dl.Add(-margin))
}

// exchange writes frame and reads the answer, both bounded by ctx. An
// error frame becomes the *Error it describes. limit bounds the answer's
// payload; an error frame may always be as large as one naming every rank.
func (g *Group) exchange(ctx context.Context, op string, frame []byte, limit int) (kind, []byte, error) {
	limit = max(limit, errFrameLimit(g.cfg.WorldSize))
	fail := func(msg string, err error) (kind, []byte, error) {
		return 0, nil, &Error{Op: op, Rank: g.cfg.Rank, Msg: msg, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return fail("", fmt.Errorf("%v: %w", err, ErrTimeout))
	}
	dl, hasDeadline := ctx.Deadline()
	_ = g.conn.SetDeadline(dl)
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		if delayInterrupt != nil {
			delayInterrupt()
		}
		_ = g.conn.SetDeadline(time.Unix(1, 0))
		close(interrupted)
	})
	defer stop()
	if _, err := g.conn.Write(frame); err != nil {
		return fail("send to rank 0", g.ioErr(ctx, err))
	}
	k, p, err := readFrame(g.conn, limit)
	if err != nil && hasDeadline && !time.Now().Before(dl) && !errors.Is(ctx.Err(), context.Canceled) {
		// Rank 0 reports missing ranks just before this deadline; on a
		// loaded machine the report may be a moment late. Wait briefly
		// for it: naming the missing ranks is worth a few milliseconds.
		// The read may end at the connection's deadline before ctx's
		// timer has marked ctx done, so the deadline itself is looked
		// at. ctx's callback runs in a goroutine of its own, which a
		// loaded machine may start only after that: let it set its
		// deadline first, or it would cut this wait short.
		if !stop() {
			<-interrupted
		}
		_ = g.conn.SetReadDeadline(time.Now().Add(lateReportGrace))
		if k2, p2, err2 := readFrame(g.conn, limit); err2 == nil && k2 == kindError {
			k, p, err = k2, p2, nil
		}
	}
	if err != nil {
		return fail("read from rank 0", g.ioErr(ctx, err))
	}
	if k == kindError {
		m, err := decodeError(p)
		if err != nil {
			return fail("bad error message from rank 0", err)
		}
		return 0, nil, m.asError(op, g.cfg.Rank)
	}
	return k, p, nil
}

func (g *Group) ioErr(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()):
		return fmt.Errorf("no answer from rank 0 before the deadline (%v): %w", err, ErrTimeout)
	case errors.Is(err, ErrProtocol), errors.Is(err, ErrTooLarge):
		return err
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return fmt.Errorf("connection closed (%v): %w", err, ErrPeerLost)
	}
	return fmt.Errorf("%v: %w", err, ErrPeerLost)
}

// collective runs one collective and returns its parts.
func (g *Group) collective(ctx context.Context, op uint8, root int, data []byte) ([][]byte, error) {
	name := opName(op)
	if len(data) > g.cfg.MaxMessage {
		return nil, &Error{Op: name, Rank: g.cfg.Rank, Msg: fmt.Sprintf("%d bytes, limit %d", len(data), g.cfg.MaxMessage), Err: ErrTooLarge}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, &Error{Op: name, Rank: g.cfg.Rank, Err: ErrClosed}
	}
	if g.broken != nil {
		return nil, g.broken
	}
	if g.conn == nil { // a world of 1
		switch op {
		case opAllGather, opBroadcast:
			return [][]byte{append([]byte{}, data...)}, nil
		}
		return nil, nil
	}
	m := contrib{seq: g.seq, op: op, root: uint32(root), deadline: serverDeadline(ctx), data: data}
	limit := g.cfg.WorldSize*(g.cfg.MaxMessage+4) + 8
	k, p, err := g.exchange(ctx, name, m.encode(), limit)
	if err == nil && k != kindResult {
		err = &Error{Op: name, Rank: g.cfg.Rank, Err: protoErr("expected a result, got message kind %d", k)}
	}
	var res result
	if err == nil {
		want := map[uint8]int{opAllGather: g.cfg.WorldSize, opBroadcast: 1, opBarrier: 0}[op]
		if res, err = decodeResult(p); err == nil && res.seq != g.seq {
			err = protoErr("result for collective %d, expected %d", res.seq, g.seq)
		} else if err == nil && len(res.parts) != want {
			err = protoErr("%s result with %d parts, expected %d", name, len(res.parts), want)
		}
		if err != nil {
			err = &Error{Op: name, Rank: g.cfg.Rank, Err: err}
		}
	}
	if err != nil {
		// The stream is out of step with rank 0 now: every later call
		// fails the same way.
		g.broken = err
		return nil, err
	}
	g.seq++
	return res.parts, nil
}

// AllGather sends data and returns every rank's data, indexed by rank.
func (g *Group) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	return g.collective(ctx, opAllGather, 0, data)
}

// Broadcast returns root's data on every rank; the data of other ranks is
// ignored.
func (g *Group) Broadcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	if root < 0 || root >= g.cfg.WorldSize {
		return nil, &Error{Op: "broadcast", Rank: g.cfg.Rank, Msg: fmt.Sprintf("root %d outside a world of %d", root, g.cfg.WorldSize), Err: ErrInvalidConfig}
	}
	if root != g.cfg.Rank {
		data = nil
	}
	parts, err := g.collective(ctx, opBroadcast, root, data)
	if err != nil {
		return nil, err
	}
	return parts[0], nil
}

// Barrier returns when every rank has called it.
func (g *Group) Barrier(ctx context.Context) error {
	_, err := g.collective(ctx, opBarrier, 0, nil)
	return err
}

// Close leaves the job. On rank 0 it also stops the store (after letting
// answers already decided reach the other ranks, for at most 2 s). It is
// idempotent and waits for every goroutine the group started. A collective
// running in another goroutine fails with ErrPeerLost or ErrClosed.
func (g *Group) Close() error {
	// The store goes first, so the other ranks do not hear rank 0's own
	// connection closing as a lost rank.
	if g.srv != nil {
		g.srv.close()
	}
	if g.conn != nil {
		// Unblocks a collective in flight; closing twice is harmless.
		g.conn.Close()
	}
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	return nil
}
