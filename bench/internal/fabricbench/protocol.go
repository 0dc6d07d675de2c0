package fabricbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ferryrdma/ferry/fabric"
)

// The control protocol runs over the engine's own two-sided side channel
// (Send and BouncingRecvs on NIC 0 of each main worker), so a client needs
// nothing but the server's main address. Every message is one JSON object;
// the client numbers its requests and the server echoes the number.
//
//	client                         server
//	hello{from}              ->
//	                         <-    hello{info}
//	run{from, dst, case, seed, span, imm}  ->   writes into dst
//	                         <-    result{result} or result{err}
//
// The server is the writer, as in the reference tool; the client owns the
// destination buffer and checks verified cases itself.

const (
	msgHello  = "hello"
	msgRun    = "run"
	msgResult = "result"

	// recvSlots and msgMax size each side's bouncing receives.
	recvSlots = 8
	msgMax    = 16 << 10
)

// errNoReply marks a request the server never answered.
var errNoReply = errors.New("no reply")

type message struct {
	Kind   string             `json:"kind"`
	Seq    uint64             `json:"seq"`
	From   fabric.Address     `json:"from"`
	Dst    *fabric.Descriptor `json:"dst,omitempty"`
	Case   *Case              `json:"case,omitempty"`
	Seed   uint64             `json:"seed,omitempty"`
	Span   uint64             `json:"span,omitempty"`
	Imm    uint32             `json:"imm,omitempty"`
	Info   *PeerInfo          `json:"info,omitempty"`
	Result *Result            `json:"result,omitempty"`
	// LatNs are a result's timed iterations, in nanoseconds, in the order
	// they ran: a client that runs a case in rounds (see pairs.go) merges
	// them.
	LatNs []int64 `json:"lat_ns,omitempty"`
	Err   string  `json:"err,omitempty"`
}

// mailbox receives control messages on a side until closed.
type mailbox struct {
	in      chan message
	quit    chan struct{}
	dropped atomic.Int64
}

func newMailbox(s *Side) (*mailbox, error) {
	m := &mailbox{in: make(chan message, 4*recvSlots), quit: make(chan struct{})}
	err := s.Engine.BouncingRecvs(recvSlots, msgMax, func(b []byte) {
		var msg message
		if err := json.Unmarshal(b, &msg); err != nil {
			msg = message{Kind: "bad", Err: fmt.Sprintf("undecodable control message of %d bytes: %v", len(b), err)}
		}
		// Blocking here would hold the engine's dispatcher: a reader
		// that does not keep up loses messages (their senders time
		// out) rather than stalling every other callback.
		select {
		case m.in <- msg:
		case <-m.quit:
		default:
			m.dropped.Add(1)
		}
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("post control receives: %w", err)
	}
	return m, nil
}

func (m *mailbox) close() { close(m.quit) }

// send delivers msg to the peer at to and waits for the send completion.
func send(ctx context.Context, s *Side, to fabric.Address, msg message) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode %s message: %w", msg.Kind, fabric.ErrInvalidArgument)
	}
	t := fabric.NewTransfer()
	if err := s.Engine.Send(ctx, to, b, fabric.Notify(t)); err != nil {
		return fmt.Errorf("send %s: %w", msg.Kind, err)
	}
	if err := t.Wait(ctx); err != nil {
		return fmt.Errorf("send %s: %w", msg.Kind, err)
	}
	return nil
}

// Client drives a server: it owns the destination buffer and checks the
// verified cases.
type Client struct {
	side   *Side
	server fabric.Address
	box    *mailbox
	seq    uint64
	// lost, when set, reports a loss the client's own engine cannot see:
	// in loopback, the server engine having declared the client lost (its
	// reply, sent to a lost peer, would never come).
	lost func() error
	// Server is what the server said about itself.
	Server PeerInfo
}

// Dial greets the server at addr from side s.
func Dial(ctx context.Context, s *Side, addr fabric.Address) (*Client, error) {
	return dial(ctx, s, addr, nil)
}

// dial is Dial with the lost check of a loopback client (Client.lost).
func dial(ctx context.Context, s *Side, addr fabric.Address, lost func() error) (*Client, error) {
	box, err := newMailbox(s)
	if err != nil {
		return nil, err
	}
	c := &Client{side: s, server: addr, box: box, lost: lost}
	reply, err := c.call(ctx, message{Kind: msgHello})
	if err != nil {
		box.close()
		return nil, err
	}
	if reply.Info == nil {
		box.close()
		return nil, fmt.Errorf("hello reply without info: %w", ErrRemote)
	}
	c.Server = *reply.Info
	return c, nil
}

// Close stops receiving; the side stays open.
func (c *Client) Close() { c.box.close() }

// call sends req and waits for the reply with its number.
func (c *Client) call(ctx context.Context, req message) (message, error) {
	c.seq++
	req.Seq, req.From = c.seq, c.side.Engine.MainAddress()
	if err := send(ctx, c.side, c.server, req); err != nil {
		return message{}, err
	}
	// A peer declared lost, on either side, means no reply: the wait ends
	// within the engines' liveness checks instead of at the case timeout.
	tick := time.NewTicker(lostPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return message{}, fmt.Errorf("waiting for the server's %s reply: %w: %w: %w", req.Kind, errNoReply, fabric.ErrTimeout, ctx.Err())
		case m := <-c.box.in:
			if m.Seq == req.Seq {
				return m, nil
			}
		case <-tick.C:
			if err := c.peerLost(); err != nil {
				return message{}, fmt.Errorf("waiting for the server's %s reply: %w: %w", req.Kind, errNoReply, err)
			}
		}
	}
}

