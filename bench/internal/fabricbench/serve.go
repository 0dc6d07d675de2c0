package fabricbench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ferryrdma/ferry/fabric"
)

// Serving many clients. Each client (by its main address) gets a goroutine
// of its own that answers its requests in order, so a client that stops
// answering holds up only itself: its writes carry the case's deadline
// (Spec.Timeout) and fail when it passes, and a reply it does not take is
// given up after replyTimeout. Cases of different clients run at the same
// time; the first takes the side's source buffer and the others write from
// a buffer of their own (so a verified case's pattern is never overwritten
// by another's).

const (
	// replyTimeout bounds sending one reply to a client.
	replyTimeout = 10 * time.Second
	// clientIdle ends a client's goroutine after that long without a
	// request; its next request starts a new one.
	clientIdle = time.Minute
)

// Serve answers clients from side s until ctx ends, writing a line per
// request to log. It returns nil when ctx ends and an error only when it
// cannot serve at all.
func Serve(ctx context.Context, s *Side, log io.Writer) error {
	box, err := newMailbox(s)
	if err != nil {
		return err
	}
	defer box.close()
	log = &lockedWriter{w: log}
	clients := map[fabric.Address]chan message{}
	idle := make(chan fabric.Address)
	var wg sync.WaitGroup
	defer func() {
		for _, in := range clients {
			close(in)
		}
		wg.Wait()
	}()
	dropped := int64(0)
	for {
		var msg message
		select {
		case <-ctx.Done():
			return nil
		case a := <-idle:
			if in, ok := clients[a]; ok {
				close(in) // the goroutine drains what was queued and ends
				delete(clients, a)
			}
			continue
		case msg = <-box.in:
		}
		if d := box.dropped.Load(); d != dropped {
			fmt.Fprintf(log, "# %d control messages dropped: the server did not keep up\n", d-dropped)
			dropped = d
		}
		if msg.From.IsZero() {
			fmt.Fprintf(log, "# ignored %s request with no reply address\n", msg.Kind)
			continue
		}
		in, ok := clients[msg.From]
		if !ok {
			in = make(chan message, recvSlots)
			clients[msg.From] = in
			wg.Add(1)
			go func(a fabric.Address) {
				defer wg.Done()
				serveClient(ctx, s, a, in, idle, log)
			}(msg.From)
		}
		select {
		case in <- msg:
		default:
			fmt.Fprintf(log, "# client %s has %d requests waiting: dropped a %s request\n", msg.From, len(in), msg.Kind)
		}
	}
}

// serveClient answers one client's requests in order until in is closed.
func serveClient(ctx context.Context, s *Side, from fabric.Address, in <-chan message, idle chan<- fabric.Address, log io.Writer) {
	t := time.NewTimer(clientIdle)
	defer t.Stop()
	for {
		var msg message
		var ok bool
		select {
		case msg, ok = <-in:
			if !ok {
				return
			}
		case <-t.C:
			select {
			case idle <- from: // Serve closes in; drain it
			case <-ctx.Done():
				return
			}
			for msg := range in {
				serveOne(ctx, s, msg, log)
			}
			return
		}
		serveOne(ctx, s, msg, log)
		t.Reset(clientIdle)
	}
}

// serveOne answers one request.
func serveOne(ctx context.Context, s *Side, msg message, log io.Writer) {
	reply := message{Kind: msg.Kind, Seq: msg.Seq, From: s.Engine.MainAddress()}
	switch msg.Kind {
	case msgHello:
		in := s.Info()
		reply.Info = &in
		fmt.Fprintf(log, "# client %s connected\n", msg.From)
	case msgRun:
		reply.Kind = msgResult
		res, lat, err := serveRun(ctx, s, msg)
		if err != nil {
			reply.Err = err.Error()
			fmt.Fprintf(log, "# request of %s failed: %v\n", msg.From, err)
		} else {
			bw := ""
			if msg.Case.Workload != Imm {
				bw = fmt.Sprintf(", %.2f Gbit/s", res.Gbps)
			}
			fmt.Fprintf(log, "# wrote %s: %d iters, p50 %.2f us%s\n", caseName(*msg.Case), res.Iters, res.Lat.P50, bw)
		}
		reply.Result = &res
		reply.LatNs = nanos(lat)
	default:
		fmt.Fprintf(log, "# ignored control message %q: %s\n", msg.Kind, msg.Err)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, replyTimeout)
	defer cancel()
	if err := send(sctx, s, msg.From, reply); err != nil {
		fmt.Fprintf(log, "# reply to %s: %v\n", msg.From, err)
	}
}

// serveRun runs one case for a client, within the case timeout, from the
// side's source buffer or, when another client's case holds it, from a
// buffer of its own.
func serveRun(ctx context.Context, s *Side, msg message) (Result, []time.Duration, error) {
	if msg.Case == nil || msg.Dst == nil {
		return Result{}, nil, fmt.Errorf("run request without case or destination: %w", fabric.ErrInvalidArgument)
	}
	c := *msg.Case
	job := Job{Case: c, Dst: *msg.Dst, Seed: msg.Seed, Span: msg.Span, Imm: msg.Imm}
	if s.srcMu.TryLock() {
		defer s.srcMu.Unlock()
	} else {
		src, err := s.privateSource()
		if err != nil {
			return newResult(c), nil, err
		}
		job.src = src
		defer s.releaseSource(src)
	}
	if s.caseTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.caseTimeout)
		defer cancel()
	}
	lat, err := s.Write(ctx, job)
	if err != nil {
		if job.src != nil {
			job.src.failed = true
		}
		return newResult(c), nil, err
	}
	in := s.Info()
	return Summarize(c, lat, in.NICs, in.LinkSpeed), lat, nil
}

// source is a registered buffer writes read from.
type source struct {
	buf    *fabric.HostBuffer
	reg    *fabric.MemoryRegion
	failed bool // a case from it failed: writes may still hold it
}

// privateSource maps and registers a source buffer the size of the
// side's.
func (s *Side) privateSource() (*source, error) {
	b, err := fabric.AllocHost(s.Buf.Len())
	if err != nil {
		return nil, err
	}
	r, err := s.Engine.RegisterHost(b, fabric.AccessLocal)
	if err != nil {
		_ = b.Free()
		return nil, err
	}
	return &source{buf: b, reg: r}, nil
}

// releaseSource unregisters and frees a private source, unless a case
// from it failed: its writes may still be fenced in the engine, and
// Unregister would wait for them; it then stays until the side closes.
func (s *Side) releaseSource(src *source) {
	if src.failed {
		s.spareMu.Lock()
		s.spares = append(s.spares, src.buf)
		s.spareMu.Unlock()
		return
	}
	if s.Engine.Unregister(src.reg) == nil {
		_ = src.buf.Free()
	}
}

// lockedWriter serialises the log lines of concurrent clients.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
