package fabricbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// Ranks mode: W processes bootstrap through fabric/rendezvous, exchange
// their main addresses and descriptors with one AllGather, and run every
// case in a ring: rank r writes into rank r+1 while rank r-1 writes into
// it, and each rank checks what it received. A barrier starts each case,
// so nobody writes into a buffer whose previous case is still being
// checked. After each case every rank shares its row and its verdict on
// what it received, so rank 0 reports every writer->target pair of the
// case as soon as the case completes.

// rankCard is what each rank publishes at startup.
type rankCard struct {
	Addr fabric.Address    `json:"addr"`
	Desc fabric.Descriptor `json:"desc"`
	Info PeerInfo          `json:"info"`
}

// rankOutcome is what each rank shares after a case: the row of the
// case it wrote (timed by it) and its verdict on the case it received.
type rankOutcome struct {
	Wrote    Result `json:"wrote"`
	Received string `json:"received"` // "" when the check passed or did not apply
}

// Ranks runs spec as one rank of the job cfg describes. Every rank returns
// a report: rank 0's holds every pair, the others' only their own writes;
// sink (nil: none) sees the header and each row as its case completes.
// The error is non-nil when any case failed anywhere (rank 0) or on this
// rank's pair (the others).
func Ranks(ctx context.Context, spec Spec, cfg rendezvous.Config, sink Sink) (*Report, error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := refuseRead(spec, "ranks"); err != nil {
		return nil, err
	}
	jctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	g, err := rendezvous.Join(jctx, cfg)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	defer g.Close()
	side, err := openSide(ctx, spec, "rank")
	if err != nil {
		return nil, fmt.Errorf("rank %d: open engine: %w", g.Rank(), err)
	}
	defer side.Close()
	if err := side.AddSource(); err != nil {
		return nil, fmt.Errorf("rank %d: %w", g.Rank(), err)
	}
	r := &ring{g: g, side: side, spec: effective(spec, side.Info().Transport)}
	return r.run(ctx, sink)
}

type ring struct {
	g     *rendezvous.Group
	side  *Side
	spec  Spec
	cards []rankCard
}

func (r *ring) collective(ctx context.Context, f func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, r.spec.Timeout)
	defer cancel()
	return f(cctx)
}

func (r *ring) run(ctx context.Context, sink Sink) (*Report, error) {
	g, me, w := r.g, r.g.Rank(), r.g.WorldSize()
	in := r.side.Info()
	mine, err := json.Marshal(rankCard{Addr: r.side.Engine.MainAddress(), Desc: r.side.Desc, Info: in})
	if err != nil {
		return nil, err
	}
	var all [][]byte
	if err := r.collective(ctx, func(c context.Context) (err error) { all, err = g.AllGather(c, mine); return }); err != nil {
		return nil, fmt.Errorf("rank %d: exchange descriptors: %w", me, err)
	}
	span := uint64(r.side.Buf.Len())
	for i, b := range all {
		var card rankCard
		if err := json.Unmarshal(b, &card); err != nil {
			return nil, fmt.Errorf("rank %d: card of rank %d: %v: %w", me, i, err, fabric.ErrBadEncoding)
		}
		if card.Info.NICs != in.NICs {
			return nil, fmt.Errorf("rank %d has %d nics, rank %d %d: %w", i, card.Info.NICs, me, in.NICs, fabric.ErrNICMismatch)
		}
		span = min(span, card.Info.Buffer)
		r.cards = append(r.cards, card)
	}
	h := newHeader("ranks", r.spec, in)
	h.World = w
	rep := newReport(h, sink)
	next, prev := (me+1)%w, (me+w-1)%w
	var errs []error
	failedCheck := false
	for i, cs := range r.spec.Cases() {
		imm := uint32(0x0FE00000 + i)
		seed := r.spec.Seed + uint64(imm)
		var out rankOutcome
		var err error
		out.Wrote, out.Received, err = r.runCase(ctx, cs, Job{Case: cs, Dst: r.cards[next].Desc, Seed: seed, Span: span, Rank: me, Imm: imm}, prev)
		if err != nil {
			// A broken collective leaves the ring unusable: stop here.
			return rep, fmt.Errorf("rank %d: %s: %w", me, caseName(cs), err)
		}
		b, err := json.Marshal(out)
		if err != nil {
			return rep, err
		}
		if err := r.collective(ctx, func(c context.Context) (err error) { all, err = g.AllGather(c, b); return }); err != nil {
			return rep, fmt.Errorf("rank %d: share the results of %s: %w", me, caseName(cs), err)
		}
		outs := make([]rankOutcome, w)
		for k := range all {
			if err := json.Unmarshal(all[k], &outs[k]); err != nil {
				return rep, fmt.Errorf("rank %d: results of rank %d: %v: %w", me, k, err, fabric.ErrBadEncoding)
			}
			failedCheck = failedCheck || outs[k].Received != ""
		}
		for k := range outs {
			if k != me && me != 0 {
				continue // rank 0 reports every pair, the others their own
			}
			res := outs[k].Wrote
			res.Pair = fmt.Sprintf("%d->%d", k, (k+1)%w)
			if res.Error == "" {
				if msg := outs[(k+1)%w].Received; msg != "" {
					res.Error, res.Verified = msg, false
				} else {
					res.Verified = res.Checked
				}
			}
			if res.Error != "" {
				errs = append(errs, fmt.Errorf("pair %s: %s", res.Pair, res.Error))
			}
			rep.add(res)
		}
	}
	err = errors.Join(errs...)
	if failedCheck {
		err = fmt.Errorf("%w: %w", ErrVerify, err)
	}
	return rep, err
}

// runCase runs one case of the ring. recvErr is the verdict on what this
// rank received from prev; err is a collective failure that ends the run.
func (r *ring) runCase(ctx context.Context, cs Case, j Job, prev int) (res Result, recvErr string, err error) {
	res = newResult(cs)
	var tgt *Target
	if cs.Verify {
		if tgt, err = r.side.Expect(j, r.cards[prev].Info.NICs, r.spec.Corrupt); err != nil {
			return res, "", err
		}
		defer tgt.Cancel()
	}
	if err := r.collective(ctx, r.g.Barrier); err != nil {
		return res, "", err
	}
	cctx, cancel := context.WithTimeout(ctx, r.spec.Timeout)
	defer cancel()
	lat, werr := r.side.Write(cctx, j)
	if werr != nil {
		res.Error = werr.Error()
	} else {
		in := r.side.Info()
		res = Summarize(cs, lat, in.NICs, in.LinkSpeed)
	}
	if tgt != nil {
		// The writer into this rank runs the same iterations at the same
		// time, so the case's deadline covers both.
		if cerr := tgt.Check(cctx, j.Seed, prev); cerr != nil {
			recvErr = cerr.Error()
		}
	}
	return res, recvErr, nil
}