// lostPollInterval is how often a client waiting for a reply looks for a
// lost peer.
const lostPollInterval = 50 * time.Millisecond

// peerLost returns the loss of the server (as this side's engine sees it)
// or of this client (as a loopback server sees it), or nil.
func (c *Client) peerLost() error {
	if err := c.side.Engine.PeerStatus(c.server); err != nil {
		return fmt.Errorf("the server is lost: %w", err)
	}
	if c.lost != nil {
		if err := c.lost(); err != nil {
			return fmt.Errorf("the server lost this client: %w", err)
		}
	}
	return nil
}

// Run runs every case of spec against the server and returns the report
// (mode "client"); sink (nil: none) sees the header and every case as it
// completes. The error is non-nil when any case failed; it wraps
// ErrVerify when a check failed.
func (c *Client) Run(ctx context.Context, spec Spec, sink Sink) (*Report, error) {
	return c.run(ctx, spec, "client", sink)
}

func (c *Client) run(ctx context.Context, spec Spec, mode string, sink Sink) (*Report, error) {
	spec = effective(spec, c.Server.Transport)
	rep := newReport(newHeader(mode, spec, c.Server), sink)
	span := min(c.Server.Buffer, uint64(c.side.Buf.Len()))
	var errs []error
	cases := spec.Cases()
	partner := readPairs(cases)
	// A pair runs when its first case comes up; the row of its second
	// waits here for its own place, so rows keep the order of Cases.
	ran := make(map[int]Result)
	for i, cs := range cases {
		if res, ok := ran[i]; ok {
			rep.add(res)
			delete(ran, i)
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("stopped before %s %s: %w", cs.Workload, FormatBytes(cs.Bytes), err))
			break
		}
		var err error
		if j := partner[i]; j > i {
			var res [2]Result
			res, err = c.runPair(ctx, spec, cases, i, j, span)
			if err != nil {
				errs = append(errs, err)
			}
			rep.add(res[0])
			ran[j] = res[1]
		} else {
			var res Result
			res, _, err = c.runCase(ctx, spec, cs, span, caseImm(i))
			if err != nil {
				res.Error = err.Error()
				errs = append(errs, err)
			}
			rep.add(res)
		}
		if errors.Is(err, errNoReply) {
			// The server is gone or stuck: every further case would wait
			// out its whole timeout too.
			break
		}
	}
	// A run cut short still reports the rows of pairs that ran.
	for _, i := range slices.Sorted(maps.Keys(ran)) {
		rep.add(ran[i])
	}
	return rep, errors.Join(errs...)
}

// caseImm is the immediate (and the seed offset) of the i-th case of a
// run.
func caseImm(i int) uint32 { return uint32(0x0FE00000 + i) }

// runCase runs cs on the server and returns its row and its timed
// iterations.
func (c *Client) runCase(ctx context.Context, spec Spec, cs Case, span uint64, imm uint32) (Result, []time.Duration, error) {
	res := newResult(cs)
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	job := Job{Case: cs, Dst: c.side.Desc, Seed: spec.Seed + uint64(imm), Span: span, Imm: imm}
	var tgt *Target
	if cs.Verify && cs.Workload == Read {
		if err := c.side.offerRead(job); err != nil {
			return res, nil, err
		}
	} else if cs.Verify {
		var err error
		if tgt, err = c.side.Expect(job, c.Server.NICs, spec.Corrupt); err != nil {
			return res, nil, err
		}
	}
	reply, err := c.call(ctx, message{Kind: msgRun, Dst: &job.Dst, Case: &cs, Seed: job.Seed, Span: span, Imm: imm})
	if err == nil && reply.Err != "" {
		err = fmt.Errorf("server: %s: %w", reply.Err, ErrRemote)
	}
	if err == nil && reply.Result == nil {
		err = fmt.Errorf("result reply without result: %w", ErrRemote)
	}
	if err != nil {
		if tgt != nil {
			tgt.Cancel()
		}
		return res, nil, err
	}
	res = *reply.Result
	lat := durations(reply.LatNs)
	res.Checked = cs.Verify
	// The reader checked every byte it read before it replied.
	res.Verified = cs.Verify && cs.Workload == Read
	if tgt != nil {
		if err := tgt.Check(ctx, job.Seed, 0); err != nil {
			return res, lat, err
		}
		res.Verified = true
	}
	return res, lat, nil
}

// caseName says which case c is: "paged 4 KiB x 100", "single 1 MiB", "imm".
func caseName(c Case) string {
	switch c.Workload {
	case Paged:
		return fmt.Sprintf("%s %s x %d", c.Workload, FormatBytes(c.Bytes), c.Pages)
	case Single, Read:
		return c.Workload + " " + FormatBytes(c.Bytes)
	}
	return c.Workload
}

// effective adjusts spec to the transport: the null provider moves no
// bytes, so there is nothing to check.
func effective(s Spec, transport string) Spec {
	if transport == "null" {
		s.Verify = false
	}
	return s
}
