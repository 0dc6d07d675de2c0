package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/fabric"
)

// pipeline is one rank of the ring: a contiguous block of layers (a
// shard, in exo's words), the ring from its predecessor and to its
// successor, and in allgather mode the gather slots of the last layer's
// output.
type pipeline struct {
	*stage
	from, to    int // this rank's layers
	in          *inbox
	out         *outbox
	gin         *inbox  // ranks 0..N-2: the last rank's output
	gout        *outbox // the last rank: to every other rank
	first, last bool
}

func newPipeline(s *stage) (*pipeline, error) {
	me, n := s.r.ID, s.c.Ranks
	p := &pipeline{stage: s, first: me == 0, last: me == n-1}
	p.from, p.to = me*s.c.Layers/n, (me+1)*s.c.Layers/n
	next, prev := (me+1)%n, (me+n-1)%n
	var err error
	// Rank r writes into rank r+1's ring; the last rank's ring to rank 0
	// carries the sampled token back, closing the ring.
	if p.out, err = newOutbox(s.r.Engine, s.lay.ring, me, s.descs[next:next+1]); err != nil {
		return nil, err
	}
	// A single write is sharded over the NICs of both ends: the writer's
	// group is the one its descriptor lists, the target's is ours.
	single := fabric.ExpectedImms(fabric.SingleShape(fabric.Sharded(0)), len(s.descs[prev].NICs), s.nics)
	if p.in, err = newInbox(s.r.Engine, s.lay.ring, s.inbox.Bytes(), prev, s.descs[prev], single); err != nil {
		return nil, err
	}
	if p.last {
		p.gout, err = newOutbox(s.r.Engine, s.lay.gather, me, s.descs[:n-1])
	} else {
		// A scatter delivers one immediate per target; one names us.
		perMsg := fabric.ExpectedImms(fabric.ScatterShape(fabric.ShardPeers(), 1), len(s.descs[n-1].NICs), s.nics)
		p.gin, err = newInbox(s.r.Engine, s.lay.gather, s.inbox.Bytes(), n-1, s.descs[n-1], perMsg)
	}
	return p, err
}

// drain waits until this rank's sends and credits have completed, so
// nothing is in flight when the engines close.
func (p *pipeline) drain(ctx context.Context) error {
	if err := p.stage.drain(ctx); err != nil {
		return err
	}
	for _, in := range []*inbox{p.in, p.gin} {
		if in != nil {
			if err := in.drain(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// prefillResult is one rank's view of the prefill.
type prefillResult struct {
	Compute  time.Duration `json:"compute_ns"`  // this rank's compute
	Elapsed  time.Duration `json:"elapsed_ns"`  // rank 0: until the first token came back
	Checksum uint64        `json:"checksum"`    // the last rank: of the final activations
	HopBytes int           `json:"chunk_bytes"` // one chunk's activation
}

// prefill pushes the prompt through the ring in chunks: rank r works on
// chunk k+1 while rank r+1 works on chunk k, so the stages overlap. The
// last rank samples the first token and sends it to rank 0.
func (p *pipeline) prefill(ctx context.Context) (prefillResult, error) {
	c, h := p.c, p.c.Hidden
	prompt := p.m.prompt(c.Prompt)
	var res prefillResult
	start := time.Now()
	for k, c0 := 0, 0; c0 < c.Prompt; k, c0 = k+1, c0+c.Chunk {
		rows := min(c.Chunk, c.Prompt-c0)
		n := rows * h * 2
		res.HopBytes = max(res.HopBytes, n)
		slot := k % c.Slots
		buf, err := p.workSlot(ctx, slot)
		if err != nil {
			return res, err
		}
		x := acts(buf[:n])
		if p.first {
			for r := range rows {
				p.m.embed(prompt[c0+r], c0+r, x[r*h:(r+1)*h])
			}
		} else if err := p.take(ctx, p.in, buf[:n]); err != nil {
			return res, fmt.Errorf("chunk %d: %w", k, err)
		}
		res.Compute += p.compute(x, p.from, p.to, c.PrefillLayerTime)
		if !p.last {
			if err := p.sendFrom(ctx, p.out, slot, n); err != nil {
				return res, err
			}
			continue
		}
		res.Checksum = checksum(res.Checksum, x)
		if c0+rows == c.Prompt {
			tok := p.m.sample(x[(rows-1)*h:])
			p.tokens = append(p.tokens, tok)
			putToken(buf, tok)
			if err := p.sendFrom(ctx, p.out, slot, 4); err != nil {
				return res, err
			}
		}
	}
	if p.first {
		tok, err := p.takeToken(ctx, p.in)
		if err != nil {
			return res, fmt.Errorf("first token: %w", err)
		}
		p.tokens = append(p.tokens, tok)
		res.Elapsed = time.Since(start)
	}
	return res, nil
}

// take copies the next message of in into dst and returns the slot.
func (p *pipeline) take(ctx context.Context, in *inbox, dst []byte) error {
	msg, err := in.recv(ctx)
	if err != nil {
		return err
	}
	copy(dst, msg)
	return in.release()
}

func (p *pipeline) takeToken(ctx context.Context, in *inbox) (int, error) {
	msg, err := in.recv(ctx)
	if err != nil {
		return 0, err
	}
	tok := getToken(msg)
	return tok, in.release()
}

// decode generates steps tokens after the prefill's, one [1, hidden]
// activation per hop. relay: the last rank sends the token back to rank 0.
// allgather: the last rank writes its output to every other rank, and
// each samples the token itself (rank 0 then starts the next step).
// It returns the tokens this rank saw (none on a middle rank in relay
// mode) and, on rank 0, the time of each step.
func (p *pipeline) decode(ctx context.Context, mode string, steps int) (decodeResult, error) {
	c, h := p.c, p.c.Hidden
	n := h * 2
	res := decodeResult{Mode: mode}
	prev := -1 // the token step k consumes (known on rank 0)
	if p.first {
		prev = p.tokens[0] // the prefill's token starts every mode
	}
	for k := 1; k <= steps; k++ {
		start := time.Now()
		slot := k % c.Slots
		buf, err := p.workSlot(ctx, slot)
		if err != nil {
			return res, err
		}
		x := acts(buf[:n])
		if p.first {
			p.m.embed(prev, c.Prompt+k-1, x)
		} else if err := p.take(ctx, p.in, buf[:n]); err != nil {
			return res, fmt.Errorf("step %d: %w", k, err)
		}
		p.compute(x, p.from, p.to, c.DecodeLayerTime)
		switch {
		case !p.last:
			err = p.sendFrom(ctx, p.out, slot, n)
		case mode == "relay":
			tok := p.m.sample(x)
			res.Tokens = append(res.Tokens, tok)
			putToken(buf, tok)
			err = p.sendFrom(ctx, p.out, slot, 4)
		default:
			res.Tokens = append(res.Tokens, p.m.sample(x))
			err = p.sendFrom(ctx, p.gout, slot, n)
		}
		if err != nil {
			return res, fmt.Errorf("step %d: %w", k, err)
		}
		if p.last {
			continue
		}
		var tok int
		switch {
		case mode == "allgather":
			msg, err := p.gin.recv(ctx)
			if err != nil {
				return res, fmt.Errorf("step %d output: %w", k, err)
			}
			tok = p.m.sample(acts(msg[:n]))
			err = p.gin.release()
			if err != nil {
				return res, err
			}
		case p.first:
			if tok, err = p.takeToken(ctx, p.in); err != nil {
				return res, fmt.Errorf("step %d token: %w", k, err)
			}
		default:
			continue // relay: a middle rank never sees the token
		}
		res.Tokens = append(res.Tokens, tok)
		if p.first {
			prev = tok
			res.Times = append(res.Times, time.Since(start))
		}
	}
	return res, nil
}
